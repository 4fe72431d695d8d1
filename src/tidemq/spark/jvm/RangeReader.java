package org.tidemq.spark;

import java.io.IOException;
import java.util.zip.CRC32;

import org.apache.spark.sql.connector.read.PartitionReader;
import org.apache.spark.sql.vectorized.ColumnarBatch;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * What the file-mode and broker-mode readers share: batches of checked records, and the
 * offsets of the range that were not served (cleaned away, holes, damaged records), which
 * fail the read under failOnDataLoss (DataLossError, the Python reader's words) or are
 * skipped with one warning at the end.
 */
abstract class RangeReader implements PartitionReader<ColumnarBatch> {
    private static final Logger LOG = LoggerFactory.getLogger("tidemq.spark");

    protected final RangePartition part;
    protected final BatchBuilder rows = new BatchBuilder();
    protected final CRC32 crc = new CRC32();   // for Records.check
    protected long at;                         // the next offset of the range to read
    private long skipped;

    RangeReader(RangePartition part) {
        this.part = part;
        this.at = part.start;
    }

    /** Add records to {@link #rows} until it is full or the range is done. */
    protected abstract void fill() throws IOException;

    /** Whether the whole range has been read. */
    protected abstract boolean done();

    /** {@code n} offsets of the range are not in the store. */
    protected final void lost(long n) {
        if (n <= 0) {
            return;
        }
        if (part.failOnDataLoss) {
            throw new DataLossError("DataLossError: " + n + " offsets of " + part.describe()
                    + " are not in the store (cleaned away or unreadable). Set failOnDataLoss=false to skip them.");
        }
        skipped += n;
    }

    @Override
    public final boolean next() throws IOException {
        rows.reset();
        while (rows.rows() == 0 && !done()) {
            fill();
        }
        return rows.rows() > 0;
    }

    @Override
    public final ColumnarBatch get() {
        return rows.batch();
    }

    @Override
    public void close() throws IOException {
        rows.close();
        if (skipped > 0) {
            LOG.warn("tidemq: skipped {} offsets of {} (failOnDataLoss=false)", skipped, part.describe());
        }
    }
}
