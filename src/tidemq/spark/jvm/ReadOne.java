package org.tidemq.spark;

import java.io.IOException;
import java.util.Arrays;

/**
 * One partition read outside a Spark job, as an executor would read it: the queue offsets of
 * its rows, in order (a failure raises as it would in the task). For tests of the readers
 * (damaged records, damaged frames) and for checking a store by hand:
 * {@code spark._jvm.org.tidemq.spark.ReadOne.queueOffsets(partitionJson)}, the partition as
 * the planner describes it (RangePartition).
 */
public final class ReadOne {
    private ReadOne() {}

    /** How many planner processes this JVM has alive (held by a query, or idle a short while). */
    public static int plannersAlive() {
        return Planner.alive();
    }

    /** How many rows this JVM's readers have served from archives (tiered reads: which reader read them). */
    public static long archivedRowsServed() {
        return ArchiveRangeReader.served();
    }

    /** The MQv2-HMAC-SHA1 authorization header the JVM reader sends (checked against tidemq.protocol.signing). */
    public static String authorization(String accessKey, String secretKey, String dateTime) {
        return Connection.authorization(accessKey, secretKey, dateTime);
    }

    /** A partition read batch by batch (tests: a member killed between two batches). */
    public static final class Reading implements AutoCloseable {
        private final RangeReader reader;

        Reading(RangeReader reader) {
            this.reader = reader;
        }

        /** The queue offsets of the next batch; empty when the partition is done. */
        public long[] next() throws IOException {
            if (!reader.next()) {
                return new long[0];
            }
            long[] out = new long[BatchBuilder.CAPACITY];
            int n = 0;
            do {
                if (n == out.length) {
                    out = Arrays.copyOf(out, n * 2);
                }
                out[n++] = reader.get().getLong(BatchBuilder.QUEUE_OFFSET);
            } while (reader.buffered() && reader.next());
            return Arrays.copyOf(out, n);
        }

        /** How many times a broker-mode reader moved to another member. */
        public int failovers() {
            return reader instanceof BrokerRangeReader ? ((BrokerRangeReader) reader).failovers() : 0;
        }

        @Override
        public void close() throws IOException {
            reader.close();
        }
    }

    public static Reading open(String partitionJson) {
        RangePartition p = new RangePartition(Planner.parse(partitionJson));
        return new Reading((RangeReader) new ReaderFactory().createReader(p));
    }

    public static long[] queueOffsets(String partitionJson) throws IOException {
        RangePartition p = new RangePartition(Planner.parse(partitionJson));
        long[] out = new long[16];
        int n = 0;
        try (RangeReader r = (RangeReader) new ReaderFactory().createReader(p)) {
            while (r.next()) {
                if (n == out.length) {
                    out = Arrays.copyOf(out, n * 2);
                }
                out[n++] = r.get().getLong(BatchBuilder.QUEUE_OFFSET);
            }
        }
        return Arrays.copyOf(out, n);
    }
}
