"""Page views through Spark: a data pipeline on Strom with Spark's own Kafka connector.

- `events`: page-view events with deterministic event times, as the services emit them.
- `produce`: the services' side, with a stock Kafka client: create topics, produce events.
- `readback`: a dashboard's side: read the job's window counts back.
- `session`: the Spark session (local mode, the `spark-sql-kafka-0-10` connector fetched
  by Spark itself).
- `stream`: the Structured Streaming job: page views in, views per page per window out.
- `batch`: the batch job: views per page over a fixed offset range.
- `python -m examples.pageviews`: the whole pipeline once, on a throwaway broker.
"""
