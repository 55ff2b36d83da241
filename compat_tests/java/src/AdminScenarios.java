import java.time.Duration;
import java.util.ArrayList;
import java.util.Collection;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeMap;
import java.util.TreeSet;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AlterConfigOp;
import org.apache.kafka.clients.admin.AlterConfigsOptions;
import org.apache.kafka.clients.admin.Config;
import org.apache.kafka.clients.admin.ConfigEntry;
import org.apache.kafka.clients.admin.CreatePartitionsOptions;
import org.apache.kafka.clients.admin.CreateTopicsOptions;
import org.apache.kafka.clients.admin.CreateTopicsResult;
import org.apache.kafka.clients.admin.DeletedRecords;
import org.apache.kafka.clients.admin.DescribeClusterOptions;
import org.apache.kafka.clients.admin.DescribeClusterResult;
import org.apache.kafka.clients.admin.DescribeConfigsOptions;
import org.apache.kafka.clients.admin.ListOffsetsOptions;
import org.apache.kafka.clients.admin.ListOffsetsResult.ListOffsetsResultInfo;
import org.apache.kafka.clients.admin.ListTopicsOptions;
import org.apache.kafka.clients.admin.NewPartitions;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.admin.OffsetSpec;
import org.apache.kafka.clients.admin.RecordsToDelete;
import org.apache.kafka.clients.admin.TopicDescription;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.IsolationLevel;
import org.apache.kafka.common.KafkaFuture;
import org.apache.kafka.common.Node;
import org.apache.kafka.common.TopicCollection;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.Uuid;
import org.apache.kafka.common.acl.AclOperation;
import org.apache.kafka.common.config.ConfigResource;
import org.apache.kafka.common.errors.TopicExistsException;

/** Admin client scenarios: topics, configs, partitions, offsets, record deletion. */
final class AdminScenarios {
    private AdminScenarios() {}

    static void cluster(Harness.Ctx ctx) throws Exception {
        Harness.Out out = ctx.out();
        Admin admin = Clients.admin(ctx.bootstrap());
        try {
            out.step("describeCluster");
            DescribeClusterResult result = admin.describeCluster();
            List<Object> nodes = new ArrayList<>();
            for (Node n : Clients.get(result.nodes())) {
                nodes.add(Clients.node(n));
            }
            out.emit("cluster", "cluster_id", Clients.get(result.clusterId()),
                    "controller", Clients.node(Clients.get(result.controller())), "nodes", nodes);

            out.step("describeCluster with authorized operations");
            Set<AclOperation> ops = Clients.get(admin.describeCluster(
                    new DescribeClusterOptions().includeAuthorizedOperations(true))
                    .authorizedOperations());
            out.emit("cluster_operations", "operations", ops == null ? null
                    : new TreeSet<>(ops.stream().map(Enum::name).toList()));

            out.step("listTopics");
            Set<String> names = Clients.get(
                    admin.listTopics(new ListTopicsOptions().listInternal(true)).names());
            out.emit("topics", "names", new TreeSet<>(names));
        } finally {
            Clients.close(admin);
        }
    }

    static void createTopics(Harness.Ctx ctx) throws Exception {
        Harness.Out out = ctx.out();
        String prefix = ctx.args().str("prefix", "created");
        String multi = prefix + "-multi";
        String defaults = prefix + "-defaults";
        String single = prefix + "-single";
        Map<String, String> configs = new TreeMap<>(Map.of(
                "retention.ms", "3600000",
                "max.message.bytes", "200000",
                "segment.bytes", "1048576",
                "cleanup.policy", "delete"));
        Admin admin = Clients.admin(ctx.bootstrap());
        try {
            out.step("createTopics (configs, 4 partitions; broker defaults; 1 partition)");
            List<NewTopic> topics = List.of(
                    new NewTopic(multi, 4, (short) 1).configs(configs),
                    new NewTopic(defaults, java.util.Optional.empty(), java.util.Optional.empty()),
                    new NewTopic(single, 1, (short) 1));
            CreateTopicsResult created = admin.createTopics(topics);
            Clients.get(created.all());
            Map<String, Uuid> ids = new LinkedHashMap<>();
            for (NewTopic t : topics) {
                Uuid id = Clients.get(created.topicId(t.name()));
                ids.put(t.name(), id);
                out.emit("created", "name", t.name(), "topic_id", id.toString(),
                        "partitions", Clients.get(created.numPartitions(t.name())),
                        "replication_factor", Clients.get(created.replicationFactor(t.name())),
                        "configs", Clients.config(Clients.get(created.config(t.name()))));
            }

            out.step("createTopics validateOnly");
            String validated = prefix + "-validate-only";
            Map<String, Object> validate = Errors.outcome(() -> Clients.get(admin.createTopics(
                    List.of(new NewTopic(validated, 2, (short) 1)),
                    new CreateTopicsOptions().validateOnly(true)).all()));
            out.emit("validate_only", "outcome", validate, "listed",
                    Clients.get(admin.listTopics().names()).contains(validated));

            out.step("createTopics that must fail");
            Map<String, NewTopic> bad = new LinkedHashMap<>();
            bad.put("exists", new NewTopic(multi, 1, (short) 1));
            bad.put("bad_config_value", new NewTopic(prefix + "-bad-value", 1, (short) 1)
                    .configs(Map.of("retention.ms", "soon")));
            bad.put("unknown_config", new NewTopic(prefix + "-unknown-config", 1, (short) 1)
                    .configs(Map.of("no.such.config", "1")));
            bad.put("zero_partitions", new NewTopic(prefix + "-zero", 0, (short) 1));
            bad.put("replication_factor_3", new NewTopic(prefix + "-rf3", 1, (short) 3));
            bad.put("bad_name", new NewTopic("bad name!", 1, (short) 1));
            bad.put("long_name", new NewTopic("x".repeat(250), 1, (short) 1));
            bad.put("dot_name", new NewTopic("..", 1, (short) 1));
            for (Map.Entry<String, NewTopic> e : bad.entrySet()) {
                out.step("createTopics case " + e.getKey());
                out.emit("create_error", "case", e.getKey(), "topic", e.getValue().name(),
                        "outcome", Errors.outcome(() -> Clients.get(
                                admin.createTopics(List.of(e.getValue())).all())));
            }

            out.step("createTopics with one good and one existing topic");
            String good = prefix + "-mixed-ok";
            CreateTopicsResult mixed = admin.createTopics(List.of(
                    new NewTopic(good, 1, (short) 1), new NewTopic(single, 1, (short) 1)));
            Map<String, Object> perTopic = new TreeMap<>();
            for (Map.Entry<String, KafkaFuture<Void>> e : mixed.values().entrySet()) {
                perTopic.put(e.getKey(), Errors.outcome(() -> Clients.get(e.getValue())));
            }
            out.emit("mixed", "outcomes", perTopic);

            out.step("describeTopics by name");
            List<String> names = List.of(multi, defaults, single);
            Map<String, TopicDescription> byName = Clients.get(
                    admin.describeTopics(TopicCollection.ofTopicNames(names)).allTopicNames());
            for (String name : names) {
                out.emit("described", "by", "name", "topic", Clients.topic(byName.get(name)));
            }

            out.step("describeTopics by id");
            for (Map.Entry<String, Uuid> e : ids.entrySet()) {
                out.emit("described_by_id", "id", e.getValue().toString(), "outcome",
                        Errors.outcome(() -> Clients.topic(Clients.get(admin.describeTopics(
                                TopicCollection.ofTopicIds(List.of(e.getValue()))).allTopicIds())
                                .get(e.getValue()))));
            }

            out.step("describeTopics of unknown topics");
            out.emit("describe_missing", "by", "name", "outcome", Errors.outcome(() -> Clients.get(
                    admin.describeTopics(TopicCollection.ofTopicNames(List.of(prefix + "-nope")))
                            .allTopicNames())));
            out.emit("describe_missing", "by", "id", "outcome", Errors.outcome(() -> Clients.get(
                    admin.describeTopics(TopicCollection.ofTopicIds(List.of(Uuid.randomUuid())))
                            .allTopicIds())));

            out.step("listTopics");
            out.emit("listed", "names", new TreeSet<>(Clients.get(admin.listTopics().names())));
        } finally {
            Clients.close(admin);
        }
    }

    private static Map<String, Object> pick(Config config, String... names) {
        Map<String, Object> out = new TreeMap<>();
        for (String name : names) {
            ConfigEntry e = config.get(name);
            out.put(name, e == null ? null : Json.obj("value", e.value(), "source", e.source()));
        }
        return out;
    }

    private static Config describe(Admin admin, ConfigResource resource) throws Exception {
        return Clients.get(admin.describeConfigs(List.of(resource)).values().get(resource));
    }

    static void configs(Harness.Ctx ctx) throws Exception {
        Harness.Out out = ctx.out();
        String topic = ctx.args().str("topic", "configured");
        String[] watched = {"retention.ms", "max.message.bytes", "cleanup.policy", "segment.ms"};
        Admin admin = Clients.admin(ctx.bootstrap());
        try {
            out.step("createTopics with configs");
            Clients.createTopic(admin, topic, 1, Map.of(
                    "retention.ms", "86400000", "cleanup.policy", "delete",
                    "max.message.bytes", "100000"));
            ConfigResource resource = new ConfigResource(ConfigResource.Type.TOPIC, topic);

            out.step("describeConfigs topic (synonyms, documentation)");
            DescribeConfigsOptions full = new DescribeConfigsOptions()
                    .includeSynonyms(true).includeDocumentation(true);
            Config topicConfig = Clients.get(
                    admin.describeConfigs(List.of(resource), full).values().get(resource));
            out.emit("topic_configs", "entries", Clients.config(topicConfig));

            out.step("describeConfigs broker");
            Node node = Clients.get(admin.describeCluster().nodes()).iterator().next();
            ConfigResource broker = new ConfigResource(
                    ConfigResource.Type.BROKER, Integer.toString(node.id()));
            Config brokerConfig = Clients.get(
                    admin.describeConfigs(List.of(broker), full).values().get(broker));
            out.emit("broker_configs", "broker", node.id(), "entries", Clients.config(brokerConfig));

            out.step("describeConfigs topic and broker in one call");
            Map<ConfigResource, Config> both = Clients.get(
                    admin.describeConfigs(List.of(resource, broker)).all());
            out.emit("both_configs", "resources", new TreeSet<>(
                    both.keySet().stream().map(r -> r.type() + ":" + r.name()).toList()));

            out.step("incrementalAlterConfigs SET/DELETE/APPEND");
            Map<ConfigResource, Collection<AlterConfigOp>> ops = Map.of(resource, List.of(
                    new AlterConfigOp(new ConfigEntry("retention.ms", "1234567"),
                            AlterConfigOp.OpType.SET),
                    new AlterConfigOp(new ConfigEntry("max.message.bytes", null),
                            AlterConfigOp.OpType.DELETE),
                    new AlterConfigOp(new ConfigEntry("cleanup.policy", "compact"),
                            AlterConfigOp.OpType.APPEND),
                    new AlterConfigOp(new ConfigEntry("segment.ms", "600000"),
                            AlterConfigOp.OpType.SET)));
            Clients.get(admin.incrementalAlterConfigs(ops).all());
            out.emit("configs_after", "phase", "incremental",
                    "entries", pick(describe(admin, resource), watched));

            out.step("incrementalAlterConfigs SUBTRACT");
            Clients.get(admin.incrementalAlterConfigs(Map.of(resource, List.of(
                    new AlterConfigOp(new ConfigEntry("cleanup.policy", "delete"),
                            AlterConfigOp.OpType.SUBTRACT)))).all());
            out.emit("configs_after", "phase", "subtract",
                    "entries", pick(describe(admin, resource), watched));

            out.step("incrementalAlterConfigs validateOnly");
            Clients.get(admin.incrementalAlterConfigs(Map.of(resource, List.of(
                    new AlterConfigOp(new ConfigEntry("retention.ms", "1"),
                            AlterConfigOp.OpType.SET))),
                    new AlterConfigsOptions().validateOnly(true)).all());
            out.emit("configs_after", "phase", "validate_only",
                    "entries", pick(describe(admin, resource), watched));

            out.step("incrementalAlterConfigs that must fail");
            Map<String, Map<ConfigResource, Collection<AlterConfigOp>>> bad = new LinkedHashMap<>();
            bad.put("unknown_topic", Map.of(
                    new ConfigResource(ConfigResource.Type.TOPIC, topic + "-nope"),
                    List.of(new AlterConfigOp(new ConfigEntry("retention.ms", "1000"),
                            AlterConfigOp.OpType.SET))));
            bad.put("bad_value", Map.of(resource, List.of(new AlterConfigOp(
                    new ConfigEntry("retention.ms", "soon"), AlterConfigOp.OpType.SET))));
            bad.put("unknown_config", Map.of(resource, List.of(new AlterConfigOp(
                    new ConfigEntry("no.such.config", "1"), AlterConfigOp.OpType.SET))));
            bad.put("append_to_scalar", Map.of(resource, List.of(new AlterConfigOp(
                    new ConfigEntry("retention.ms", "5"), AlterConfigOp.OpType.APPEND))));
            bad.put("duplicate_key", Map.of(resource, List.of(
                    new AlterConfigOp(new ConfigEntry("retention.ms", "5000"),
                            AlterConfigOp.OpType.SET),
                    new AlterConfigOp(new ConfigEntry("retention.ms", "6000"),
                            AlterConfigOp.OpType.SET))));
            for (Map.Entry<String, Map<ConfigResource, Collection<AlterConfigOp>>> e
                    : bad.entrySet()) {
                out.step("incrementalAlterConfigs case " + e.getKey());
                out.emit("alter_error", "case", e.getKey(), "outcome", Errors.outcome(
                        () -> Clients.get(admin.incrementalAlterConfigs(e.getValue()).all())));
            }
            out.emit("configs_after", "phase", "failed_alters",
                    "entries", pick(describe(admin, resource), watched));

            out.step("alterConfigs (legacy, replaces every dynamic config)");
            if (Compat.legacyAlterConfigs(admin, resource,
                    new Config(List.of(new ConfigEntry("retention.ms", "999999"))))) {
                out.emit("configs_after", "phase", "legacy",
                        "entries", pick(describe(admin, resource), watched));
            }
        } finally {
            Clients.close(admin);
        }
    }

    static void createPartitions(Harness.Ctx ctx) throws Exception {
        Harness.Out out = ctx.out();
        String topic = ctx.args().str("topic", "growing");
        Admin admin = Clients.admin(ctx.bootstrap());
        KafkaProducer<byte[], byte[]> producer = null;
        KafkaConsumer<byte[], byte[]> consumer = null;
        try {
            out.step("createTopics with 2 partitions");
            Clients.createTopic(admin, topic, 2, Map.of());
            producer = Clients.producer(ctx.bootstrap(), Map.of());
            List<RecordMetadata> sent = new ArrayList<>();
            out.step("produce to partitions 0 and 1");
            for (int p = 0; p < 2; p++) {
                sent.add(Clients.get(producer.send(new ProducerRecord<>(
                        topic, p, Clients.utf8("k" + p), Clients.utf8("before " + p)))));
            }

            out.step("createPartitions to 4");
            Clients.get(admin.createPartitions(Map.of(topic, NewPartitions.increaseTo(4))).all());
            out.emit("grown", "topic", Clients.topic(Clients.get(admin.describeTopics(
                    List.of(topic)).allTopicNames()).get(topic)));

            out.step("createPartitions validateOnly to 6");
            out.emit("grow_error", "case", "validate_only", "outcome", Errors.outcome(
                    () -> Clients.get(admin.createPartitions(
                            Map.of(topic, NewPartitions.increaseTo(6)),
                            new CreatePartitionsOptions().validateOnly(true)).all())));
            out.emit("after_validate_only", "partitions", Clients.get(admin.describeTopics(
                    List.of(topic)).allTopicNames()).get(topic).partitions().size());

            Map<String, Map<String, NewPartitions>> bad = new LinkedHashMap<>();
            bad.put("decrease", Map.of(topic, NewPartitions.increaseTo(3)));
            bad.put("same_count", Map.of(topic, NewPartitions.increaseTo(4)));
            bad.put("unknown_topic", Map.of(topic + "-nope", NewPartitions.increaseTo(4)));
            for (Map.Entry<String, Map<String, NewPartitions>> e : bad.entrySet()) {
                out.step("createPartitions case " + e.getKey());
                out.emit("grow_error", "case", e.getKey(), "outcome", Errors.outcome(
                        () -> Clients.get(admin.createPartitions(e.getValue()).all())));
            }

            out.step("produce to the new partitions 2 and 3 with the same producer");
            for (int p = 2; p < 4; p++) {
                sent.add(Clients.get(producer.send(new ProducerRecord<>(
                        topic, p, Clients.utf8("k" + p), Clients.utf8("after " + p)))));
            }
            for (RecordMetadata md : sent) {
                out.emit("sent", "metadata", Clients.metadata(md));
            }

            out.step("read all 4 partitions");
            consumer = Clients.consumer(ctx.bootstrap(), Map.of());
            List<TopicPartition> tps = Clients.partitions(topic, 4);
            Map<TopicPartition, Long> ends = consumer.endOffsets(tps, Clients.API_TIMEOUT);
            out.emit("end_offsets", "offsets", Clients.offsets(ends));
            consumer.assign(tps);
            consumer.seekToBeginning(tps);
            for (ConsumerRecord<byte[], byte[]> r
                    : Clients.readUntil(consumer, ends, Duration.ofSeconds(30))) {
                out.emit("received", "record", Clients.received(r),
                        "value_text", new String(r.value(), java.nio.charset.StandardCharsets.UTF_8));
            }
        } finally {
            Clients.close(consumer);
            Clients.close(producer);
            Clients.close(admin);
        }
    }

    static void deleteTopics(Harness.Ctx ctx) throws Exception {
        Harness.Out out = ctx.out();
        String prefix = ctx.args().str("prefix", "doomed");
        String byName = prefix + "-by-name";
        String byId = prefix + "-by-id";
        String kept = prefix + "-kept";
        Admin admin = Clients.admin(ctx.bootstrap());
        KafkaProducer<byte[], byte[]> producer = null;
        try {
            out.step("createTopics");
            Map<String, Uuid> ids = new LinkedHashMap<>();
            for (String name : List.of(byName, byId, kept)) {
                ids.put(name, Clients.createTopic(admin, name, 2, Map.of()));
            }
            out.step("produce 3 records to " + byName);
            producer = Clients.producer(ctx.bootstrap(), Map.of());
            for (int i = 0; i < 3; i++) {
                Clients.get(producer.send(new ProducerRecord<>(byName, 0, null, Clients.utf8("v" + i))));
            }
            Clients.close(producer);
            producer = null;

            out.step("deleteTopics by name");
            out.emit("deleted", "by", "name", "outcome", Errors.outcome(() -> Clients.get(
                    admin.deleteTopics(TopicCollection.ofTopicNames(List.of(byName))).all())));
            out.step("deleteTopics by id");
            out.emit("deleted", "by", "id", "outcome", Errors.outcome(() -> Clients.get(
                    admin.deleteTopics(TopicCollection.ofTopicIds(List.of(ids.get(byId)))).all())));

            out.step("describe and list after deletion");
            out.emit("describe_deleted", "by", "name", "outcome", Errors.outcome(() -> Clients.get(
                    admin.describeTopics(TopicCollection.ofTopicNames(List.of(byName)))
                            .allTopicNames())));
            out.emit("describe_deleted", "by", "id", "outcome", Errors.outcome(() -> Clients.get(
                    admin.describeTopics(TopicCollection.ofTopicIds(List.of(ids.get(byId))))
                            .allTopicIds())));
            out.emit("listed", "names", new TreeSet<>(Clients.get(admin.listTopics().names())));

            out.step("deleteTopics of unknown topics");
            out.emit("delete_error", "case", "unknown_name", "outcome", Errors.outcome(
                    () -> Clients.get(admin.deleteTopics(
                            TopicCollection.ofTopicNames(List.of(prefix + "-nope"))).all())));
            out.emit("delete_error", "case", "unknown_id", "outcome", Errors.outcome(
                    () -> Clients.get(admin.deleteTopics(
                            TopicCollection.ofTopicIds(List.of(Uuid.randomUuid()))).all())));
            out.emit("delete_error", "case", "deleted_again", "outcome", Errors.outcome(
                    () -> Clients.get(admin.deleteTopics(
                            TopicCollection.ofTopicNames(List.of(byName))).all())));

            out.step("recreate " + byName);
            int attempts = 0;
            Uuid recreated = null;
            long deadline = System.nanoTime() + Duration.ofSeconds(20).toNanos();
            while (recreated == null) {
                attempts++;
                try {
                    recreated = Clients.createTopic(admin, byName, 2, Map.of());
                } catch (java.util.concurrent.ExecutionException e) {
                    if (!(e.getCause() instanceof TopicExistsException)
                            || System.nanoTime() > deadline) {
                        throw e;
                    }
                }
            }
            Map<TopicPartition, OffsetSpec> latest = new LinkedHashMap<>();
            for (TopicPartition tp : Clients.partitions(byName, 2)) {
                latest.put(tp, OffsetSpec.latest());
            }
            Map<TopicPartition, ListOffsetsResultInfo> ends = Clients.get(
                    admin.listOffsets(latest).all());
            Map<TopicPartition, Long> endOffsets = new TreeMap<>(Clients::compare);
            ends.forEach((tp, info) -> endOffsets.put(tp, info.offset()));
            out.emit("recreated", "old_id", ids.get(byName).toString(), "new_id",
                    recreated.toString(), "attempts", attempts,
                    "end_offsets", Clients.offsets(endOffsets));

            out.step("describe the untouched topic");
            out.emit("kept", "topic", Clients.topic(Clients.get(admin.describeTopics(
                    List.of(kept)).allTopicNames()).get(kept)));
        } finally {
            Clients.close(producer);
            Clients.close(admin);
        }
    }

    private static Map<String, Object> info(ListOffsetsResultInfo info) {
        return Json.obj("offset", info.offset(), "timestamp", info.timestamp(),
                "leader_epoch", info.leaderEpoch());
    }

    static void listOffsets(Harness.Ctx ctx) throws Exception {
        Harness.Out out = ctx.out();
        String topic = ctx.args().str("topic", "offsets");
        long base = ctx.args().longValue("base_timestamp", DataScenarios.recentBase());
        long[] p0Deltas = {1000, 5000, 3000, 2000, 4000, 1500};
        Admin admin = Clients.admin(ctx.bootstrap());
        KafkaProducer<byte[], byte[]> producer = null;
        try {
            out.step("createTopics with 3 partitions");
            Clients.createTopic(admin, topic, 3, Map.of());
            producer = Clients.producer(ctx.bootstrap(), Map.of(ProducerConfig.LINGER_MS_CONFIG, 20));
            out.step("produce out-of-order timestamps to partition 0 (two batches), 3 to partition 1");
            List<java.util.concurrent.Future<RecordMetadata>> futures = new ArrayList<>();
            for (int i = 0; i < p0Deltas.length; i++) {
                futures.add(producer.send(new ProducerRecord<>(topic, 0, base + p0Deltas[i],
                        Clients.utf8("k" + i), Clients.utf8("v" + i))));
                if (i == 2) {
                    producer.flush();
                }
            }
            for (int i = 0; i < 3; i++) {
                futures.add(producer.send(new ProducerRecord<>(topic, 1, base + 10_000 + i,
                        null, Clients.utf8("p1-" + i))));
            }
            producer.flush();
            for (java.util.concurrent.Future<RecordMetadata> f : futures) {
                out.emit("sent", "metadata", Clients.metadata(Clients.get(f)));
            }
            out.emit("base", "timestamp", base);

            Map<String, OffsetSpec> specs = new LinkedHashMap<>();
            specs.put("earliest", OffsetSpec.earliest());
            specs.put("latest", OffsetSpec.latest());
            specs.put("max_timestamp", OffsetSpec.maxTimestamp());
            specs.put("ts_base", OffsetSpec.forTimestamp(base));
            specs.put("ts_base+2500", OffsetSpec.forTimestamp(base + 2500));
            specs.put("ts_base+5000", OffsetSpec.forTimestamp(base + 5000));
            specs.put("ts_base+5001", OffsetSpec.forTimestamp(base + 5001));
            specs.put("ts_base+10001", OffsetSpec.forTimestamp(base + 10_001));
            List<TopicPartition> tps = Clients.partitions(topic, 3);
            for (IsolationLevel isolation : IsolationLevel.values()) {
                for (Map.Entry<String, OffsetSpec> spec : specs.entrySet()) {
                    out.step("listOffsets " + spec.getKey() + " " + isolation);
                    Map<TopicPartition, OffsetSpec> request = new LinkedHashMap<>();
                    tps.forEach(tp -> request.put(tp, spec.getValue()));
                    Map<TopicPartition, ListOffsetsResultInfo> result = Clients.get(admin.listOffsets(
                            request, new ListOffsetsOptions(isolation)).all());
                    for (TopicPartition tp : tps) {
                        out.emit("list_offsets", "spec", spec.getKey(), "isolation", isolation,
                                "partition", tp.partition(), "result", info(result.get(tp)));
                    }
                }
            }

            out.step("listOffsets with a different spec per partition in one call");
            Map<TopicPartition, OffsetSpec> mixed = Map.of(
                    tps.get(0), OffsetSpec.maxTimestamp(), tps.get(1), OffsetSpec.earliest(),
                    tps.get(2), OffsetSpec.latest());
            Map<TopicPartition, ListOffsetsResultInfo> mixedResult =
                    Clients.get(admin.listOffsets(mixed).all());
            for (TopicPartition tp : tps) {
                out.emit("list_offsets_mixed", "partition", tp.partition(),
                        "result", info(mixedResult.get(tp)));
            }

            // (An unknown partition of a known topic is retried by the client until its API
            // timeout, whatever the broker says; only an unknown topic fails fast.)
            out.step("listOffsets of an unknown topic");
            out.emit("list_error", "case", "unknown_topic", "outcome", Errors.outcome(
                    () -> Clients.get(admin.listOffsets(Map.of(new TopicPartition(topic + "-nope",
                            0), OffsetSpec.latest())).all())));
        } finally {
            Clients.close(producer);
            Clients.close(admin);
        }
    }

    static void deleteRecords(Harness.Ctx ctx) throws Exception {
        Harness.Out out = ctx.out();
        String topic = ctx.args().str("topic", "trimmed");
        Admin admin = Clients.admin(ctx.bootstrap());
        KafkaProducer<byte[], byte[]> producer = null;
        KafkaConsumer<byte[], byte[]> consumer = null;
        try {
            out.step("createTopics with 2 partitions");
            Clients.createTopic(admin, topic, 2, Map.of());
            TopicPartition p0 = new TopicPartition(topic, 0);
            TopicPartition p1 = new TopicPartition(topic, 1);
            out.step("produce 10 records to each partition (partition 0 as batches 0-4 and 5-9)");
            producer = Clients.producer(ctx.bootstrap(), Map.of(ProducerConfig.LINGER_MS_CONFIG, 50));
            for (int p = 0; p < 2; p++) {
                for (int i = 0; i < 10; i++) {
                    producer.send(new ProducerRecord<>(topic, p, Clients.utf8("k" + i),
                            Clients.utf8("p" + p + "-" + i)));
                    if (i == 4) {
                        producer.flush();
                    }
                }
            }
            producer.flush();

            out.step("deleteRecords p0 before 4, p1 before -1 (the high watermark)");
            Map<TopicPartition, KafkaFuture<DeletedRecords>> low = admin.deleteRecords(Map.of(
                    p0, RecordsToDelete.beforeOffset(4), p1, RecordsToDelete.beforeOffset(-1)))
                    .lowWatermarks();
            out.emit("deleted_records", "case", "first", "low_watermarks", Json.obj(
                    "0", Errors.outcome(() -> Clients.get(low.get(p0)).lowWatermark()),
                    "1", Errors.outcome(() -> Clients.get(low.get(p1)).lowWatermark())));

            Map<String, Map<TopicPartition, RecordsToDelete>> cases = new LinkedHashMap<>();
            cases.put("again_4", Map.of(p0, RecordsToDelete.beforeOffset(4)));
            cases.put("below_start_2", Map.of(p0, RecordsToDelete.beforeOffset(2)));
            cases.put("beyond_end_11", Map.of(p0, RecordsToDelete.beforeOffset(11)));
            for (Map.Entry<String, Map<TopicPartition, RecordsToDelete>> e : cases.entrySet()) {
                out.step("deleteRecords case " + e.getKey());
                TopicPartition tp = e.getValue().keySet().iterator().next();
                out.emit("deleted_records", "case", e.getKey(), "outcome", Errors.outcome(
                        () -> Clients.get(admin.deleteRecords(e.getValue()).lowWatermarks()
                                .get(tp)).lowWatermark()));
            }

            out.step("listOffsets earliest/latest after deleteRecords");
            for (String spec : List.of("earliest", "latest")) {
                Map<TopicPartition, OffsetSpec> request = new LinkedHashMap<>();
                for (TopicPartition tp : List.of(p0, p1)) {
                    request.put(tp, spec.equals("earliest") ? OffsetSpec.earliest() : OffsetSpec.latest());
                }
                Map<TopicPartition, ListOffsetsResultInfo> r = Clients.get(admin.listOffsets(request).all());
                out.emit("list_offsets", "spec", spec, "offsets", Json.obj(
                        "0", r.get(p0).offset(), "1", r.get(p1).offset()));
            }

            out.step("consumer beginning/end offsets after deleteRecords");
            consumer = Clients.consumer(ctx.bootstrap(), Map.of());
            List<TopicPartition> both = List.of(p0, p1);
            out.emit("consumer_offsets", "beginning", Clients.offsets(
                    consumer.beginningOffsets(both, Clients.API_TIMEOUT)),
                    "end", Clients.offsets(consumer.endOffsets(both, Clients.API_TIMEOUT)));

            out.step("seekToBeginning and read partition 0 (starts mid-batch)");
            consumer.assign(List.of(p0));
            consumer.seekToBeginning(List.of(p0));
            out.emit("position", "case", "seek_to_beginning",
                    "position", consumer.position(p0, Clients.API_TIMEOUT));
            for (ConsumerRecord<byte[], byte[]> r : Clients.readUntil(
                    consumer, Map.of(p0, 10L), Duration.ofSeconds(30))) {
                out.emit("received", "offset", r.offset(),
                        "value_text", new String(r.value(), java.nio.charset.StandardCharsets.UTF_8));
            }

            out.step("seek below the log start with auto.offset.reset=none");
            consumer.seek(p0, 1);
            out.emit("below_start", "reset", "none",
                    "outcome", DataScenarios.pollForError(consumer, Duration.ofSeconds(20)));
            Clients.close(consumer);
            consumer = null;

            out.step("seek below the log start with auto.offset.reset=earliest");
            consumer = Clients.consumer(ctx.bootstrap(), Map.of("auto.offset.reset", "earliest"));
            consumer.assign(List.of(p0));
            consumer.seek(p0, 1);
            List<ConsumerRecord<byte[], byte[]>> reset = DataScenarios.pollSome(
                    consumer, Duration.ofSeconds(20));
            out.emit("below_start", "reset", "earliest", "first_offset", reset.get(0).offset());
        } finally {
            Clients.close(consumer);
            Clients.close(producer);
            Clients.close(admin);
        }
    }
}
