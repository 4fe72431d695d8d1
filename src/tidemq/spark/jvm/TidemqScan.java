package org.tidemq.spark;

import org.apache.spark.sql.connector.read.Batch;
import org.apache.spark.sql.connector.read.Scan;
import org.apache.spark.sql.connector.read.ScanBuilder;
import org.apache.spark.sql.connector.read.streaming.MicroBatchStream;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.sql.util.CaseInsensitiveStringMap;

/**
 * The JVM reader's scan: a batch (TidemqBatch) or a stream (TidemqStream), rows (UnsafeRows) per
 * partition (ReaderFactory), tiered or not (an archive in play: tidemq.spark.tiered).
 */
final class TidemqScan implements ScanBuilder, Scan {
    private final TidemqTable table;
    private final CaseInsensitiveStringMap options;
    private final Planner planner = Planner.ofSession();

    TidemqScan(TidemqTable table, CaseInsensitiveStringMap options) {
        this.table = table;
        this.options = options;
    }

    @Override
    public Scan build() {
        return this;
    }

    @Override
    public StructType readSchema() {
        return BatchBuilder.SCHEMA;
    }

    @Override
    public Batch toBatch() {
        return new TidemqBatch(planner, options);
    }

    @Override
    public MicroBatchStream toMicroBatchStream(String checkpointLocation) {
        return new TidemqStream(planner, options);
    }
}
