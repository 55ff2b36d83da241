import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.TreeMap;
import java.util.concurrent.Future;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.consumer.OffsetAndTimestamp;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.Metric;
import org.apache.kafka.common.MetricName;
import org.apache.kafka.common.PartitionInfo;
import org.apache.kafka.common.TopicPartition;

/** Producer and consumer scenarios: round trips, the consumer's offset API, acks modes. */
final class DataScenarios {
    private DataScenarios() {}

    /** An hour ago on a whole second: recent enough for any retention, fixed within a run. */
    static long recentBase() {
        return (System.currentTimeMillis() - 3_600_000L) / 1000 * 1000;
    }

    /** Polls until some records arrive; fails after the limit. */
    static List<ConsumerRecord<byte[], byte[]>> pollSome(KafkaConsumer<byte[], byte[]> consumer,
            Duration limit) {
        long deadline = System.nanoTime() + limit.toNanos();
        while (true) {
            ConsumerRecords<byte[], byte[]> records = consumer.poll(Duration.ofMillis(500));
            if (!records.isEmpty()) {
                List<ConsumerRecord<byte[], byte[]>> out = new ArrayList<>();
                records.forEach(out::add);
                return out;
            }
            if (System.nanoTime() > deadline) {
                throw new IllegalStateException("no records within " + limit);
            }
        }
    }

    /** Polls until poll() throws; reports the exception (or no error and what was read). */
    static Map<String, Object> pollForError(KafkaConsumer<byte[], byte[]> consumer, Duration limit) {
        long deadline = System.nanoTime() + limit.toNanos();
        int records = 0;
        while (System.nanoTime() < deadline) {
            try {
                records += consumer.poll(Duration.ofMillis(500)).count();
            } catch (RuntimeException e) {
                Throwable root = Errors.root(e);
                return Json.obj("error", root.getClass().getSimpleName(),
                        "message", root.getMessage(), "records", records);
            }
        }
        return Json.obj("error", null, "message", null, "records", records);
    }

    private static Map<String, Object> producerMetrics(KafkaProducer<?, ?> producer) {
        Map<String, Object> out = new TreeMap<>();
        List<String> wanted = List.of("record-retry-total", "record-error-total",
                "records-per-request-avg", "batch-size-avg", "compression-rate-avg",
                "batch-split-total");
        for (Map.Entry<MetricName, ? extends Metric> e : producer.metrics().entrySet()) {
            MetricName name = e.getKey();
            if (name.group().equals("producer-metrics") && wanted.contains(name.name())) {
                out.put(name.name(), e.getValue().metricValue());
            }
        }
        return out;
    }

    static void produceConsume(Harness.Ctx ctx) throws Exception {
        Harness.Out out = ctx.out();
        Harness.Args args = ctx.args();
        String topic = args.str("topic", "data");
        int partitions = args.integer("partitions", 3);
        int count = args.integer("records", 300);
        String mode = args.str("mode", "both");
        long seed = args.longValue("seed", 1);
        long base = args.longValue("base_timestamp", recentBase());
        boolean produce = mode.equals("both") || mode.equals("produce");
        boolean consume = mode.equals("both") || mode.equals("consume");
        if (!produce && !consume) {
            throw new IllegalArgumentException("mode must be both, produce or consume");
        }
        Map<String, Object> producerProps = new HashMap<>();
        producerProps.put(ProducerConfig.COMPRESSION_TYPE_CONFIG, args.str("compression", "none"));
        producerProps.put(ProducerConfig.ACKS_CONFIG, args.str("acks", "all"));
        producerProps.put(ProducerConfig.ENABLE_IDEMPOTENCE_CONFIG, args.bool("idempotence", true));
        producerProps.put(ProducerConfig.LINGER_MS_CONFIG, args.integer("linger_ms", 5));
        producerProps.put(ProducerConfig.BATCH_SIZE_CONFIG, args.integer("batch_size", 16384));
        producerProps.put(ProducerConfig.MAX_IN_FLIGHT_REQUESTS_PER_CONNECTION,
                args.integer("max_in_flight", 5));
        Map<String, Object> consumerProps = new HashMap<>();
        consumerProps.put(ConsumerConfig.ISOLATION_LEVEL_CONFIG,
                args.str("isolation", "read_uncommitted"));
        int fetchMax = args.integer("fetch_max_bytes", -1);
        if (fetchMax > 0) {
            consumerProps.put(ConsumerConfig.FETCH_MAX_BYTES_CONFIG, fetchMax);
            consumerProps.put(ConsumerConfig.MAX_PARTITION_FETCH_BYTES_CONFIG, fetchMax);
        }
        int maxPoll = args.integer("max_poll_records", -1);
        if (maxPoll > 0) {
            consumerProps.put(ConsumerConfig.MAX_POLL_RECORDS_CONFIG, maxPoll);
        }
        List<Gen.Rec> recs = Gen.records(count, partitions, seed, base,
                args.bool("explicit_partitions", true), args.integer("large_every", 50), 0);
        Map<String, String> topicConfigs = Clients.parseConfigs(args.str("topic_config", ""));

        Admin admin = null;
        KafkaProducer<byte[], byte[]> producer = null;
        KafkaConsumer<byte[], byte[]> consumer = null;
        try {
            if (produce) {
                out.step("createTopics");
                admin = Clients.admin(ctx.bootstrap());
                Clients.createTopic(admin, topic, partitions, topicConfigs);
                out.step("send " + count + " records and flush");
                producer = Clients.producer(ctx.bootstrap(), producerProps);
                List<RecordMetadata> sent = Gen.send(producer, topic, recs);
                for (int n = 0; n < recs.size(); n++) {
                    out.emit("sent", "record", recs.get(n).json(),
                            "metadata", Clients.metadata(sent.get(n)));
                }
                out.emit("producer_metrics", "metrics", producerMetrics(producer));
                Clients.close(producer);
                producer = null;
            }
            if (consume) {
                out.step("beginningOffsets/endOffsets");
                consumer = Clients.consumer(ctx.bootstrap(), consumerProps);
                List<TopicPartition> tps = Clients.partitions(topic, partitions);
                Map<TopicPartition, Long> ends = consumer.endOffsets(tps, Clients.API_TIMEOUT);
                out.emit("offsets", "beginning", Clients.offsets(
                        consumer.beginningOffsets(tps, Clients.API_TIMEOUT)),
                        "end", Clients.offsets(ends));
                out.step("assign, seekToBeginning, poll to the end offsets");
                consumer.assign(tps);
                consumer.seekToBeginning(tps);
                for (ConsumerRecord<byte[], byte[]> r
                        : Clients.readUntil(consumer, ends, Duration.ofSeconds(30))) {
                    out.emit("received", "record", Clients.received(r));
                }
            }
        } finally {
            Clients.close(consumer);
            Clients.close(producer);
            Clients.close(admin);
        }
    }

    static void consumerApi(Harness.Ctx ctx) throws Exception {
        Harness.Out out = ctx.out();
        String topic = ctx.args().str("topic", "positions");
        long base = ctx.args().longValue("base_timestamp", recentBase());
        TopicPartition p0 = new TopicPartition(topic, 0);
        TopicPartition p1 = new TopicPartition(topic, 1);
        List<TopicPartition> tps = List.of(p0, p1);
        Admin admin = Clients.admin(ctx.bootstrap());
        KafkaProducer<byte[], byte[]> producer = null;
        List<KafkaConsumer<byte[], byte[]>> consumers = new ArrayList<>();
        try {
            out.step("createTopics with 2 partitions");
            Clients.createTopic(admin, topic, 2, Map.of());
            out.step("produce 10 records to partition 0 in two batches (timestamps base + i s)");
            producer = Clients.producer(ctx.bootstrap(), Map.of(ProducerConfig.LINGER_MS_CONFIG, 50));
            List<Future<RecordMetadata>> futures = new ArrayList<>();
            for (int i = 0; i < 10; i++) {
                futures.add(producer.send(new ProducerRecord<>(topic, 0, base + i * 1000L,
                        Clients.utf8("k" + i), Clients.utf8("v" + i))));
                if (i == 4) {
                    producer.flush();
                }
            }
            producer.flush();
            for (Future<RecordMetadata> f : futures) {
                out.emit("sent", "metadata", Clients.metadata(Clients.get(f)));
            }
            out.emit("base", "timestamp", base);

            KafkaConsumer<byte[], byte[]> consumer = Clients.consumer(ctx.bootstrap(), Map.of());
            consumers.add(consumer);
            out.step("beginningOffsets/endOffsets");
            out.emit("offsets", "beginning", Clients.offsets(
                    consumer.beginningOffsets(tps, Clients.API_TIMEOUT)),
                    "end", Clients.offsets(consumer.endOffsets(tps, Clients.API_TIMEOUT)));

            consumer.assign(tps);
            out.step("position with no offset and auto.offset.reset=none");
            out.emit("position_error", "case", "no_offset", "outcome",
                    Errors.outcome(() -> consumer.position(p0, Clients.API_TIMEOUT)));

            out.step("seekToBeginning / seekToEnd positions");
            consumer.seekToBeginning(tps);
            out.emit("positions", "case", "beginning",
                    "p0", consumer.position(p0, Clients.API_TIMEOUT),
                    "p1", consumer.position(p1, Clients.API_TIMEOUT));
            consumer.seekToEnd(tps);
            out.emit("positions", "case", "end",
                    "p0", consumer.position(p0, Clients.API_TIMEOUT),
                    "p1", consumer.position(p1, Clients.API_TIMEOUT));

            out.step("seek to offset 7 (inside the second batch) and poll");
            consumer.seek(p0, 7);
            List<Long> offsets = new ArrayList<>();
            List<String> values = new ArrayList<>();
            while (consumer.position(p0, Clients.API_TIMEOUT) < 10) {
                for (ConsumerRecord<byte[], byte[]> r : pollSome(consumer, Duration.ofSeconds(20))) {
                    offsets.add(r.offset());
                    values.add(new String(r.value(), StandardCharsets.UTF_8));
                }
            }
            out.emit("after_seek", "offsets", offsets, "values", values,
                    "position", consumer.position(p0, Clients.API_TIMEOUT),
                    "lag", consumer.currentLag(p0));

            out.step("offsetsForTimes");
            Map<String, Map<TopicPartition, Long>> queries = new LinkedHashMap<>();
            queries.put("exact_3", Map.of(p0, base + 3000));
            queries.put("between_3_4", Map.of(p0, base + 3500));
            queries.put("before_first", Map.of(p0, base - 1));
            queries.put("after_last", Map.of(p0, base + 100_000));
            queries.put("empty_partition", Map.of(p1, base));
            for (Map.Entry<String, Map<TopicPartition, Long>> q : queries.entrySet()) {
                Map<TopicPartition, OffsetAndTimestamp> found =
                        consumer.offsetsForTimes(q.getValue(), Clients.API_TIMEOUT);
                TopicPartition tp = q.getValue().keySet().iterator().next();
                OffsetAndTimestamp oat = found.get(tp);
                out.emit("offsets_for_times", "case", q.getKey(), "found", oat == null ? null
                        : Json.obj("offset", oat.offset(), "timestamp", oat.timestamp(),
                                "leader_epoch", oat.leaderEpoch()));
            }

            out.step("seek past the end with auto.offset.reset=none");
            consumer.seek(p0, 100);
            out.emit("out_of_range", "reset", "none",
                    "outcome", pollForError(consumer, Duration.ofSeconds(20)));

            out.step("seek past the end with auto.offset.reset=earliest");
            KafkaConsumer<byte[], byte[]> earliest = Clients.consumer(ctx.bootstrap(),
                    Map.of(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest"));
            consumers.add(earliest);
            earliest.assign(List.of(p0));
            earliest.seek(p0, 100);
            List<ConsumerRecord<byte[], byte[]>> reset = pollSome(earliest, Duration.ofSeconds(20));
            out.emit("out_of_range", "reset", "earliest", "first_offset", reset.get(0).offset());

            out.step("seek with a leader epoch (validated with OffsetForLeaderEpoch)");
            Optional<Integer> epoch = reset.get(0).leaderEpoch();
            if (epoch.isPresent()) {
                earliest.seek(p0, new OffsetAndMetadata(4, epoch, ""));
                List<ConsumerRecord<byte[], byte[]>> afterEpoch =
                        pollSome(earliest, Duration.ofSeconds(20));
                out.emit("epoch_seek", "epoch", epoch.get(),
                        "first_offset", afterEpoch.get(0).offset());
            } else {
                out.emit("epoch_seek", "epoch", null, "first_offset", null);
            }

            out.step("assign with auto.offset.reset=latest");
            KafkaConsumer<byte[], byte[]> latest = Clients.consumer(ctx.bootstrap(),
                    Map.of(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "latest"));
            consumers.add(latest);
            latest.assign(List.of(p0));
            out.emit("positions", "case", "reset_latest",
                    "p0", latest.position(p0, Clients.API_TIMEOUT), "p1", null);

            out.step("partitionsFor / listTopics");
            List<Object> parts = new ArrayList<>();
            for (PartitionInfo info : latest.partitionsFor(topic, Clients.API_TIMEOUT)) {
                parts.add(Json.obj("partition", info.partition(),
                        "leader", info.leader() == null ? null : info.leader().id()));
            }
            out.emit("partitions_for", "partitions", parts);
            out.emit("consumer_topics", "names",
                    new java.util.TreeSet<>(latest.listTopics(Clients.API_TIMEOUT).keySet()));
        } finally {
            for (KafkaConsumer<byte[], byte[]> c : consumers) {
                Clients.close(c);
            }
            Clients.close(producer);
            Clients.close(admin);
        }
    }

    static void producerModes(Harness.Ctx ctx) throws Exception {
        Harness.Out out = ctx.out();
        String topic = ctx.args().str("topic", "modes");
        TopicPartition p0 = new TopicPartition(topic, 0);
        Admin admin = Clients.admin(ctx.bootstrap());
        List<KafkaProducer<byte[], byte[]>> producers = new ArrayList<>();
        KafkaConsumer<byte[], byte[]> consumer = null;
        try {
            out.step("createTopics with max.message.bytes=4096");
            Clients.createTopic(admin, topic, 1, Map.of("max.message.bytes", "4096"));
            Map<String, Map<String, Object>> modes = new LinkedHashMap<>();
            modes.put("acks1", Map.of(ProducerConfig.ACKS_CONFIG, "1",
                    ProducerConfig.ENABLE_IDEMPOTENCE_CONFIG, false));
            modes.put("acks0", Map.of(ProducerConfig.ACKS_CONFIG, "0",
                    ProducerConfig.ENABLE_IDEMPOTENCE_CONFIG, false));
            modes.put("idempotent", Map.of());
            KafkaProducer<byte[], byte[]> idempotent = null;
            int expected = 0;
            for (Map.Entry<String, Map<String, Object>> mode : modes.entrySet()) {
                out.step("produce 5 records with " + mode.getKey());
                KafkaProducer<byte[], byte[]> producer =
                        Clients.producer(ctx.bootstrap(), mode.getValue());
                producers.add(producer);
                idempotent = producer;
                List<Future<RecordMetadata>> futures = new ArrayList<>();
                for (int i = 0; i < 5; i++) {
                    futures.add(producer.send(new ProducerRecord<>(topic, 0, null,
                            Clients.utf8(mode.getKey() + "-" + i))));
                }
                producer.flush();
                for (Future<RecordMetadata> f : futures) {
                    out.emit("sent", "mode", mode.getKey(),
                            "metadata", Clients.metadata(Clients.get(f)));
                }
                expected += 5;
            }

            out.step("an idempotent send larger than max.message.bytes");
            final KafkaProducer<byte[], byte[]> last = idempotent;
            byte[] big = Gen.randomBytes(new java.util.Random(7), 10_000);
            out.emit("too_large", "outcome", Errors.outcome(() -> Clients.metadata(Clients.get(
                    last.send(new ProducerRecord<>(topic, 0, null, big))))));
            out.step("the same idempotent producer sends again");
            out.emit("sent", "mode", "after_too_large", "metadata", Clients.metadata(Clients.get(
                    last.send(new ProducerRecord<>(topic, 0, null, Clients.utf8("after"))))));
            expected += 1;

            out.step("read everything back (acks=0 records may land late)");
            consumer = Clients.consumer(ctx.bootstrap(), Map.of());
            consumer.assign(List.of(p0));
            consumer.seekToBeginning(List.of(p0));
            List<Object> got = new ArrayList<>();
            long deadline = System.nanoTime() + Duration.ofSeconds(30).toNanos();
            while (got.size() < expected) {
                if (System.nanoTime() > deadline) {
                    throw new IllegalStateException("read " + got.size() + " of " + expected
                            + " records: " + got);
                }
                for (ConsumerRecord<byte[], byte[]> r : consumer.poll(Duration.ofMillis(500))) {
                    got.add(Json.obj("offset", r.offset(),
                            "value_text", new String(r.value(), StandardCharsets.UTF_8)));
                }
            }
            out.emit("received", "records", got);

            out.step("send to an unknown topic (auto-created through Metadata)");
            out.emit("auto_create", "outcome", Errors.outcome(() -> Clients.metadata(Clients.get(
                    last.send(new ProducerRecord<>(topic + "-auto", null, Clients.utf8("auto")))))));
        } finally {
            Clients.close(consumer);
            for (KafkaProducer<byte[], byte[]> p : producers) {
                Clients.close(p);
            }
            Clients.close(admin);
        }
    }
}
