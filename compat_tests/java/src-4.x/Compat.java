import java.time.Duration;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.Config;
import org.apache.kafka.clients.consumer.CloseOptions;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.common.config.ConfigResource;

/** The calls whose form differs between client versions, as kafka-clients 4.x has them. */
final class Compat {
    static final String CLIENT = "4.x";

    private Compat() {
    }

    /** Kafka 4.0 removed Admin#alterConfigs (the legacy AlterConfigs API): false, nothing ran. */
    static boolean legacyAlterConfigs(Admin admin, ConfigResource resource, Config config) {
        return false;
    }

    static void close(KafkaConsumer<?, ?> consumer, Duration timeout) {
        consumer.close(CloseOptions.timeout(timeout));
    }
}
