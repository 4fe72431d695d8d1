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

    /** Every row of a partition as its fields' values (tests: the rows as the codec decodes the records):
     * topic, queue_id, queue_offset, commitlog_offset, msg_id, tags, keys (String[]), body (byte[]),
     * properties (String[]: name, value, name, value, ...), born and store timestamps (microseconds). */
    public static Object[][] rows(String partitionJson) throws IOException {
        RangePartition p = new RangePartition(Planner.parse(partitionJson));
        java.util.ArrayList<Object[]> out = new java.util.ArrayList<>();
        try (RangeReader r = (RangeReader) new ReaderFactory().createReader(p)) {
            while (r.next()) {
                org.apache.spark.sql.catalyst.InternalRow row = r.get();
                Object[] v = new Object[BatchBuilder.FIELDS];
                v[0] = string(row, 0);
                v[1] = row.getInt(1);
                v[2] = row.getLong(2);
                v[3] = row.getLong(3);
                v[4] = string(row, 4);
                v[5] = string(row, 5);
                if (!row.isNullAt(6)) {
                    org.apache.spark.sql.catalyst.util.ArrayData a = row.getArray(6);
                    String[] keys = new String[a.numElements()];
                    for (int i = 0; i < keys.length; i++) {
                        keys[i] = a.isNullAt(i) ? null : a.getUTF8String(i).toString();
                    }
                    v[6] = keys;
                }
                v[7] = row.isNullAt(7) ? null : row.getBinary(7);
                if (!row.isNullAt(8)) {
                    org.apache.spark.sql.catalyst.util.MapData m = row.getMap(8);
                    String[] kv = new String[2 * m.numElements()];
                    for (int i = 0; i < m.numElements(); i++) {
                        kv[2 * i] = m.keyArray().getUTF8String(i).toString();
                        kv[2 * i + 1] = m.valueArray().isNullAt(i) ? null : m.valueArray().getUTF8String(i).toString();
                    }
                    v[8] = kv;
                }
                v[9] = row.getLong(9);
                v[10] = row.getLong(10);
                out.add(v);
            }
        }
        return out.toArray(new Object[0][]);
    }

    private static String string(org.apache.spark.sql.catalyst.InternalRow row, int i) {
        return row.isNullAt(i) ? null : row.getUTF8String(i).toString();
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
