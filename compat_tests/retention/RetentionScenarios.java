import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ExecutionException;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AlterConfigOp;
import org.apache.kafka.clients.admin.Config;
import org.apache.kafka.clients.admin.ConfigEntry;
import org.apache.kafka.clients.admin.CreateTopicsResult;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.config.ConfigResource;

/**
 * Retention and compaction scenarios for the stock Java client, run like the shared harness
 * (compat_tests/java/src, whose Harness, Clients and Json classes this reuses):
 *
 * <pre>java -cp JARS:CLASSES RetentionScenarios BOOTSTRAP SCENARIO [key=value ...]</pre>
 *
 * Any other scenario name is handed to the shared harness's registry.
 */
public final class RetentionScenarios {
    private RetentionScenarios() {}

    public static void main(String[] argv) {
        String scenario = argv.length > 1 ? argv[1] : "";
        if (!scenario.equals("compact-topic") && !scenario.equals("read-compacted")) {
            Harness.main(argv);
            return;
        }
        Harness.Out out = new Harness.Out(System.out);
        int status = 0;
        try {
            Harness.Args args = Harness.Args.parse(argv, 2);
            Harness.Ctx ctx = new Harness.Ctx(argv[0], args, out);
            if (scenario.equals("compact-topic")) {
                compactTopic(ctx);
            } else {
                readCompacted(ctx);
            }
            args.checkAllUsed();
            out.emit("done", "scenario", scenario);
        } catch (Throwable t) {
            status = 1;
            out.emit("failed", "scenario", scenario, "step", out.step(),
                    "error", Errors.name(t), "message", String.valueOf(Errors.root(t).getMessage()));
            t.printStackTrace(System.err);
        }
        System.out.flush();
        System.err.flush();
        Runtime.getRuntime().halt(status);
    }

    /**
     * Kafka Connect's check on its internal topics: create with cleanup.policy=compact, then
     * describeConfigs must say exactly "compact". Then keyed writes (and a keyless one, which a
     * compacted topic refuses) from the Java producer.
     */
    static void compactTopic(Harness.Ctx ctx) throws Exception {
        Harness.Out out = ctx.out();
        String topic = ctx.args().str("topic");
        int keys = ctx.args().integer("keys", 5);
        int records = ctx.args().integer("records", 200);
        Admin admin = Clients.admin(ctx.bootstrap());
        KafkaProducer<byte[], byte[]> producer = null;
        try {
            out.step("createTopics cleanup.policy=compact");
            NewTopic spec = new NewTopic(topic, 1, (short) 1).configs(Map.of(
                    "cleanup.policy", "compact", "segment.bytes", ctx.args().str("segment_bytes", "4096"),
                    "min.cleanable.dirty.ratio", "0.01", "delete.retention.ms", "100"));
            CreateTopicsResult created = admin.createTopics(List.of(spec));
            Config returned = Clients.get(created.config(topic));
            out.emit("created", "cleanup_policy", entry(returned.get("cleanup.policy")));

            out.step("describeConfigs, as Connect's TopicAdmin does");
            ConfigResource resource = new ConfigResource(ConfigResource.Type.TOPIC, topic);
            Config described = describe(admin, resource);
            ConfigEntry policy = described.get("cleanup.policy");
            out.emit("described", "cleanup_policy", entry(policy),
                    "only_compact", "compact".equals(policy.value()));

            out.step("incrementalAlterConfigs delete.retention.ms, then describe");
            Clients.get(admin.incrementalAlterConfigs(Map.of(resource, List.of(new AlterConfigOp(
                    new ConfigEntry("delete.retention.ms", "50"), AlterConfigOp.OpType.SET)))).all());
            out.emit("altered", "delete_retention_ms",
                    entry(describe(admin, resource).get("delete.retention.ms")));

            out.step("produce keyed updates and tombstones");
            producer = Clients.producer(ctx.bootstrap(), Map.of());
            for (int i = 0; i < records; i++) {
                String key = "key-" + (i % keys);
                byte[] value = i % 41 == 40 ? null : Clients.utf8("value-" + i);
                RecordMetadata md = producer.send(
                        new ProducerRecord<>(topic, 0, Clients.utf8(key), value)).get();
                out.emit("sent", "key", key, "value", value == null ? null : "value-" + i,
                        "offset", md.offset());
            }
            out.step("produce a record without a key");
            try {
                producer.send(new ProducerRecord<>(topic, 0, null, Clients.utf8("no key"))).get();
                out.emit("keyless", "error", null);
            } catch (ExecutionException e) {
                out.emit("keyless", "error", Errors.name(e.getCause()),
                        "message", e.getCause().getMessage());
            }
        } finally {
            Clients.close(producer);
            Clients.close(admin);
        }
    }

    /** Read a compacted partition from the beginning to its end offset. */
    static void readCompacted(Harness.Ctx ctx) throws Exception {
        Harness.Out out = ctx.out();
        String topic = ctx.args().str("topic");
        TopicPartition tp = new TopicPartition(topic, 0);
        KafkaConsumer<byte[], byte[]> consumer = Clients.consumer(ctx.bootstrap(), Map.of());
        try {
            out.step("assign, seekToBeginning, poll to the end offset");
            Map<TopicPartition, Long> ends = consumer.endOffsets(List.of(tp), Clients.API_TIMEOUT);
            consumer.assign(List.of(tp));
            consumer.seekToBeginning(List.of(tp));
            List<ConsumerRecord<byte[], byte[]>> got =
                    Clients.readUntil(consumer, ends, Duration.ofSeconds(30));
            List<Object> seen = new ArrayList<>();
            for (ConsumerRecord<byte[], byte[]> r : got) {
                seen.add(Json.obj("offset", r.offset(), "key", text(r.key()),
                        "value", text(r.value())));
            }
            out.emit("read", "records", seen, "end", ends.get(tp));
        } finally {
            Clients.close(consumer);
        }
    }

    private static String text(byte[] data) {
        return data == null ? null : new String(data, StandardCharsets.UTF_8);
    }

    private static Config describe(Admin admin, ConfigResource resource) throws Exception {
        return Clients.get(admin.describeConfigs(List.of(resource)).values().get(resource));
    }

    private static Map<String, Object> entry(ConfigEntry e) {
        return Json.obj("value", e.value(), "source", e.source().name(), "default", e.isDefault());
    }
}
