import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.ListOffsetsOptions;
import org.apache.kafka.clients.admin.ListOffsetsResult.ListOffsetsResultInfo;
import org.apache.kafka.clients.admin.OffsetSpec;
import org.apache.kafka.clients.admin.RecordsToDelete;
import org.apache.kafka.clients.admin.TopicDescription;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetOutOfRangeException;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.IsolationLevel;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.TopicPartitionInfo;

/**
 * The access patterns of Spark's Kafka source and sink, written from their documented behaviour:
 * the driver plans offset ranges with the Admin client (describeTopics, listOffsets), executors
 * read each range with a cached, group-less consumer (assign, seek before every poll,
 * auto.offset.reset=none, data-loss detection via seekToBeginning/seekToEnd positions), and sink
 * tasks each write through their own producer (send with callback, flush, check).
 */
final class SparkScenarios {
    private SparkScenarios() {}

    private static final Duration POLL = Duration.ofMillis(1000);
    private static final Duration RANGE_LIMIT = Duration.ofSeconds(30);

    /**
     * Executor-side consumer settings as Spark's source sets them. Spark also sets a generated
     * group.id (it never joins or commits); groupId "" leaves it out.
     */
    static KafkaConsumer<byte[], byte[]> executorConsumer(String bootstrap, String isolation,
            String groupId) {
        Map<String, Object> props = new HashMap<>();
        if (!groupId.isEmpty()) {
            props.put(ConsumerConfig.GROUP_ID_CONFIG, groupId);
        }
        props.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "none");
        props.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, false);
        props.put(ConsumerConfig.RECEIVE_BUFFER_CONFIG, 65536);
        props.put(ConsumerConfig.ISOLATION_LEVEL_CONFIG, isolation);
        return Clients.consumer(bootstrap, props);
    }

    /** The driver's planning calls: partitions of the topic, then one listOffsets per spec. */
    static Map<TopicPartition, Long> plan(Admin admin, String topic, OffsetSpec spec,
            IsolationLevel isolation) throws Exception {
        TopicDescription d = Clients.get(admin.describeTopics(List.of(topic)).allTopicNames())
                .get(topic);
        Map<TopicPartition, OffsetSpec> request = new LinkedHashMap<>();
        for (TopicPartitionInfo p : d.partitions()) {
            request.put(new TopicPartition(topic, p.partition()), spec);
        }
        Map<TopicPartition, ListOffsetsResultInfo> result = Clients.get(
                admin.listOffsets(request, new ListOffsetsOptions(isolation)).all());
        Map<TopicPartition, Long> out = new TreeMap<>(Clients::compare);
        result.forEach((tp, info) -> out.put(tp, info.offset()));
        return out;
    }

    /**
     * Reads [from, until) of one partition the way a Spark task does: seek to the next wanted
     * offset before every poll, keep records of this partition inside the range, and on
     * OffsetOutOfRange look up the available range and continue from its start (as
     * failOnDataLoss=false does), reporting the loss.
     */
    static List<ConsumerRecord<byte[], byte[]>> fetchRange(KafkaConsumer<byte[], byte[]> consumer,
            TopicPartition tp, long from, long until, Harness.Out out, Object label) {
        if (!consumer.assignment().contains(tp)) {
            consumer.assign(List.of(tp));
        }
        List<ConsumerRecord<byte[], byte[]>> got = new ArrayList<>();
        long offset = from;
        long deadline = System.nanoTime() + RANGE_LIMIT.toNanos();
        while (offset < until) {
            if (System.nanoTime() > deadline) {
                throw new IllegalStateException("could not read " + tp + " [" + from + ", " + until
                        + ") within " + RANGE_LIMIT + ": stuck at offset " + offset);
            }
            consumer.seek(tp, offset);
            ConsumerRecords<byte[], byte[]> polled;
            try {
                polled = consumer.poll(POLL);
            } catch (OffsetOutOfRangeException e) {
                consumer.seekToBeginning(List.of(tp));
                long earliest = consumer.position(tp, Clients.API_TIMEOUT);
                consumer.seekToEnd(List.of(tp));
                long latest = consumer.position(tp, Clients.API_TIMEOUT);
                out.emit("data_loss", "label", label, "partition", tp.partition(),
                        "wanted", offset, "earliest", earliest, "latest", latest,
                        "error", e.getClass().getSimpleName());
                if (earliest <= offset) {
                    throw new IllegalStateException("OffsetOutOfRange for " + tp + " at " + offset
                            + " though the available range is [" + earliest + ", " + latest + ")", e);
                }
                offset = earliest;
                continue;
            }
            for (ConsumerRecord<byte[], byte[]> r : polled.records(tp)) {
                if (r.offset() < offset) {
                    throw new IllegalStateException("poll after seek(" + offset + ") returned "
                            + "earlier offset " + r.offset() + " of " + tp);
                }
                if (r.offset() >= until) {
                    break;
                }
                got.add(r);
                offset = r.offset() + 1;
            }
        }
        return got;
    }

    static void sparkRead(Harness.Ctx ctx) throws Exception {
        Harness.Out out = ctx.out();
        Harness.Args args = ctx.args();
        String topic = args.str("topic", "spark-in");
        int partitions = args.integer("partitions", 3);
        int rounds = args.integer("rounds", 3);
        int perRound = args.integer("per_round", 120);
        String isolationName = args.str("isolation", "read_uncommitted");
        String groupId = args.str("group_id", "");
        IsolationLevel isolation = IsolationLevel.valueOf(isolationName.toUpperCase());
        long base = DataScenarios.recentBase();
        Admin admin = Clients.admin(ctx.bootstrap());
        KafkaProducer<byte[], byte[]> producer = null;
        Map<TopicPartition, KafkaConsumer<byte[], byte[]>> pool = new HashMap<>();
        try {
            out.step("createTopics");
            Clients.createTopic(admin, topic, partitions, Map.of());
            producer = Clients.producer(ctx.bootstrap(), Map.of(
                    ProducerConfig.COMPRESSION_TYPE_CONFIG, args.str("compression", "lz4"),
                    ProducerConfig.LINGER_MS_CONFIG, 10));
            Map<TopicPartition, Long> committed = null;
            for (int round = 0; round < rounds; round++) {
                out.step("round " + round + ": produce");
                List<Gen.Rec> recs = Gen.records(perRound, partitions, 1000 + round, base, true, 0,
                        round * perRound);
                List<RecordMetadata> sent = Gen.send(producer, topic, recs);
                for (int n = 0; n < recs.size(); n++) {
                    out.emit("sent", "round", round, "record", recs.get(n).json(),
                            "metadata", Clients.metadata(sent.get(n)));
                }
                out.step("round " + round + ": plan offsets on the driver");
                Map<TopicPartition, Long> start = committed != null ? committed
                        : plan(admin, topic, OffsetSpec.earliest(), isolation);
                Map<TopicPartition, Long> end = plan(admin, topic, OffsetSpec.latest(), isolation);
                out.emit("batch", "round", round, "start", Clients.offsets(start),
                        "end", Clients.offsets(end));
                out.step("round " + round + ": executors read split ranges");
                for (Map.Entry<TopicPartition, Long> e : end.entrySet()) {
                    TopicPartition tp = e.getKey();
                    long from = start.getOrDefault(tp, 0L);
                    long until = e.getValue();
                    // minPartitions-style split: the second half starts inside a batch.
                    long mid = from + (until - from) / 2 + ((until - from) > 2 ? 1 : 0);
                    KafkaConsumer<byte[], byte[]> consumer = pool.computeIfAbsent(tp,
                            k -> executorConsumer(ctx.bootstrap(), isolationName, groupId));
                    for (long[] range : new long[][] {{from, mid}, {mid, until}}) {
                        List<Object> records = new ArrayList<>();
                        for (ConsumerRecord<byte[], byte[]> r
                                : fetchRange(consumer, tp, range[0], range[1], out, round)) {
                            records.add(Clients.received(r));
                        }
                        out.emit("read", "round", round, "partition", tp.partition(),
                                "from", range[0], "until", range[1], "records", records);
                    }
                }
                committed = end;
            }

            out.step("startingOffsetsByTimestamp: listOffsets forTimestamp, then read to latest");
            long startTs = base + (long) (perRound + perRound / 2) * 10L;
            Map<TopicPartition, Long> byTs = plan(admin, topic, OffsetSpec.forTimestamp(startTs),
                    isolation);
            Map<TopicPartition, Long> latest = plan(admin, topic, OffsetSpec.latest(), isolation);
            out.emit("timestamp_start", "timestamp", startTs, "offsets", Clients.offsets(byTs));
            for (Map.Entry<TopicPartition, Long> e : byTs.entrySet()) {
                TopicPartition tp = e.getKey();
                long from = e.getValue() < 0 ? latest.get(tp) : e.getValue();
                List<Object> offsets = new ArrayList<>();
                for (ConsumerRecord<byte[], byte[]> r : fetchRange(pool.get(tp), tp, from,
                        latest.get(tp), out, "timestamp")) {
                    offsets.add(r.offset());
                }
                out.emit("timestamp_read", "partition", tp.partition(), "from", from,
                        "until", latest.get(tp), "offsets", offsets);
            }

            out.step("data loss: deleteRecords past a planned range start");
            TopicPartition p0 = new TopicPartition(topic, 0);
            long until0 = latest.get(p0);
            long trimmed = until0 / 2;
            long lowWatermark = Clients.get(admin.deleteRecords(Map.of(p0,
                    RecordsToDelete.beforeOffset(trimmed))).lowWatermarks().get(p0)).lowWatermark();
            List<Object> offsets = new ArrayList<>();
            for (ConsumerRecord<byte[], byte[]> r : fetchRange(pool.get(p0), p0, 0, until0, out,
                    "after_delete")) {
                offsets.add(r.offset());
            }
            out.emit("read_after_delete", "partition", 0, "low_watermark", lowWatermark,
                    "from", 0, "until", until0, "offsets", offsets);
        } finally {
            for (KafkaConsumer<byte[], byte[]> c : pool.values()) {
                Clients.close(c);
            }
            Clients.close(producer);
            Clients.close(admin);
        }
    }

    static void sparkWrite(Harness.Ctx ctx) throws Exception {
        Harness.Out out = ctx.out();
        Harness.Args args = ctx.args();
        String topic = args.str("topic", "spark-out");
        int partitions = args.integer("partitions", 4);
        int tasks = args.integer("tasks", 3);
        int rows = args.integer("rows", 200);
        String compression = args.str("compression", "none");
        long base = DataScenarios.recentBase();
        Admin admin = Clients.admin(ctx.bootstrap());
        ExecutorService pool = Executors.newFixedThreadPool(tasks);
        Map<TopicPartition, KafkaConsumer<byte[], byte[]>> consumers = new HashMap<>();
        try {
            out.step("createTopics");
            Clients.createTopic(admin, topic, partitions, Map.of());

            out.step("sink tasks write concurrently, each through its own producer");
            List<Future<List<RecordMetadata>>> results = new ArrayList<>();
            List<List<Gen.Rec>> perTask = new ArrayList<>();
            for (int t = 0; t < tasks; t++) {
                List<Gen.Rec> recs = new ArrayList<>();
                for (Gen.Rec r : Gen.records(rows, partitions, 100 + t, base, false, 0, t * rows)) {
                    // Rows with a "partition" column go there; the rest use the partitioner.
                    Integer partition = r.index() % 10 == 3 ? r.index() % partitions : null;
                    recs.add(new Gen.Rec(r.index(), partition, r.timestamp(), r.key(), r.value(),
                            r.headers()));
                }
                perTask.add(recs);
                results.add(pool.submit(() -> {
                    KafkaProducer<byte[], byte[]> producer = Clients.producer(ctx.bootstrap(),
                            Map.of(ProducerConfig.COMPRESSION_TYPE_CONFIG, compression));
                    try {
                        return Gen.send(producer, topic, recs);
                    } finally {
                        Clients.close(producer);
                    }
                }));
            }
            for (int t = 0; t < tasks; t++) {
                List<RecordMetadata> sent = results.get(t).get(60, TimeUnit.SECONDS);
                for (int n = 0; n < sent.size(); n++) {
                    out.emit("sent", "task", t, "record", perTask.get(t).get(n).json(),
                            "metadata", Clients.metadata(sent.get(n)));
                }
            }

            out.step("read the topic back as a batch query would");
            Map<TopicPartition, Long> start = plan(admin, topic, OffsetSpec.earliest(),
                    IsolationLevel.READ_UNCOMMITTED);
            Map<TopicPartition, Long> end = plan(admin, topic, OffsetSpec.latest(),
                    IsolationLevel.READ_UNCOMMITTED);
            out.emit("batch", "start", Clients.offsets(start), "end", Clients.offsets(end));
            for (Map.Entry<TopicPartition, Long> e : end.entrySet()) {
                TopicPartition tp = e.getKey();
                KafkaConsumer<byte[], byte[]> consumer = consumers.computeIfAbsent(tp,
                        k -> executorConsumer(ctx.bootstrap(), "read_uncommitted", ""));
                for (ConsumerRecord<byte[], byte[]> r : fetchRange(consumer, tp, start.get(tp),
                        e.getValue(), out, "read_back")) {
                    out.emit("received", "record", Clients.received(r));
                }
            }
        } finally {
            pool.shutdownNow();
            for (KafkaConsumer<byte[], byte[]> c : consumers.values()) {
                Clients.close(c);
            }
            Clients.close(admin);
        }
    }
}
