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
import java.util.concurrent.Executors;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.TimeUnit;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ObjectNode;
import org.apache.spark.sql.SparkSession;

/**
 * The Python planner (tidemq/spark/planner.py): planning stays one implementation, in Python;
 * the JVM asks it. A process of {@code python -m tidemq.spark.planner} is held by a query while
 * it plans: a stream holds one until it stops ({@link #close}: the process ends), a batch read
 * while its partitions are planned ({@link #release}). A released process is kept for the next
 * query only a short while (spark.tidemq.plannerIdleSeconds, default 10, 0: never kept): a
 * planner starts in about a second, longer than a small read takes, so back-to-back queries
 * share one; past that it ends, and none outlives the queries that use it by more than that
 * (nor this JVM: their standard input closes).
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
    private static final ScheduledExecutorService REAPER = Executors.newSingleThreadScheduledExecutor(r -> {
        Thread t = new Thread(r, "tidemq-planner-reaper");
        t.setDaemon(true);
        return t;
    });

    static {
        REAPER.scheduleWithFixedDelay(Planner::reap, 1, 1, TimeUnit.SECONDS);
    }

    private final String[] cmd;
    private final String pythonPath;
    private final long idleMs;
    private Proc held;                 // the process this query plans with (null: none now)

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
        volatile long idleSinceMs;
        long idleMs;

        Proc(Process p) {
            process = p;
            in = p.getOutputStream();
            out = new BufferedReader(new InputStreamReader(p.getInputStream(), StandardCharsets.UTF_8));
        }
    }

    private Planner(String[] cmd, String pythonPath, long idleMs) {
        this.cmd = cmd;
        this.pythonPath = pythonPath;
        this.idleMs = idleMs;
    }

    /** The planner of the active session (its confs read now, on the driver's thread that has one). */
    static Planner ofSession() {
        double idle;
        try {
            idle = Double.parseDouble(conf("spark.tidemq.plannerIdleSeconds", "10"));
        } catch (NumberFormatException e) {
            throw new IllegalArgumentException("tidemq: spark.tidemq.plannerIdleSeconds must be a number of seconds");
        }
        return new Planner(command(), conf("spark.tidemq.pythonPath", null), (long) (Math.max(0, idle) * 1000));
    }

    private String key() {
        return String.join("\u0000", cmd) + "\u0000" + pythonPath;
    }

    /** How many planner processes are alive in this JVM, held or idle (for tests). */
    static int alive() {
        return LIVE.size();
    }

    private static final java.util.Set<Process> LIVE = ConcurrentHashMap.newKeySet();

    private static void reap() {
        long now = System.currentTimeMillis();
        for (ConcurrentLinkedDeque<Proc> idle : IDLE.values()) {
            for (Proc p : idle) {
                if (now - p.idleSinceMs >= p.idleMs && idle.remove(p)) {
                    end(p);
                }
            }
        }
        LIVE.removeIf(p -> !p.isAlive());
    }

    private static void end(Proc p) {
        try {
            p.in.close();                  // the planner ends when its stdin closes
        } catch (IOException e) {
            // already gone
        }
        try {
            if (!p.process.waitFor(5, TimeUnit.SECONDS)) {
                p.process.destroyForcibly();
            }
        } catch (InterruptedException e) {
            p.process.destroyForcibly();
            Thread.currentThread().interrupt();
        }
        LIVE.remove(p.process);
    }

    /** This query is done planning for now: its process waits for another query a short while. */
    synchronized void release() {
        Proc p = held;
        held = null;
        if (p == null) {
            return;
        }
        if (idleMs <= 0 || !p.process.isAlive()) {
            end(p);
            return;
        }
        p.idleMs = idleMs;
        p.idleSinceMs = System.currentTimeMillis();
        IDLE.computeIfAbsent(key(), k -> new ConcurrentLinkedDeque<>()).addFirst(p);
    }

    /** This query is over: its process ends now. */
    synchronized void close() {
        Proc p = held;
        held = null;
        if (p != null) {
            end(p);
        }
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
    synchronized JsonNode call(ObjectNode req) {
        Proc p = held;
        if (p != null && !p.process.isAlive()) {
            LIVE.remove(p.process);
            p = held = null;
        }
        if (p == null) {
            ConcurrentLinkedDeque<Proc> idle = IDLE.computeIfAbsent(key(), k -> new ConcurrentLinkedDeque<>());
            p = idle.pollFirst();
            while (p != null && !p.process.isAlive()) {
                LIVE.remove(p.process);
                p = idle.pollFirst();
            }
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
                LIVE.remove(p.process);
            }
            held = null;
            throw new IllegalStateException("tidemq: the Python planner (" + String.join(" ", cmd) + ") failed: " + e, e);
        }
        if (line == null) {
            p.process.destroy();
            LIVE.remove(p.process);
            held = null;
            throw new IllegalStateException("tidemq: the Python planner (" + String.join(" ", cmd) + ") ended without "
                    + "an answer (its errors are on the driver's stderr): can that Python import tidemq? "
                    + "tidemq.spark.register(spark) sets spark.tidemq.python to the driver's");
        }
        held = p;
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
        Process proc = b.start();
        LIVE.add(proc);
        return new Proc(proc);
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
