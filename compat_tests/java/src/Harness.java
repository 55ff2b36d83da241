import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.Set;
import java.util.TreeSet;

/**
 * Runs one scenario of the stock Java Kafka client against a broker.
 *
 * <pre>java -cp JARS:CLASSES Harness BOOTSTRAP SCENARIO [key=value ...]</pre>
 *
 * Every observation is one JSON object per line on stdout, each with an "event" field; the last
 * line of a successful run is {"event": "done"}. Any exception ends the run with exit status 1,
 * a {"event": "failed"} line and a message plus stack trace on stderr.
 */
public final class Harness {
    private Harness() {}

    public static void main(String[] argv) {
        if (argv.length < 2) {
            System.err.println("usage: Harness BOOTSTRAP SCENARIO [key=value ...]");
            System.err.println("scenarios: " + Scenarios.names());
            System.exit(2);
        }
        Out out = new Out(System.out);
        String bootstrap = argv[0];
        String scenario = argv[1];
        int status = 0;
        try {
            Args args = Args.parse(argv, 2);
            Scenarios.run(scenario, new Ctx(bootstrap, args, out));
            args.checkAllUsed();
            out.emit("done", "scenario", scenario);
        } catch (Throwable t) {
            status = 1;
            Throwable root = Errors.root(t);
            out.emit("failed", "scenario", scenario, "step", out.step(),
                    "error", Errors.name(t), "message", String.valueOf(root.getMessage()));
            System.err.println("HARNESS FAILED: scenario " + scenario + ", step '" + out.step()
                    + "': " + Errors.name(t) + ": " + root.getMessage());
            t.printStackTrace(System.err);
        }
        System.out.flush();
        System.err.flush();
        // Client threads must not keep a failed run alive.
        Runtime.getRuntime().halt(status);
    }

    /** What a scenario gets: the bootstrap address, its arguments and the output. */
    record Ctx(String bootstrap, Args args, Out out) {}

    /** key=value arguments; asking for one marks it used, and unknown ones are an error. */
    static final class Args {
        private final Map<String, String> values = new LinkedHashMap<>();
        private final Set<String> used = new TreeSet<>();

        static Args parse(String[] argv, int from) {
            Args args = new Args();
            for (int i = from; i < argv.length; i++) {
                int eq = argv[i].indexOf('=');
                if (eq <= 0) {
                    throw new IllegalArgumentException("argument is not key=value: " + argv[i]);
                }
                args.values.put(argv[i].substring(0, eq), argv[i].substring(eq + 1));
            }
            return args;
        }

        String str(String key, String fallback) {
            used.add(key);
            return values.getOrDefault(key, fallback);
        }

        String str(String key) {
            String value = str(key, null);
            if (value == null) {
                throw new IllegalArgumentException("missing argument " + key + "=...");
            }
            return value;
        }

        int integer(String key, int fallback) {
            return Integer.parseInt(str(key, Integer.toString(fallback)));
        }

        long longValue(String key, long fallback) {
            return Long.parseLong(str(key, Long.toString(fallback)));
        }

        boolean bool(String key, boolean fallback) {
            return Boolean.parseBoolean(str(key, Boolean.toString(fallback)));
        }

        void checkAllUsed() {
            Set<String> unknown = new TreeSet<>(values.keySet());
            unknown.removeAll(used);
            if (!unknown.isEmpty()) {
                throw new IllegalArgumentException("unknown arguments: " + unknown);
            }
        }
    }

    /** JSON lines on stdout, one write per event so that client threads cannot interleave. */
    static final class Out {
        private final PrintStream stream;
        private volatile String step = "start";

        Out(PrintStream stream) {
            this.stream = new PrintStream(stream, false, StandardCharsets.UTF_8);
        }

        /** Names what the scenario does next, for the failure message. */
        void step(String name) {
            step = name;
        }

        String step() {
            return step;
        }

        synchronized void emit(String event, Object... keysAndValues) {
            Map<String, Object> line = new LinkedHashMap<>();
            line.put("event", event);
            line.putAll(Json.obj(keysAndValues));
            stream.println(Json.write(line));
            stream.flush();
        }
    }
}
