import java.time.Duration;
import java.util.Properties;
import java.util.concurrent.CountDownLatch;

import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.common.utils.Bytes;
import org.apache.kafka.streams.KafkaStreams;
import org.apache.kafka.streams.StreamsBuilder;
import org.apache.kafka.streams.StreamsConfig;
import org.apache.kafka.streams.errors.StreamsUncaughtExceptionHandler.StreamThreadExceptionResponse;
import org.apache.kafka.streams.kstream.Consumed;
import org.apache.kafka.streams.kstream.Grouped;
import org.apache.kafka.streams.kstream.Materialized;
import org.apache.kafka.streams.kstream.Produced;
import org.apache.kafka.streams.state.KeyValueStore;

/**
 * A word count as a Kafka Streams application: the input topic's records are keyed by word,
 * and every record moves that word's count up by one, written to the output topic as
 * (word, count as an 8-byte long). The record cache is off, so each input record yields
 * exactly one output record: with an exact run a word seen n times has the outputs 1..n.
 *
 * Arguments: bootstrap application.id input output processing.guarantee state.dir
 * [commit.interval.ms] (default: Kafka Streams' own, 100 ms with exactly-once, 30 s without).
 * It prints one JSON object per line on stdout (state changes, thread failures) and runs
 * until SIGTERM, when it closes the application cleanly.
 */
public final class WordCount {
    private WordCount() {
    }

    private static void event(String json) {
        synchronized (System.out) {
            System.out.println(json);
            System.out.flush();
        }
    }

    private static String quoted(String text) {
        return "\"" + text.replace("\\", "\\\\").replace("\"", "\\\"").replace("\n", " ") + "\"";
    }

    public static void main(String[] args) throws InterruptedException {
        if (args.length != 6 && args.length != 7) {
            System.err.println(
                "usage: WordCount bootstrap application.id input output guarantee state.dir [commit.interval.ms]");
            System.exit(2);
        }
        Properties props = new Properties();
        props.put(StreamsConfig.BOOTSTRAP_SERVERS_CONFIG, args[0]);
        props.put(StreamsConfig.APPLICATION_ID_CONFIG, args[1]);
        props.put(StreamsConfig.PROCESSING_GUARANTEE_CONFIG, args[4]);
        props.put(StreamsConfig.STATE_DIR_CONFIG, args[5]);
        props.put(StreamsConfig.REPLICATION_FACTOR_CONFIG, 3);
        props.put(StreamsConfig.STATESTORE_CACHE_MAX_BYTES_CONFIG, 0L);
        props.put(StreamsConfig.NUM_STREAM_THREADS_CONFIG, 1);
        if (args.length == 7) {
            props.put(StreamsConfig.COMMIT_INTERVAL_MS_CONFIG, Long.parseLong(args[6]));
        }
        props.put(StreamsConfig.consumerPrefix(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG), "earliest");
        // a killed broker is noticed in seconds, not after the default 30 s request timeout
        props.put(StreamsConfig.producerPrefix(ProducerConfig.REQUEST_TIMEOUT_MS_CONFIG), 10_000);
        props.put(StreamsConfig.consumerPrefix(ConsumerConfig.REQUEST_TIMEOUT_MS_CONFIG), 10_000);
        props.put(StreamsConfig.adminClientPrefix("request.timeout.ms"), 10_000);

        StreamsBuilder builder = new StreamsBuilder();
        builder.stream(args[2], Consumed.with(Serdes.String(), Serdes.String()))
            .groupByKey(Grouped.with(Serdes.String(), Serdes.String()))
            .count(Materialized.<String, Long, KeyValueStore<Bytes, byte[]>>as("counts")
                .withKeySerde(Serdes.String())
                .withValueSerde(Serdes.Long()))
            .toStream()
            .to(args[3], Produced.with(Serdes.String(), Serdes.Long()));

        KafkaStreams streams = new KafkaStreams(builder.build(), props);
        CountDownLatch stopped = new CountDownLatch(1);
        streams.setStateListener((now, before) -> {
            event("{\"event\":\"state\",\"state\":" + quoted(now.name()) + ",\"from\":"
                + quoted(before.name()) + "}");
            if (now == KafkaStreams.State.NOT_RUNNING || now == KafkaStreams.State.ERROR) {
                stopped.countDown();
            }
        });
        streams.setUncaughtExceptionHandler(error -> {
            event("{\"event\":\"thread_failed\",\"error\":" + quoted(String.valueOf(error)) + "}");
            return StreamThreadExceptionResponse.REPLACE_THREAD;
        });
        Runtime.getRuntime().addShutdownHook(new Thread(() -> {
            streams.close(Duration.ofSeconds(20));
            stopped.countDown();
        }));
        streams.start();
        stopped.await();
    }
}
