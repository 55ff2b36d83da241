import java.time.Duration;
import java.util.ArrayList;
import java.util.Collection;
import java.util.Collections;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import java.util.TreeSet;
import java.util.stream.Collectors;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.ConsumerGroupDescription;
import org.apache.kafka.clients.admin.ConsumerGroupListing;
import org.apache.kafka.clients.admin.MemberDescription;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRebalanceListener;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;

/**
 * Consumer-group scenarios for the Java client against Strom. Usage:
 * GroupScenarios BOOTSTRAP SCENARIO TOPIC GROUP. Prints one JSON object per line and
 * ends with {"event":"done"}; any exception prints {"event":"failed",...} and exits 1.
 */
public final class GroupScenarios {
    private static final Duration POLL = Duration.ofMillis(50);
    private static final long TIMEOUT_MS = 30_000;

    private GroupScenarios() {}

    public static void main(String[] args) throws Exception {
        String bootstrap = args[0];
        String scenario = args[1];
        String topic = args[2];
        String group = args[3];
        try {
            switch (scenario) {
                case "setup" -> setup(bootstrap, topic);
                case "balance" -> balance(bootstrap, topic, group, "org.apache.kafka.clients.consumer.RangeAssignor", 3);
                case "cooperative" -> cooperative(bootstrap, topic, group);
                case "static" -> staticRestart(bootstrap, topic, group);
                case "commit" -> commit(bootstrap, topic, group);
                case "committed" -> committed(bootstrap, topic, group);
                case "member" -> member(bootstrap, topic, group);
                case "admin" -> admin(bootstrap, topic, group);
                default -> throw new IllegalArgumentException("unknown scenario " + scenario);
            }
            emit("done");
        } catch (Throwable t) {
            System.out.println("{\"event\":\"failed\",\"error\":" + q(t.toString()) + "}");
            System.out.flush();
            System.exit(1);
        }
        System.exit(0);
    }

    // --- scenarios ---------------------------------------------------------------------

    /** Create the 6-partition topic and write 10 records to each partition. */
    static void setup(String bootstrap, String topic) throws Exception {
        try (Admin admin = admin(bootstrap)) {
            admin.createTopics(List.of(new NewTopic(topic, 6, (short) 1))).all().get();
        }
        Properties p = new Properties();
        p.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        p.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        p.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        try (KafkaProducer<String, String> producer = new KafkaProducer<>(p)) {
            for (int part = 0; part < 6; part++) {
                for (int i = 0; i < 10; i++) {
                    producer.send(new ProducerRecord<>(topic, part, null, part + "-" + i)).get();
                }
            }
        }
    }

    /** Three members of one group: 2 partitions each, every record consumed once. */
    static void balance(String bootstrap, String topic, String group, String assignor, int count) {
        List<Tracked> members = new ArrayList<>();
        for (int i = 0; i < count; i++) {
            members.add(new Tracked(bootstrap, topic, group, Map.of(
                ConsumerConfig.PARTITION_ASSIGNMENT_STRATEGY_CONFIG, assignor)));
        }
        pollUntil(members, () -> members.stream().allMatch(m -> m.owned.size() == 6 / count)
            && members.stream().mapToInt(m -> m.consumed).sum() >= 60, "balanced");
        for (Tracked m : members) {
            emit("member", "owned", m.owned.toString(), "consumed", String.valueOf(m.consumed));
        }
        members.forEach(Tracked::close);
    }

    /** CooperativeStickyAssignor: the second member's arrival moves 3 partitions, no more. */
    static void cooperative(String bootstrap, String topic, String group) {
        Map<String, Object> coop = Map.of(ConsumerConfig.PARTITION_ASSIGNMENT_STRATEGY_CONFIG,
            "org.apache.kafka.clients.consumer.CooperativeStickyAssignor");
        Tracked first = new Tracked(bootstrap, topic, group, coop);
        List<Tracked> members = new ArrayList<>(List.of(first));
        pollUntil(members, () -> first.owned.size() == 6, "first owns all");
        Tracked second = new Tracked(bootstrap, topic, group, coop);
        members.add(second);
        pollUntil(members, () -> first.owned.size() == 3 && second.owned.size() == 3, "3 each");
        emit("cooperative", "revoked", first.revoked.toString(), "assigned", first.assigned.toString(),
            "second", second.owned.toString());
        members.forEach(Tracked::close);
    }

    /** A static member closes (no LeaveGroup) and its replacement takes its partitions back. */
    static void staticRestart(String bootstrap, String topic, String group) {
        Map<String, Object> s1 = Map.of(ConsumerConfig.GROUP_INSTANCE_ID_CONFIG, "java-static-1",
            ConsumerConfig.SESSION_TIMEOUT_MS_CONFIG, 30000);
        Tracked other = new Tracked(bootstrap, topic, group,
            Map.of(ConsumerConfig.GROUP_INSTANCE_ID_CONFIG, "java-static-2"));
        Tracked first = new Tracked(bootstrap, topic, group, s1);
        pollUntil(List.of(other, first), () -> other.owned.size() == 3 && first.owned.size() == 3, "3 each");
        Set<Integer> before = new TreeSet<>(first.owned);
        int otherAssigns = other.assignCalls;
        int otherRevokes = other.revoked.size();
        first.close();
        Tracked again = new Tracked(bootstrap, topic, group, s1);
        pollUntil(List.of(other, again), () -> again.owned.equals(before), "same partitions back");
        for (int i = 0; i < 40; i++) {
            other.consumer.poll(POLL);
            again.consumer.poll(POLL);
        }
        emit("static", "before", before.toString(), "after", again.owned.toString(),
            "other_assign_calls", String.valueOf(other.assignCalls - otherAssigns),
            "other_revoked", other.revoked.subList(otherRevokes, other.revoked.size()).toString());
        other.close();
        again.close();
    }

    /** Consume everything and commit offset 7 (metadata "java") on every partition. */
    static void commit(String bootstrap, String topic, String group) {
        Tracked m = new Tracked(bootstrap, topic, group, Map.of());
        pollUntil(List.of(m), () -> m.owned.size() == 6, "an assignment");
        Map<TopicPartition, OffsetAndMetadata> offsets = new HashMap<>();
        for (int p = 0; p < 6; p++) {
            offsets.put(new TopicPartition(topic, p), new OffsetAndMetadata(7, "java"));
        }
        m.consumer.commitSync(offsets);
        m.close();
    }

    /** Report the committed offsets and where a new member starts reading. */
    static void committed(String bootstrap, String topic, String group) {
        Tracked m = new Tracked(bootstrap, topic, group, Map.of());
        Set<TopicPartition> all = new TreeSet<>((a, b) -> Integer.compare(a.partition(), b.partition()));
        for (int p = 0; p < 6; p++) {
            all.add(new TopicPartition(topic, p));
        }
        Map<TopicPartition, OffsetAndMetadata> committed = m.consumer.committed(all, Duration.ofSeconds(20));
        for (var e : committed.entrySet()) {
            emit("committed", "partition", String.valueOf(e.getKey().partition()),
                "offset", String.valueOf(e.getValue().offset()), "metadata", e.getValue().metadata());
        }
        pollUntil(List.of(m), () -> m.firstOffsets.size() == 6, "records from every partition");
        for (var e : m.firstOffsets.entrySet()) {
            emit("first", "partition", String.valueOf(e.getKey()), "offset", String.valueOf(e.getValue()));
        }
        m.close();
    }

    /** A member that polls until it is killed, reporting its assignments and each record. */
    static void member(String bootstrap, String topic, String group) {
        Tracked m = new Tracked(bootstrap, topic, group, Map.of(ConsumerConfig.SESSION_TIMEOUT_MS_CONFIG, 6000));
        m.report = true;
        long end = System.currentTimeMillis() + 120_000;
        while (System.currentTimeMillis() < end) {
            m.poll();
        }
        m.close();
    }

    /** Admin describe / list / list offsets / delete against a live, then an empty, group. */
    static void admin(String bootstrap, String topic, String group) throws Exception {
        Tracked m = new Tracked(bootstrap, topic, group, Map.of(ConsumerConfig.CLIENT_ID_CONFIG, "java-admin-member"));
        pollUntil(List.of(m), () -> m.consumed >= 60, "every record");
        m.consumer.commitSync();
        try (Admin admin = admin(bootstrap)) {
            ConsumerGroupDescription d = admin.describeConsumerGroups(List.of(group)).all().get().get(group);
            for (MemberDescription md : d.members()) {
                Set<Integer> parts = md.assignment().topicPartitions().stream()
                    .map(TopicPartition::partition).collect(Collectors.toCollection(TreeSet::new));
                emit("described_member", "client_id", md.clientId(), "host", md.host(),
                    "consumer_id", md.consumerId(), "partitions", parts.toString());
            }
            emit("described", "state", d.state().toString(), "assignor", d.partitionAssignor(),
                "coordinator", String.valueOf(d.coordinator().id()), "simple", String.valueOf(d.isSimpleConsumerGroup()));
            Collection<ConsumerGroupListing> listed = admin.listConsumerGroups().all().get();
            emit("listed", "groups", listed.stream().map(ConsumerGroupListing::groupId).sorted().toList().toString());
            Map<TopicPartition, OffsetAndMetadata> offsets =
                admin.listConsumerGroupOffsets(group).partitionsToOffsetAndMetadata().get();
            long total = offsets.values().stream().mapToLong(OffsetAndMetadata::offset).sum();
            emit("offsets", "partitions", String.valueOf(offsets.size()), "total", String.valueOf(total));
            try {
                admin.deleteConsumerGroups(List.of(group)).all().get();
                emit("delete_live", "error", "none");
            } catch (Exception e) {
                emit("delete_live", "error", e.getCause().getClass().getSimpleName());
            }
            m.close();
            admin.deleteConsumerGroups(List.of(group)).all().get();
            Collection<ConsumerGroupListing> after = admin.listConsumerGroups().all().get();
            emit("after_delete", "groups", after.stream().map(ConsumerGroupListing::groupId).sorted().toList().toString());
        }
    }

    // --- plumbing ----------------------------------------------------------------------

    static Admin admin(String bootstrap) {
        Properties p = new Properties();
        p.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        return Admin.create(p);
    }

    interface Check {
        boolean ok();
    }

    static void pollUntil(List<Tracked> members, Check check, String what) {
        long end = System.currentTimeMillis() + TIMEOUT_MS;
        while (!check.ok()) {
            if (System.currentTimeMillis() > end) {
                throw new IllegalStateException("timed out waiting for " + what + ": "
                    + members.stream().map(m -> m.owned.toString()).toList());
            }
            for (Tracked m : members) {
                m.poll();
            }
        }
    }

    /** A consumer with a rebalance listener that keeps track of what it owns. */
    static final class Tracked implements ConsumerRebalanceListener {
        final KafkaConsumer<String, String> consumer;
        final Set<Integer> owned = new TreeSet<>();
        final List<Integer> revoked = new ArrayList<>();
        final List<Integer> assigned = new ArrayList<>();
        final Map<Integer, Long> firstOffsets = new HashMap<>();
        int consumed;
        int assignCalls;
        boolean report;
        private boolean closed;

        Tracked(String bootstrap, String topic, String group, Map<String, Object> extra) {
            Properties p = new Properties();
            p.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
            p.put(ConsumerConfig.GROUP_ID_CONFIG, group);
            p.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
            p.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
            p.put(ConsumerConfig.SESSION_TIMEOUT_MS_CONFIG, 6000);
            p.put(ConsumerConfig.HEARTBEAT_INTERVAL_MS_CONFIG, 500);
            p.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
            p.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
            p.putAll(extra);
            consumer = new KafkaConsumer<>(p);
            consumer.subscribe(Collections.singletonList(topic), this);
        }

        void poll() {
            for (ConsumerRecord<String, String> r : consumer.poll(POLL)) {
                consumed++;
                firstOffsets.putIfAbsent(r.partition(), r.offset());
                if (report) {
                    emit("consumed", "partition", String.valueOf(r.partition()), "offset", String.valueOf(r.offset()));
                    consumer.commitSync(Map.of(new TopicPartition(r.topic(), r.partition()),
                        new OffsetAndMetadata(r.offset() + 1)));
                }
            }
        }

        @Override
        public void onPartitionsRevoked(Collection<TopicPartition> partitions) {
            for (TopicPartition tp : partitions) {
                owned.remove(tp.partition());
                revoked.add(tp.partition());
            }
            if (report) {
                emit("revoked", "partitions", partitions.stream().map(TopicPartition::partition).toList().toString());
            }
        }

        @Override
        public void onPartitionsAssigned(Collection<TopicPartition> partitions) {
            assignCalls++;
            for (TopicPartition tp : partitions) {
                owned.add(tp.partition());
                assigned.add(tp.partition());
            }
            if (report) {
                emit("assigned", "partitions", partitions.stream().map(TopicPartition::partition).toList().toString());
            }
        }

        @Override
        public void onPartitionsLost(Collection<TopicPartition> partitions) {
            onPartitionsRevoked(partitions);
        }

        void close() {
            if (!closed) {
                closed = true;
                consumer.close(Duration.ofSeconds(10));
            }
        }
    }

    static void emit(String event, String... kv) {
        StringBuilder b = new StringBuilder("{\"event\":").append(q(event));
        for (int i = 0; i + 1 < kv.length; i += 2) {
            b.append(',').append(q(kv[i])).append(':').append(q(kv[i + 1]));
        }
        System.out.println(b.append('}'));
        System.out.flush();
    }

    static String q(String s) {
        if (s == null) {
            return "null";
        }
        return "\"" + s.replace("\\", "\\\\").replace("\"", "\\\"").replace("\n", "\\n") + "\"";
    }
}
