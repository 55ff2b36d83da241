import java.util.Map;
import java.util.concurrent.CompletionException;
import java.util.concurrent.ExecutionException;
import org.apache.kafka.common.KafkaException;

/** Unwrapping exceptions to the one a caller would act on, and expected-failure checks. */
final class Errors {
    private Errors() {}

    /** A task that may throw anything. */
    interface Action {
        Object run() throws Exception;
    }

    /** Strips future wrappers and bare KafkaException wrappers down to the meaningful cause. */
    static Throwable root(Throwable t) {
        Throwable current = t;
        while (current.getCause() != null && current.getCause() != current
                && (current instanceof ExecutionException || current instanceof CompletionException
                        || current.getClass() == KafkaException.class)) {
            current = current.getCause();
        }
        return current;
    }

    static String name(Throwable t) {
        return root(t).getClass().getSimpleName();
    }

    /**
     * Runs an action that is expected to fail and reports how it ended: "error" is the simple class
     * name of the exception, or null when the action succeeded.
     */
    static Map<String, Object> outcome(Action action) {
        try {
            Object result = action.run();
            return Json.obj("error", null, "message", null, "result", result);
        } catch (Exception e) {
            Throwable root = root(e);
            return Json.obj("error", root.getClass().getSimpleName(), "message", root.getMessage(),
                    "result", null);
        }
    }
}
