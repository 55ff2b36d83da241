import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Random;
import java.util.concurrent.Future;
import java.util.concurrent.atomic.AtomicReferenceArray;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.header.Header;
import org.apache.kafka.common.header.internals.RecordHeader;

/** Deterministic test records (from a seed) and sending them with per-record results. */
final class Gen {
    private Gen() {}

    /** One record to send; partition and timestamp null leave them to the producer. */
    record Rec(int index, Integer partition, Long timestamp, byte[] key, byte[] value,
            List<Header> headers) {

        ProducerRecord<byte[], byte[]> toProducerRecord(String topic) {
            return new ProducerRecord<>(topic, partition, timestamp, key, value, headers);
        }

        Map<String, Object> json() {
            return Json.obj(
                    "index", index,
                    "want_partition", partition,
                    "want_timestamp", timestamp,
                    "key", key,
                    "value_len", value == null ? null : value.length,
                    "value_sha", Clients.sha(value),
                    "headers", Clients.headers(new org.apache.kafka.common.header.internals
                            .RecordHeaders(headers.toArray(new Header[0]))));
        }
    }

    /**
     * A mix of what real traffic carries: null and empty keys and values, binary and text
     * (compressible) payloads, large values past batch.size, zero or several headers (repeated
     * keys, null and empty values, non-ASCII keys), explicit and producer-assigned timestamps.
     */
    static List<Rec> records(int count, int partitions, long seed, long baseTimestamp,
            boolean explicitPartitions, int largeEvery, int firstIndex) {
        Random rnd = new Random(seed);
        List<Rec> out = new ArrayList<>();
        for (int n = 0; n < count; n++) {
            int i = firstIndex + n;
            byte[] key = switch (i % 7) {
                case 0 -> null;
                case 1 -> new byte[0];
                case 2 -> randomBytes(rnd, 16);
                default -> Clients.utf8("key-" + i);
            };
            byte[] value;
            if (i % 11 == 0) {
                value = null;
            } else if (i % 11 == 1) {
                value = new byte[0];
            } else if (largeEvery > 0 && i % largeEvery == 2) {
                int size = 100_000 + rnd.nextInt(150_000);
                value = (i % 2 == 0) ? randomBytes(rnd, size) : text(i, size);
            } else {
                int size = rnd.nextInt(600);
                value = (i % 2 == 0) ? randomBytes(rnd, size) : text(i, size);
            }
            List<Header> headers = new ArrayList<>();
            switch (i % 3) {
                case 1 -> headers.add(new RecordHeader("trace", randomBytes(rnd, 8)));
                case 2 -> {
                    headers.add(new RecordHeader("a", Clients.utf8("x")));
                    headers.add(new RecordHeader("a", (byte[]) null));
                    headers.add(new RecordHeader("ключ", Clients.utf8("значение")));
                    headers.add(new RecordHeader("empty", new byte[0]));
                }
                default -> { }
            }
            Long timestamp = (i % 5 == 0) ? null : baseTimestamp + i * 10L;
            Integer partition = explicitPartitions ? i % partitions : null;
            out.add(new Rec(i, partition, timestamp, key, value, headers));
        }
        return out;
    }

    static byte[] randomBytes(Random rnd, int size) {
        byte[] b = new byte[size];
        rnd.nextBytes(b);
        return b;
    }

    static byte[] text(int i, int size) {
        byte[] pattern = Clients.utf8("record " + i + " of the Strom compat suite; ");
        byte[] out = new byte[size];
        for (int k = 0; k < size; k++) {
            out[k] = pattern[k % pattern.length];
        }
        return out;
    }

    /**
     * Sends every record, flushes, and returns the metadata in send order. Also checks that each
     * callback fired exactly once and agreed with its future; the first failure is thrown.
     */
    static List<RecordMetadata> send(KafkaProducer<byte[], byte[]> producer, String topic,
            List<Rec> recs) throws Exception {
        AtomicReferenceArray<Object> callbacks = new AtomicReferenceArray<>(recs.size());
        List<Future<RecordMetadata>> futures = new ArrayList<>();
        for (int n = 0; n < recs.size(); n++) {
            final int slot = n;
            futures.add(producer.send(recs.get(n).toProducerRecord(topic), (md, error) -> {
                Object previous = callbacks.getAndSet(slot, error != null ? error : md);
                if (previous != null) {
                    throw new IllegalStateException("callback fired twice for record " + slot);
                }
            }));
        }
        producer.flush();
        List<RecordMetadata> out = new ArrayList<>();
        for (int n = 0; n < recs.size(); n++) {
            RecordMetadata md = Clients.get(futures.get(n));
            Object seen = callbacks.get(n);
            if (seen == null) {
                throw new IllegalStateException("no callback for record " + n + " after flush");
            }
            if (seen instanceof Exception e) {
                throw e;
            }
            RecordMetadata fromCallback = (RecordMetadata) seen;
            if (fromCallback.offset() != md.offset() || fromCallback.partition() != md.partition()) {
                throw new IllegalStateException("callback and future disagree for record " + n);
            }
            out.add(md);
        }
        return out;
    }
}
