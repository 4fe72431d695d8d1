package org.tidemq.spark;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import org.apache.spark.sql.connector.read.InputPartition;
import org.apache.spark.sql.connector.read.PartitionReaderFactory;
import org.apache.spark.sql.connector.read.streaming.MicroBatchStream;
import org.apache.spark.sql.connector.read.streaming.Offset;
import org.apache.spark.sql.connector.read.streaming.ReadLimit;
import org.apache.spark.sql.connector.read.streaming.ReadMaxRows;
import org.apache.spark.sql.connector.read.streaming.SupportsTriggerAvailableNow;
import org.apache.spark.sql.util.CaseInsensitiveStringMap;

/**
 * A stream read by the JVM reader, planned by the Python planner (ops "initial", "latest",
 * "partitions": tidemq.spark.source's stream logic: startingOffsets, maxOffsetsPerTrigger
 * shared among queues by backlog, Trigger.AvailableNow's target). The availableNow target is
 * this object's state; the planner keeps none.
 */
final class TidemqStream implements MicroBatchStream, SupportsTriggerAvailableNow {
    private final Planner planner;
    private final CaseInsensitiveStringMap options;
    private String target;            // availableNow: the offsets when the query began

    TidemqStream(Planner planner, CaseInsensitiveStringMap options) {
        this.planner = planner;
        this.options = options;
    }

    private ObjectNode request(String op) {
        return Planner.request(op, options);
    }

    private static Offset offsets(JsonNode got) {
        return new JsonOffset(got.get("offsets").asText());
    }

    @Override
    public Offset initialOffset() {
        return offsets(planner.call(request("initial")));
    }

    @Override
    public Offset deserializeOffset(String json) {
        return new JsonOffset(json);
    }

    @Override
    public Offset latestOffset() {
        throw new UnsupportedOperationException("tidemq: latestOffset(start, limit) is the one Spark calls");
    }

    @Override
    public ReadLimit getDefaultReadLimit() {
        String max = options.get("maxOffsetsPerTrigger");
        if (max == null || max.isEmpty()) {
            return ReadLimit.allAvailable();
        }
        try {
            return ReadLimit.maxRows(Long.parseLong(max.trim()));
        } catch (NumberFormatException e) {
            throw new IllegalArgumentException("tidemq: option maxOffsetsPerTrigger must be an integer, not '" + max + "'");
        }
    }

    @Override
    public Offset latestOffset(Offset start, ReadLimit limit) {
        ObjectNode req = request("latest");
        req.put("start", start == null ? "{}" : start.json());
        if (limit instanceof ReadMaxRows) {
            req.put("maxRows", ((ReadMaxRows) limit).maxRows());
        }
        if (target != null) {
            req.put("target", target);
        }
        return offsets(planner.call(req));
    }

    @Override
    public Offset reportLatestOffset() {
        return offsets(planner.call(request("report_latest")));
    }

    @Override
    public void prepareForTriggerAvailableNow() {
        target = planner.call(request("report_latest")).get("offsets").asText();
    }

    @Override
    public InputPartition[] planInputPartitions(Offset start, Offset end) {
        ObjectNode req = request("partitions");
        req.put("start", start.json());
        req.put("end", end.json());
        JsonNode plan = planner.call(req);
        return RangePartition.all(plan.get("partitions"));
    }

    @Override
    public PartitionReaderFactory createReaderFactory() {
        return new ReaderFactory();
    }

    @Override
    public void commit(Offset end) {
    }

    @Override
    public void stop() {
        planner.close();                             // the query is over: its planner ends
    }
}
