package org.tidemq.spark;

import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.connector.read.InputPartition;
import org.apache.spark.sql.connector.read.PartitionReader;
import org.apache.spark.sql.connector.read.PartitionReaderFactory;

/** Readers of RangePartitions: the store's files, the broker or the archive, as the partition says. Rows, not
 * column vectors: each is an UnsafeRow written once from its record (BatchBuilder), which Spark copies whole. */
final class ReaderFactory implements PartitionReaderFactory {
    private static final long serialVersionUID = 1L;

    @Override
    public boolean supportColumnarReads(InputPartition partition) {
        return false;
    }

    @Override
    public PartitionReader<InternalRow> createReader(InputPartition partition) {
        RangePartition p = (RangePartition) partition;
        try {
            if (p.archived) {
                return new ArchiveRangeReader(p, p.start, p.end);
            }
            return p.broker ? new BrokerRangeReader(p) : new FileRangeReader(p);
        } catch (java.io.IOException e) {
            throw new java.io.UncheckedIOException(e);
        }
    }
}
