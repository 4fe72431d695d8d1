package org.tidemq.spark;

import java.io.IOException;
import java.util.zip.CRC32;

import org.apache.spark.sql.connector.read.PartitionReader;
import org.apache.spark.sql.catalyst.InternalRow;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * What the file-mode and broker-mode readers share: rows of checked records, made a batch at a
 * time (BatchBuilder) and handed to Spark one by one, and the
 * offsets of the range that were not served (cleaned away, holes, damaged records), which
 * fail the read under failOnDataLoss (DataLossError, the Python reader's words) or are
 * skipped with one warning at the end.
 */
abstract class RangeReader implements PartitionReader<InternalRow> {
    private static final Logger LOG = LoggerFactory.getLogger("tidemq.spark");

    protected final RangePartition part;
    protected final BatchBuilder rows = new BatchBuilder();
    protected final CRC32 crc = new CRC32();   // for Records.check
    protected long at;                         // the next offset of the range to read
    private long skipped;
    private RangeReader head;                  // tiered: archived rows served before the live ones
    private InternalRow current;
    private int served;                        // rows of the batch handed out

    RangeReader(RangePartition part) {
        this.part = part;
        this.at = part.start;
    }

    /** Add records to {@link #rows} until it is full or the range is done. */
    protected abstract void fill() throws IOException;

    /** Whether the whole range has been read. */
    protected abstract boolean done();

    /** {@code n} offsets of the range are not in the store (tiered: nor in the archive). */
    protected final void lost(long n) {
        if (n <= 0) {
            return;
        }
        if (part.failOnDataLoss) {
            throw new DataLossError("DataLossError: " + n + " offsets of " + part.describe() + " are " + why()
                    + ". Set failOnDataLoss=false to skip them.");
        }
        skipped += n;
    }

    /** Where the lost offsets are not, in tidemq.spark.source's words. */
    private String why() {
        if (!part.tiered()) {
            return "not in the store (cleaned away or unreadable)";
        }
        return "in neither the store nor the archive at " + part.archiveDest + " (deleted before they were archived"
                + (part.gapsFile != null ? "? see " + part.gapsFile : "?") + ")";
    }

    /** Tiered reads: the offsets [from, to), below what the live log still holds, are served from the
     * archive before any row of this reader's own (called before this reader adds a row). */
    protected final void archiveFirst(long from, long to) throws IOException {
        if (to > from) {
            head = new ArchiveRangeReader(part, from, to);
        }
    }

    /** Whether archived rows are to be served before this reader adds any. */
    protected final boolean archiving() {
        return head != null;
    }

    @Override
    public final boolean next() throws IOException {
        while (true) {
            if (head != null) {
                if (head.next()) {
                    current = head.get();
                    return true;
                }
                head.close();
                head = null;
            }
            if (served < rows.rows()) {
                current = rows.row(served++);
                return true;
            }
            if (done()) {
                return false;
            }
            rows.reset();
            served = 0;
            fill();
        }
    }

    /** Whether the batch read last has rows not handed out yet (ReadOne: a partition read batch by batch). */
    final boolean buffered() {
        return head != null ? head.buffered() : served < rows.rows();
    }

    @Override
    public final InternalRow get() {
        return current;
    }

    @Override
    public void close() throws IOException {
        if (head != null) {
            head.close();
            head = null;
        }
        rows.close();
        if (skipped > 0) {
            LOG.warn("tidemq: skipped {} offsets of {} (failOnDataLoss=false)", skipped, part.describe());
        }
    }
}
