package org.tidemq.spark;

import org.apache.spark.sql.connector.read.Batch;
import org.apache.spark.sql.connector.read.Scan;
import org.apache.spark.sql.connector.read.ScanBuilder;
import org.apache.spark.sql.connector.read.streaming.MicroBatchStream;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.sql.util.CaseInsensitiveStringMap;

/**
 * The JVM reader's scan: a batch (TidemqBatch) or a stream (TidemqStream), columnar per
 * partition (ReaderFactory: a batch handed to the Python reader is read in rows). A stream over a
 * topic with an archive in play (tiered reads: tidemq.spark.tiered) is the Python reader's,
 * decided once when the stream starts; a batch decides when it is planned.
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
        return new TidemqBatch(planner, options, () -> ((org.apache.spark.sql.connector.catalog.SupportsRead) table.twin())
                .newScanBuilder(options).build().toBatch());
    }

    @Override
    public MicroBatchStream toMicroBatchStream(String checkpointLocation) {
        boolean jvm = TidemqTable.reader(options).equals("jvm");
        if (!jvm && planner.call(Planner.request("describe", options)).path("tiered").asBoolean(false)) {
            planner.close();
            return ((org.apache.spark.sql.connector.catalog.SupportsRead) table.twin()).newScanBuilder(options).build()
                    .toMicroBatchStream(checkpointLocation);
        }
        return new TidemqStream(planner, options);
    }
}
