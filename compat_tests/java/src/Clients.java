import java.nio.charset.StandardCharsets;
import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collection;
import java.util.HashMap;
import java.util.HexFormat;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.TreeMap;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.Config;
import org.apache.kafka.clients.admin.ConfigEntry;
import org.apache.kafka.clients.admin.CreateTopicsResult;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.admin.TopicDescription;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.KafkaFuture;
import org.apache.kafka.common.Node;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.TopicPartitionInfo;
import org.apache.kafka.common.Uuid;
import org.apache.kafka.common.header.Header;
import org.apache.kafka.common.header.Headers;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.apache.kafka.common.serialization.ByteArraySerializer;

/** Client factories with bounded timeouts, and the JSON shapes of what the clients return. */
final class Clients {
    private Clients() {}

    static final Duration API_TIMEOUT = Duration.ofSeconds(30);
    static final Duration CLOSE_TIMEOUT = Duration.ofSeconds(5);
    static final long FUTURE_TIMEOUT_SECONDS = 30;

    static Admin admin(String bootstrap) {
        Map<String, Object> props = new HashMap<>();
        props.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        props.put(AdminClientConfig.CLIENT_ID_CONFIG, "strom-compat-admin");
        props.put(AdminClientConfig.REQUEST_TIMEOUT_MS_CONFIG, 15_000);
        props.put(AdminClientConfig.DEFAULT_API_TIMEOUT_MS_CONFIG, 30_000);
        return Admin.create(props);
    }

    /** An idempotent acks=all producer (the client's defaults made explicit) plus overrides. */
    static KafkaProducer<byte[], byte[]> producer(String bootstrap, Map<String, Object> overrides) {
        Map<String, Object> props = new HashMap<>();
        props.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        props.put(ProducerConfig.CLIENT_ID_CONFIG, "strom-compat-producer");
        props.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
        props.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
        props.put(ProducerConfig.ACKS_CONFIG, "all");
        props.put(ProducerConfig.ENABLE_IDEMPOTENCE_CONFIG, true);
        props.put(ProducerConfig.REQUEST_TIMEOUT_MS_CONFIG, 15_000);
        props.put(ProducerConfig.DELIVERY_TIMEOUT_MS_CONFIG, 45_000);
        props.put(ProducerConfig.MAX_BLOCK_MS_CONFIG, 30_000);
        props.putAll(overrides);
        return new KafkaProducer<>(props);
    }

    /** A consumer without a group: assign/seek/poll only, nothing committed. */
    static KafkaConsumer<byte[], byte[]> consumer(String bootstrap, Map<String, Object> overrides) {
        Map<String, Object> props = new HashMap<>();
        props.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        props.put(ConsumerConfig.CLIENT_ID_CONFIG, "strom-compat-consumer");
        props.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
        props.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
        props.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, false);
        props.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "none");
        props.put(ConsumerConfig.REQUEST_TIMEOUT_MS_CONFIG, 15_000);
        props.put(ConsumerConfig.DEFAULT_API_TIMEOUT_MS_CONFIG, 30_000);
        props.putAll(overrides);
        return new KafkaConsumer<>(props);
    }

    static <T> T get(KafkaFuture<T> future) throws Exception {
        return future.get(FUTURE_TIMEOUT_SECONDS, TimeUnit.SECONDS);
    }

    static <T> T get(Future<T> future) throws Exception {
        return future.get(FUTURE_TIMEOUT_SECONDS, TimeUnit.SECONDS);
    }

    static void close(Admin admin) {
        if (admin != null) {
            admin.close(CLOSE_TIMEOUT);
        }
    }

    static void close(KafkaProducer<?, ?> producer) {
        if (producer != null) {
            producer.close(CLOSE_TIMEOUT);
        }
    }

    static void close(KafkaConsumer<?, ?> consumer) {
        if (consumer != null) {
            Compat.close(consumer, CLOSE_TIMEOUT);
        }
    }

    /** A topic with the broker's default.replication.factor (1 on one broker). */
    static Uuid createTopic(Admin admin, String name, int partitions, Map<String, String> configs)
            throws Exception {
        return create(admin, new NewTopic(name, Optional.of(partitions), Optional.empty()), configs);
    }

    static Uuid createTopic(Admin admin, String name, int partitions, short replicas,
            Map<String, String> configs) throws Exception {
        return create(admin, new NewTopic(name, partitions, replicas), configs);
    }

    private static Uuid create(Admin admin, NewTopic topic, Map<String, String> configs)
            throws Exception {
        topic.configs(configs);
        String name = topic.name();
        CreateTopicsResult result = admin.createTopics(List.of(topic));
        get(result.all());
        return get(result.topicId(name));
    }

    static List<TopicPartition> partitions(String topic, int count) {
        List<TopicPartition> out = new ArrayList<>();
        for (int p = 0; p < count; p++) {
            out.add(new TopicPartition(topic, p));
        }
        return out;
    }

    /** "k=v;k=v" as a map (an empty string is no entries). */
    static Map<String, String> parseConfigs(String spec) {
        Map<String, String> out = new TreeMap<>();
        if (spec == null || spec.isEmpty()) {
            return out;
        }
        for (String item : spec.split(";")) {
            int eq = item.indexOf('=');
            out.put(item.substring(0, eq), item.substring(eq + 1));
        }
        return out;
    }

    /**
     * Polls until every partition's position reaches its end offset; returns the records in the
     * order polled. Fails after the deadline with the positions reached.
     */
    static List<ConsumerRecord<byte[], byte[]>> readUntil(KafkaConsumer<byte[], byte[]> consumer,
            Map<TopicPartition, Long> ends, Duration limit) {
        List<ConsumerRecord<byte[], byte[]>> out = new ArrayList<>();
        long deadline = System.nanoTime() + limit.toNanos();
        while (true) {
            Map<TopicPartition, Long> behind = new TreeMap<>(Clients::compare);
            for (Map.Entry<TopicPartition, Long> e : ends.entrySet()) {
                long position = consumer.position(e.getKey(), API_TIMEOUT);
                if (position < e.getValue()) {
                    behind.put(e.getKey(), position);
                }
            }
            if (behind.isEmpty()) {
                return out;
            }
            if (System.nanoTime() > deadline) {
                throw new IllegalStateException("positions " + behind + " did not reach end offsets "
                        + ends + " within " + limit + " (" + out.size() + " records read)");
            }
            ConsumerRecords<byte[], byte[]> batch = consumer.poll(Duration.ofMillis(500));
            batch.forEach(out::add);
        }
    }

    static int compare(TopicPartition a, TopicPartition b) {
        int byTopic = a.topic().compareTo(b.topic());
        return byTopic != 0 ? byTopic : Integer.compare(a.partition(), b.partition());
    }

    static Map<String, Object> received(ConsumerRecord<byte[], byte[]> r) {
        return Json.obj(
                "topic", r.topic(),
                "partition", r.partition(),
                "offset", r.offset(),
                "timestamp", r.timestamp(),
                "timestamp_type", r.timestampType().name,
                "leader_epoch", r.leaderEpoch(),
                "key", r.key(),
                "value_len", r.value() == null ? null : r.value().length,
                "value_sha", sha(r.value()),
                "headers", headers(r.headers()),
                "key_size", r.serializedKeySize(),
                "value_size", r.serializedValueSize());
    }

    static Map<String, Object> metadata(RecordMetadata md) {
        return Json.obj(
                "partition", md.partition(),
                "offset", md.hasOffset() ? md.offset() : null,
                "timestamp", md.hasTimestamp() ? md.timestamp() : null,
                "key_size", md.serializedKeySize(),
                "value_size", md.serializedValueSize());
    }

    static List<Object> headers(Headers headers) {
        List<Object> out = new ArrayList<>();
        for (Header h : headers) {
            out.add(Json.obj("key", h.key(), "value", h.value()));
        }
        return out;
    }

    static String sha(byte[] data) {
        if (data == null) {
            return null;
        }
        try {
            return HexFormat.of().formatHex(MessageDigest.getInstance("SHA-256").digest(data));
        } catch (NoSuchAlgorithmException e) {
            throw new IllegalStateException(e);
        }
    }

    static byte[] utf8(String s) {
        return s.getBytes(StandardCharsets.UTF_8);
    }

    static Map<String, Object> node(Node n) {
        if (n == null) {
            return null;
        }
        return Json.obj("id", n.id(), "host", n.host(), "port", n.port(), "rack", n.rack());
    }

    static Map<String, Object> topic(TopicDescription d) {
        List<Object> parts = new ArrayList<>();
        for (TopicPartitionInfo p : d.partitions()) {
            parts.add(Json.obj(
                    "partition", p.partition(),
                    "leader", p.leader() == null ? null : p.leader().id(),
                    "replicas", p.replicas().stream().map(Node::id).toList(),
                    "isr", p.isr().stream().map(Node::id).toList()));
        }
        return Json.obj("name", d.name(), "topic_id", d.topicId().toString(),
                "internal", d.isInternal(), "partitions", parts);
    }

    static Map<String, Object> configEntry(ConfigEntry e) {
        List<Object> synonyms = new ArrayList<>();
        e.synonyms().forEach(s -> synonyms.add(
                Json.obj("name", s.name(), "value", s.value(), "source", s.source())));
        return Json.obj(
                "name", e.name(),
                "value", e.value(),
                "source", e.source(),
                "sensitive", e.isSensitive(),
                "read_only", e.isReadOnly(),
                "type", e.type(),
                "has_doc", e.documentation() != null && !e.documentation().isEmpty(),
                "synonyms", synonyms);
    }

    /** Config entries by name. */
    static Map<String, Object> config(Config config) {
        Map<String, Object> out = new TreeMap<>();
        for (ConfigEntry e : config.entries()) {
            out.put(e.name(), configEntry(e));
        }
        return out;
    }

    static Map<String, Object> offsets(Map<TopicPartition, Long> offsets) {
        Map<String, Object> out = new TreeMap<>();
        offsets.forEach((tp, off) -> out.put(String.valueOf(tp.partition()), off));
        return out;
    }

    static <T> List<T> concat(Collection<T> a, Collection<T> b) {
        List<T> out = new ArrayList<>(a);
        out.addAll(b);
        return out;
    }
}
