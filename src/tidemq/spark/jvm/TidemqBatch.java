package org.tidemq.spark;

import java.util.function.Supplier;

import com.fasterxml.jackson.databind.JsonNode;
import org.apache.spark.sql.connector.read.Batch;
import org.apache.spark.sql.connector.read.InputPartition;
import org.apache.spark.sql.connector.read.PartitionReaderFactory;
import org.apache.spark.sql.util.CaseInsensitiveStringMap;

/**
 * A batch read: the Python planner's partitions (op "batch": startingOffsets/endingOffsets,
 * timestamps, maxRecordsPerPartition, failOnDataLoss, all as the Python reader plans them),
 * read by ReaderFactory. When the planner says the read is tiered (an archive in play:
 * archived ranges, and live ranges whose head may be cleaned while they are read), the whole
 * batch is the Python reader's, which reads the archive (``reader=jvm`` refuses instead).
 */
final class TidemqBatch implements Batch {
    private final Planner planner;
    private final CaseInsensitiveStringMap options;
    private final Supplier<Batch> python;
    private Batch delegate;

    TidemqBatch(Planner planner, CaseInsensitiveStringMap options, Supplier<Batch> python) {
        this.planner = planner;
        this.options = options;
        this.python = python;
    }

    @Override
    public InputPartition[] planInputPartitions() {
        JsonNode plan;
        try {
            plan = planner.call(Planner.request("batch", options));
        } finally {
            planner.release();                       // a batch plans once: its planner is free again
        }
        if (plan.path("tiered").asBoolean(false)) {
            if (TidemqTable.reader(options).equals("jvm")) {
                throw new IllegalArgumentException("tidemq: reader=jvm, but this read is tiered (an archive is in "
                        + "play) and tiered reads are the Python reader's: leave reader out, or set archivePath=\"\"");
            }
            delegate = python.get();
            return delegate.planInputPartitions();
        }
        delegate = null;
        return RangePartition.all(plan.get("partitions"));
    }

    @Override
    public PartitionReaderFactory createReaderFactory() {
        return delegate != null ? delegate.createReaderFactory() : new ReaderFactory();
    }
}
