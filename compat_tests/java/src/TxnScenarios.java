import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeMap;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.TopicPartition;

/**
 * Transactions: commit and abort, read_committed, consume-transform-produce, zombie fencing,
 * and a transaction whose coordinator the test kills while it is open.
 */
final class TxnScenarios {
    private TxnScenarios() {}

    static KafkaProducer<byte[], byte[]> txnProducer(String bootstrap, String txnId) {
        Map<String, Object> props = new HashMap<>();
        props.put(ProducerConfig.TRANSACTIONAL_ID_CONFIG, txnId);
        props.put(ProducerConfig.TRANSACTION_TIMEOUT_CONFIG, 30_000);
        KafkaProducer<byte[], byte[]> producer = Clients.producer(bootstrap, props);
        producer.initTransactions();
        return producer;
    }

    static byte[] bytes(String s) {
        return s.getBytes(StandardCharsets.UTF_8);
    }

    /** Every value a consumer with `isolation` reads from the start up to the end offsets. */
    static List<String> readAll(String bootstrap, String topic, int partitions, String isolation)
            throws Exception {
        Map<String, Object> props = new HashMap<>();
        props.put(ConsumerConfig.ISOLATION_LEVEL_CONFIG, isolation);
        KafkaConsumer<byte[], byte[]> consumer = Clients.consumer(bootstrap, props);
        try {
            List<TopicPartition> tps = Clients.partitions(topic, partitions);
            consumer.assign(tps);
            consumer.seekToBeginning(tps);
            Map<TopicPartition, Long> ends = consumer.endOffsets(tps, Clients.API_TIMEOUT);
            List<String> values = new ArrayList<>();
            long deadline = System.nanoTime() + Duration.ofSeconds(30).toNanos();
            while (System.nanoTime() < deadline) {
                for (ConsumerRecord<byte[], byte[]> r : consumer.poll(Duration.ofMillis(300))) {
                    values.add(new String(r.value(), StandardCharsets.UTF_8));
                }
                boolean caughtUp = true;
                for (TopicPartition tp : tps) {
                    caughtUp &= consumer.position(tp, Clients.API_TIMEOUT) >= ends.get(tp);
                }
                if (caughtUp) {
                    return values;
                }
            }
            throw new IllegalStateException("did not reach the end offsets " + ends);
        } finally {
            Clients.close(consumer);
        }
    }

    static void transactions(Harness.Ctx ctx) throws Exception {
        Harness.Out out = ctx.out();
        String topic = ctx.args().str("topic", "txn");
        Admin admin = Clients.admin(ctx.bootstrap());
        try {
            out.step("createTopics");
            Clients.createTopic(admin, topic, 2, Map.of());
            out.step("initTransactions, commit 10, abort 5, commit 1");
            KafkaProducer<byte[], byte[]> producer = txnProducer(ctx.bootstrap(), topic + "-tx");
            try {
                producer.beginTransaction();
                for (int i = 0; i < 10; i++) {
                    producer.send(new ProducerRecord<>(topic, i % 2, null, bytes("c" + i)));
                }
                producer.commitTransaction();
                producer.beginTransaction();
                for (int i = 0; i < 5; i++) {
                    producer.send(new ProducerRecord<>(topic, i % 2, null, bytes("a" + i)));
                }
                producer.flush();
                producer.abortTransaction();
                producer.beginTransaction();
                producer.send(new ProducerRecord<>(topic, 0, null, bytes("last")));
                producer.commitTransaction();
            } finally {
                Clients.close(producer);
            }
            out.step("read_committed / read_uncommitted");
            out.emit("read", "isolation", "read_committed",
                    "values", readAll(ctx.bootstrap(), topic, 2, "read_committed"));
            out.emit("read", "isolation", "read_uncommitted",
                    "values", readAll(ctx.bootstrap(), topic, 2, "read_uncommitted"));
        } finally {
            Clients.close(admin);
        }
    }

    static void consumeTransformProduce(Harness.Ctx ctx) throws Exception {
        Harness.Out out = ctx.out();
        String source = ctx.args().str("topic", "cts") + "-in";
        String sink = ctx.args().str("topic", "cts") + "-out";
        String group = source + "-group";
        Admin admin = Clients.admin(ctx.bootstrap());
        KafkaProducer<byte[], byte[]> plain = null;
        KafkaProducer<byte[], byte[]> producer = null;
        KafkaConsumer<byte[], byte[]> consumer = null;
        try {
            out.step("createTopics, produce the input");
            Clients.createTopic(admin, source, 1, Map.of());
            Clients.createTopic(admin, sink, 1, Map.of());
            plain = Clients.producer(ctx.bootstrap(), Map.of());
            for (int i = 0; i < 6; i++) {
                Clients.get(plain.send(new ProducerRecord<>(source, 0, null, bytes("in" + i))));
            }
            out.step("subscribe and poll");
            Map<String, Object> props = new HashMap<>();
            props.put(ConsumerConfig.GROUP_ID_CONFIG, group);
            props.put(ConsumerConfig.ISOLATION_LEVEL_CONFIG, "read_committed");
            props.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
            props.put(ConsumerConfig.MAX_POLL_RECORDS_CONFIG, 3);
            consumer = Clients.consumer(ctx.bootstrap(), props);
            consumer.subscribe(List.of(source));
            List<ConsumerRecord<byte[], byte[]>> batch = DataScenarios.pollSome(consumer,
                    Duration.ofSeconds(30));
            producer = txnProducer(ctx.bootstrap(), source + "-tx");
            out.step("transform, sendOffsetsToTransaction, commit");
            producer.beginTransaction();
            Map<TopicPartition, OffsetAndMetadata> offsets = new TreeMap<>(Clients::compare);
            for (ConsumerRecord<byte[], byte[]> r : batch) {
                String value = new String(r.value(), StandardCharsets.UTF_8).toUpperCase();
                producer.send(new ProducerRecord<>(sink, 0, null, bytes(value)));
                offsets.put(new TopicPartition(r.topic(), r.partition()),
                        new OffsetAndMetadata(r.offset() + 1));
            }
            producer.sendOffsetsToTransaction(offsets, consumer.groupMetadata());
            producer.commitTransaction();
            out.emit("committed", "offset", committed(consumer, source));
            out.step("an aborted transaction's offsets");
            producer.beginTransaction();
            producer.send(new ProducerRecord<>(sink, 0, null, bytes("never")));
            producer.sendOffsetsToTransaction(
                    Map.of(new TopicPartition(source, 0), new OffsetAndMetadata(6)),
                    consumer.groupMetadata());
            producer.abortTransaction();
            out.emit("after_abort", "offset", committed(consumer, source));
            out.emit("sink", "values", readAll(ctx.bootstrap(), sink, 1, "read_committed"));
        } finally {
            if (consumer != null) {
                Clients.close(consumer);
            }
            if (producer != null) {
                Clients.close(producer);
            }
            if (plain != null) {
                Clients.close(plain);
            }
            Clients.close(admin);
        }
    }

    /**
     * The group's committed offset of the topic's partition 0, once stable: EndTxn answers
     * when the outcome is decided, before the markers reach the group coordinator, so a plain
     * offset fetch (the admin's) may still miss a transaction's offsets. A read_committed
     * consumer asks with require_stable and retries UNSTABLE_OFFSET_COMMIT (KIP-447).
     */
    static long committed(KafkaConsumer<byte[], byte[]> consumer, String topic) {
        TopicPartition partition = new TopicPartition(topic, 0);
        OffsetAndMetadata found = consumer.committed(Set.of(partition), Duration.ofSeconds(60))
                .get(partition);
        return found == null ? -1 : found.offset();
    }

    static void zombie(Harness.Ctx ctx) throws Exception {
        Harness.Out out = ctx.out();
        String topic = ctx.args().str("topic", "zombie");
        Admin admin = Clients.admin(ctx.bootstrap());
        KafkaProducer<byte[], byte[]> zombie = null;
        KafkaProducer<byte[], byte[]> successor = null;
        try {
            Clients.createTopic(admin, topic, 1, Map.of());
            out.step("the first producer starts a transaction");
            zombie = txnProducer(ctx.bootstrap(), topic + "-tx");
            zombie.beginTransaction();
            Clients.get(zombie.send(new ProducerRecord<>(topic, 0, null, bytes("zombie"))));
            out.step("a second producer with the same transactional.id");
            successor = txnProducer(ctx.bootstrap(), topic + "-tx");
            successor.beginTransaction();
            successor.send(new ProducerRecord<>(topic, 0, null, bytes("successor")));
            successor.commitTransaction();
            out.step("the zombie commits");
            final KafkaProducer<byte[], byte[]> fenced = zombie;
            out.emit("zombie_commit", "outcome", Errors.outcome(() -> {
                fenced.commitTransaction();
                return null;
            }));
            out.emit("read", "values", readAll(ctx.bootstrap(), topic, 1, "read_committed"));
        } finally {
            if (zombie != null) {
                Clients.close(zombie);
            }
            if (successor != null) {
                Clients.close(successor);
            }
            Clients.close(admin);
        }
    }

    /**
     * A transaction left open while the test kills its coordinator: the scenario creates the
     * file `open` in the `signals` directory once six records are acknowledged in the
     * transaction, waits for the test to create `killed`, then sends six more and commits
     * through whichever broker coordinates the id now, and runs one more transaction.
     */
    static void coordinatorKill(Harness.Ctx ctx) throws Exception {
        Harness.Out out = ctx.out();
        String topic = ctx.args().str("topic", "ckill");
        Path signals = Path.of(ctx.args().str("signals", "."));
        Admin admin = Clients.admin(ctx.bootstrap());
        KafkaProducer<byte[], byte[]> producer = null;
        try {
            Clients.createTopic(admin, topic, 3, (short) 3, Map.of());  // survives one broker
            producer = txnProducer(ctx.bootstrap(), topic + "-tx");
            out.step("a transaction open: 6 records acknowledged");
            producer.beginTransaction();
            for (int i = 0; i < 6; i++) {
                Clients.get(producer.send(new ProducerRecord<>(topic, i % 3, null, bytes("t" + i))));
            }
            Files.createFile(signals.resolve("open"));
            out.step("waiting for the coordinator's kill");
            long deadline = System.nanoTime() + Duration.ofSeconds(120).toNanos();
            while (!Files.exists(signals.resolve("killed"))) {
                if (System.nanoTime() > deadline) {
                    throw new IllegalStateException("the test never killed the coordinator");
                }
                Thread.sleep(50);
            }
            out.step("6 more records and the commit, through the new coordinator");
            for (int i = 6; i < 12; i++) {
                producer.send(new ProducerRecord<>(topic, i % 3, null, bytes("t" + i)));
            }
            int timeouts = 0;
            while (true) {
                try {
                    producer.commitTransaction();
                    break;
                } catch (org.apache.kafka.common.errors.TimeoutException e) {
                    // the client's documented way on: commit again, it resumes (KIP-691);
                    // while the dead broker's partitions and the coordinator move, a commit
                    // can outlast max.block.ms
                    if (++timeouts > 4) {
                        throw e;
                    }
                }
            }
            out.emit("commit", "timeouts", timeouts);
            out.step("the next transaction");
            producer.beginTransaction();
            producer.send(new ProducerRecord<>(topic, 0, null, bytes("next")));
            producer.commitTransaction();
            out.emit("read", "values", readAll(ctx.bootstrap(), topic, 3, "read_committed"));
        } finally {
            if (producer != null) {
                Clients.close(producer);
            }
            Clients.close(admin);
        }
    }
}
