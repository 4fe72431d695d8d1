package org.tidemq.spark;

import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStreamReader;
import java.io.OutputStream;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ConcurrentLinkedDeque;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ObjectNode;
import org.apache.spark.sql.SparkSession;

/**
 * The Python planner (tidemq/spark/planner.py): planning stays one implementation, in Python;
 * the JVM asks it. Processes of {@code python -m tidemq.spark.planner} are kept (one per call
 * under way, reused afterwards; they end with this JVM, when their standard input closes).
 *
 * <pre>
 * Protocol: one request per line on the planner's stdin, one answer per line on its stdout,
 * both UTF-8 JSON objects. Request {"op": ..., "options": {the read's options}, ...};
 * answer {"ok": true, ...} or {"ok": false, "error": "ValueError", "message": "..."}.
 * </pre>
 * The interpreter: the session's conf spark.tidemq.python (tidemq.spark.register sets it to
 * the driver's Python), else spark.pyspark.driver.python, spark.pyspark.python,
 * PYSPARK_DRIVER_PYTHON, PYSPARK_PYTHON, python3; spark.tidemq.pythonPath (set by register:
 * where tidemq is imported from) goes first on its PYTHONPATH.
 */
final class Planner {
    private static final ObjectMapper JSON = new ObjectMapper();
    private static final Map<String, ConcurrentLinkedDeque<Proc>> IDLE = new ConcurrentHashMap<>();

    private final String[] cmd;
    private final String pythonPath;

    /** A planner's refusal (a bad option, data loss, an unreachable broker), with its Python type. */
    static final class PlanError extends RuntimeException {
        private static final long serialVersionUID = 1L;

        PlanError(String message) {
            super(message);
        }
    }

    private static final class Proc {
        final Process process;
        final OutputStream in;
        final BufferedReader out;

        Proc(Process p) {
            process = p;
            in = p.getOutputStream();
            out = new BufferedReader(new InputStreamReader(p.getInputStream(), StandardCharsets.UTF_8));
        }
    }

    private Planner(String[] cmd, String pythonPath) {
        this.cmd = cmd;
        this.pythonPath = pythonPath;
    }

    /** The planner of the active session (its confs read now, on the driver's thread that has one). */
    static Planner ofSession() {
        return new Planner(command(), conf("spark.tidemq.pythonPath", null));
    }

    static ObjectNode request(String op, Map<String, String> options) {
        ObjectNode req = JSON.createObjectNode().put("op", op);
        ObjectNode o = req.putObject("options");
        options.forEach(o::put);
        return req;
    }

    static JsonNode parse(String json) {
        try {
            return JSON.readTree(json);
        } catch (IOException e) {
            throw new IllegalArgumentException("tidemq: not JSON: " + json, e);
        }
    }

    /** The planner's answer to {@code req}; PlanError when it refuses. */
    JsonNode call(ObjectNode req) {
        String key = String.join("\u0000", cmd) + "\u0000" + pythonPath;
        ConcurrentLinkedDeque<Proc> idle = IDLE.computeIfAbsent(key, k -> new ConcurrentLinkedDeque<>());
        Proc p = idle.pollFirst();
        while (p != null && !p.process.isAlive()) {
            p = idle.pollFirst();
        }
        String line;
        try {
            if (p == null) {
                p = start();
            }
            p.in.write((req.toString() + "\n").getBytes(StandardCharsets.UTF_8));
            p.in.flush();
            line = p.out.readLine();
        } catch (IOException e) {
            if (p != null) {
                p.process.destroy();
            }
            throw new IllegalStateException("tidemq: the Python planner (" + String.join(" ", cmd) + ") failed: " + e, e);
        }
        if (line == null) {
            p.process.destroy();
            throw new IllegalStateException("tidemq: the Python planner (" + String.join(" ", cmd) + ") ended without "
                    + "an answer (its errors are on the driver's stderr): can that Python import tidemq? "
                    + "tidemq.spark.register(spark) sets spark.tidemq.python to the driver's");
        }
        idle.addFirst(p);
        JsonNode got = parse(line);
        if (!got.path("ok").asBoolean(false)) {
            String type = got.path("error").asText("Error");
            String msg = type + ": " + got.path("message").asText("");
            if ("DataLossError".equals(type)) {
                throw new DataLossError(msg);
            }
            throw new PlanError(msg);
        }
        return got;
    }

    private Proc start() throws IOException {
        ProcessBuilder b = new ProcessBuilder(cmd);
        b.redirectError(ProcessBuilder.Redirect.INHERIT);
        if (pythonPath != null && !pythonPath.isEmpty()) {
            String old = b.environment().get("PYTHONPATH");
            b.environment().put("PYTHONPATH", old == null || old.isEmpty() ? pythonPath : pythonPath + ":" + old);
        }
        return new Proc(b.start());
    }

    private static String[] command() {
        String py = conf("spark.tidemq.python", null);
        if (py == null) {
            py = conf("spark.pyspark.driver.python", conf("spark.pyspark.python", null));
        }
        if (py == null) {
            py = System.getenv("PYSPARK_DRIVER_PYTHON");
        }
        if (py == null || py.isEmpty()) {
            py = System.getenv("PYSPARK_PYTHON");
        }
        if (py == null || py.isEmpty()) {
            py = "python3";
        }
        List<String> cmd = new ArrayList<>(List.of(py, "-m", "tidemq.spark.planner"));
        return cmd.toArray(new String[0]);
    }

    static String conf(String key, String dflt) {
        scala.Option<SparkSession> s = SparkSession.getActiveSession();
        return s.isEmpty() ? dflt : s.get().conf().get(key, dflt);
    }
}
