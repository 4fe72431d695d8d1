package org.tidemq.spark;

import java.util.ArrayList;
import java.util.List;

import com.fasterxml.jackson.databind.JsonNode;
import org.apache.spark.sql.connector.read.InputPartition;

/**
 * One partition of a read, as the Python planner (tidemq/spark/planner.py) gives it: the
 * offsets [start, end) of one queue and where to read them.
 *
 * <pre>
 * {"topic": "T", "queue": 0, "start": 0, "end": 100,
 *  "source": {"mode": "file", "queueDir": ".../consumequeue/T/0", "commitlogDirs": [...]}
 *         or {"mode": "broker", "endpoints": ["host:port", ...], "timeoutMs": 30000,
 *             "accessKey": ..., "secretKey": ..., "tls": false, "rootCertificates": "/ca.pem"},
 *  "failOnDataLoss": true,
 *  "archived": false, "archive": {"dest": "/archive", "runs": [".../run=..."] or null, "gapsFile": ...}}
 * </pre>
 * {@code archive} (tiered reads, tidemq.spark.tiered): where offsets below the live log are; an
 * {@code archived} partition is read from it only (ArchiveRangeReader), a live one reads from it
 * the head the log no longer holds when it is read (cleaned since planning).
 * In broker mode {@code endpoints} are the members of the group that holds the queue, its leader
 * first (BrokerRangeReader fails over among them); {@code "endpoint"} alone is one member. The
 * connection fields are the read's options (Connection: signing, TLS).
 */
final class RangePartition implements InputPartition {
    private static final long serialVersionUID = 1L;

    final String topic;
    final int queue;
    final long start;
    final long end;
    final boolean broker;
    final String queueDir;
    final List<String> commitlogDirs;
    final long deadBefore;             // file mode: records of the topic's name before it are a deleted topic's
    // file mode: stretches of the log not in commitlogDirs (files.py missing_segments): lo, hi, why, what
    final List<Object[]> missing;
    final List<String> endpoints;
    final Connection connection;
    final long timeoutMs;
    final int pullCountMax;            // records per pull at most (source field "pullCountMax"; default PullClient's)
    final boolean failOnDataLoss;
    final boolean archived;            // planned below the live log: read from the archive only
    final String archiveDest;          // tiered reads: the archive (null: none in play)
    final List<String> archiveRuns;    // the runs the store's manifest records (null: every run under archiveDest)
    final String gapsFile;             // the store's gaps.json, named by a data loss (null: unknown)
    /** Tiered: Spark's Parquet reader for the archive (ArchiveRangeReader.parquetReader), set on the driver. */
    scala.Function1<org.apache.spark.sql.execution.datasources.PartitionedFile,
            scala.collection.Iterator<org.apache.spark.sql.catalyst.InternalRow>> parquet;

    RangePartition(JsonNode p) {
        topic = p.get("topic").asText();
        queue = p.get("queue").asInt();
        start = p.get("start").asLong();
        end = p.get("end").asLong();
        failOnDataLoss = p.get("failOnDataLoss").asBoolean();
        archived = p.path("archived").asBoolean(false);
        JsonNode a = p.get("archive");
        if (a != null && a.isObject()) {
            archiveDest = a.get("dest").asText();
            JsonNode runs = a.get("runs");
            if (runs != null && runs.isArray()) {
                archiveRuns = new ArrayList<>();
                runs.forEach(r -> archiveRuns.add(r.asText()));
            } else {
                archiveRuns = null;
            }
            JsonNode gaps = a.get("gapsFile");
            gapsFile = gaps == null || gaps.isNull() ? null : gaps.asText();
        } else {
            archiveDest = null;
            archiveRuns = null;
            gapsFile = null;
        }
        JsonNode s = p.get("source");
        broker = "broker".equals(s.get("mode").asText());
        queueDir = broker ? null : s.get("queueDir").asText();
        commitlogDirs = new ArrayList<>();
        deadBefore = broker ? -1 : s.path("deadBefore").asLong(-1);
        missing = new ArrayList<>();
        if (!broker) {
            s.get("commitlogDirs").forEach(d -> commitlogDirs.add(d.asText()));
            JsonNode m = s.get("missing");
            if (m != null && m.isArray()) {
                m.forEach(h -> missing.add(new Object[] {h.get(0).asLong(), h.get(1).asLong(), h.get(2).asText(),
                                                          h.get(3).asText()}));
            }
        }
        endpoints = new ArrayList<>();
        if (broker) {
            JsonNode eps = s.get("endpoints");
            if (eps != null && eps.isArray()) {
                eps.forEach(e -> endpoints.add(e.asText()));
            } else {
                endpoints.add(s.get("endpoint").asText());
            }
        }
        connection = broker ? Connection.of(s) : null;
        timeoutMs = broker ? s.get("timeoutMs").asLong() : 0;
        pullCountMax = broker ? Math.max(1, Math.min(PullClient.COUNT_MAX, s.path("pullCountMax").asInt(PullClient.COUNT_MAX))) : 0;
    }

    /** The planner's partitions; on the driver, tiered ones get the session's Parquet reader for the archive. */
    static RangePartition[] all(JsonNode parts) {
        RangePartition[] out = new RangePartition[parts.size()];
        scala.Function1<org.apache.spark.sql.execution.datasources.PartitionedFile,
                scala.collection.Iterator<org.apache.spark.sql.catalyst.InternalRow>> parquet = null;
        for (int i = 0; i < out.length; i++) {
            out[i] = new RangePartition(parts.get(i));
            if (out[i].tiered()) {
                if (parquet == null) {
                    parquet = ArchiveRangeReader.parquetReader(org.apache.spark.sql.SparkSession.active());
                }
                out[i].parquet = parquet;
            }
        }
        return out;
    }

    /** Whether an archive is in play (tidemq.spark.tiered): offsets below the live log are read from it. */
    boolean tiered() {
        return archiveDest != null;
    }

    String describe() {
        return topic + " queue " + queue + " in [" + start + ", " + end + ")";
    }
}
