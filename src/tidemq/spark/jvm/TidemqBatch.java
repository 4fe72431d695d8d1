package org.tidemq.spark;

import com.fasterxml.jackson.databind.JsonNode;
import org.apache.spark.sql.connector.read.Batch;
import org.apache.spark.sql.connector.read.InputPartition;
import org.apache.spark.sql.connector.read.PartitionReaderFactory;
import org.apache.spark.sql.util.CaseInsensitiveStringMap;

/**
 * A batch read: the Python planner's partitions (op "batch": startingOffsets/endingOffsets,
 * timestamps, maxRecordsPerPartition, failOnDataLoss, all as the Python reader plans them),
 * read by ReaderFactory. A tiered read (an archive in play) is planned the same way: ranges
 * below the live log are read from the archive (ArchiveRangeReader), the others from the log,
 * reading from the archive a head cleaned since planning.
 */
final class TidemqBatch implements Batch {
    private final Planner planner;
    private final CaseInsensitiveStringMap options;

    TidemqBatch(Planner planner, CaseInsensitiveStringMap options) {
        this.planner = planner;
        this.options = options;
    }

    @Override
    public InputPartition[] planInputPartitions() {
        JsonNode plan;
        try {
            plan = planner.call(Planner.request("batch", options));
        } finally {
            planner.release();                       // a batch plans once: its planner is free again
        }
        return RangePartition.all(plan.get("partitions"));
    }

    @Override
    public PartitionReaderFactory createReaderFactory() {
        return new ReaderFactory();
    }
}
