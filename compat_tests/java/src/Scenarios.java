import java.util.Map;
import java.util.TreeMap;

/** The scenario registry: name to code. */
final class Scenarios {
    private Scenarios() {}

    interface Scenario {
        void run(Harness.Ctx ctx) throws Exception;
    }

    private static final Map<String, Scenario> ALL = new TreeMap<>(Map.ofEntries(
            Map.entry("cluster", AdminScenarios::cluster),
            Map.entry("create-topics", AdminScenarios::createTopics),
            Map.entry("configs", AdminScenarios::configs),
            Map.entry("create-partitions", AdminScenarios::createPartitions),
            Map.entry("delete-topics", AdminScenarios::deleteTopics),
            Map.entry("list-offsets", AdminScenarios::listOffsets),
            Map.entry("delete-records", AdminScenarios::deleteRecords),
            Map.entry("produce-consume", DataScenarios::produceConsume),
            Map.entry("consumer-api", DataScenarios::consumerApi),
            Map.entry("producer-modes", DataScenarios::producerModes),
            Map.entry("transactions", TxnScenarios::transactions),
            Map.entry("consume-transform-produce", TxnScenarios::consumeTransformProduce),
            Map.entry("zombie", TxnScenarios::zombie),
            Map.entry("coordinator-kill", TxnScenarios::coordinatorKill)));

    static String names() {
        return String.join(", ", ALL.keySet());
    }

    static void run(String name, Harness.Ctx ctx) throws Exception {
        Scenario scenario = ALL.get(name);
        if (scenario == null) {
            throw new IllegalArgumentException("unknown scenario " + name + "; known: " + names());
        }
        scenario.run(ctx);
    }
}
