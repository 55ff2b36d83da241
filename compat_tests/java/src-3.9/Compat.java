import java.time.Duration;
import java.util.Map;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.Config;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.common.config.ConfigResource;

/** The calls whose form differs between client versions, as kafka-clients 3.9 has them. */
final class Compat {
    static final String CLIENT = "3.9";

    private Compat() {
    }

    /** The legacy AlterConfigs API (replaces every dynamic config); true when it ran. */
    @SuppressWarnings("deprecation")
    static boolean legacyAlterConfigs(Admin admin, ConfigResource resource, Config config)
            throws Exception {
        Clients.get(admin.alterConfigs(Map.of(resource, config)).all());
        return true;
    }

    static void close(KafkaConsumer<?, ?> consumer, Duration timeout) {
        consumer.close(timeout);
    }
}
