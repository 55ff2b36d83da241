"""`strom topic|group|produce|consume|cluster|config`: the command line for any Kafka cluster.

It speaks the Kafka protocol through confluent-kafka (librdkafka), so it works the same
against Strom and Apache Kafka, and through `strom.wire` for what librdkafka does not ask
(DescribeQuorum). It is an extra (`pip install 'strom[cli]'`: click, rich, confluent-kafka);
the broker's own commands (`strom serve`, `strom format`) never need it.

- `app`: the click group, global options, exit codes, one-line errors, shell completion.
- `session`: the connection to a cluster (admin client, producer, consumer; timeouts; errors).
- `output`: tables for people, JSON for scripts, progress bars.
- `topics`, `groups`, `records` (produce and consume), `cluster`, `configs`: the commands.
- `quorum`: DescribeQuorum over `strom.wire`.

Imports: `strom.wire` and `strom.config` only; never the broker (`lint-imports` checks it).
"""
