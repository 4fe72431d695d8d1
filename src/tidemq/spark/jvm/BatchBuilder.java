package org.tidemq.spark;

import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;

import org.apache.spark.sql.execution.vectorized.OnHeapColumnVector;
import org.apache.spark.sql.execution.vectorized.WritableColumnVector;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.catalyst.util.ArrayData;
import org.apache.spark.sql.catalyst.util.MapData;
import org.apache.spark.sql.vectorized.ColumnarBatch;
import org.apache.spark.unsafe.types.UTF8String;

/**
 * Checked records (Records.check) into a ColumnarBatch of the source's schema, column by
 * column, as tidemq.spark.decode makes its Arrow batches: the properties map without the
 * hidden record-CRC property; tags, keys and msg_id from the properties TAGS, KEYS (split on
 * spaces, empty pieces dropped, [] when absent) and UNIQ_KEY (or, where it is absent or
 * empty, the offset message id: store host and commit-log offset in upper-case hex).
 * The vectors are reused: a batch is valid until the next {@link #reset}.
 */
final class BatchBuilder {
    static final StructType SCHEMA = StructType.fromDDL(TidemqProvider.SCHEMA_DDL);
    static final int CAPACITY = 4096;
    private static final byte[] TAGS = "TAGS".getBytes(StandardCharsets.US_ASCII);
    private static final byte[] KEYS = "KEYS".getBytes(StandardCharsets.US_ASCII);
    private static final byte[] UNIQ_KEY = "UNIQ_KEY".getBytes(StandardCharsets.US_ASCII);
    private static final byte[] HEX = "0123456789ABCDEF".getBytes(StandardCharsets.US_ASCII);

    private final OnHeapColumnVector[] cols = OnHeapColumnVector.allocateColumns(CAPACITY, SCHEMA);
    private final WritableColumnVector topic = cols[0], queueId = cols[1], queueOffset = cols[2],
            commitlogOffset = cols[3], msgId = cols[4], tags = cols[5], keys = cols[6], body = cols[7],
            props = cols[8], born = cols[9], stored = cols[10];
    private final WritableColumnVector keyItems = keys.arrayData();
    private final WritableColumnVector propNames = (WritableColumnVector) props.getChild(0);
    private final WritableColumnVector propValues = (WritableColumnVector) props.getChild(1);
    private final ColumnarBatch batch = new ColumnarBatch(cols);
    private final byte[] scratch = new byte[32];
    private byte[] text = new byte[512];
    private int rows;

    int rows() {
        return rows;
    }

    boolean full() {
        return rows >= CAPACITY;
    }

    void reset() {
        for (OnHeapColumnVector c : cols) {
            c.reset();
        }
        rows = 0;
    }

    ColumnarBatch batch() {
        batch.setNumRows(rows);
        return batch;
    }

    void close() {
        batch.close();
    }

    /** Append the record at {@code pos} (of {@code size} bytes, already checked) of {@code buf}. */
    void add(ByteBuffer buf, int pos, int size) {
        int r = rows;
        int blen = buf.getInt(pos + Records.OFF_BODYLEN);
        int tpos = pos + Records.OFF_BODY + blen;
        int tlen = buf.get(tpos) & 0xFF;
        int ppos = tpos + 1 + tlen;
        int plen = buf.getShort(ppos) & 0xFFFF;
        topic.putByteArray(r, buf, tpos + 1, tlen);
        queueId.putInt(r, buf.getInt(pos + Records.OFF_QUEUEID));
        queueOffset.putLong(r, buf.getLong(pos + Records.OFF_QUEUEOFFSET));
        commitlogOffset.putLong(r, buf.getLong(pos + Records.OFF_PHYSICALOFFSET));
        body.putByteArray(r, buf, pos + Records.OFF_BODY, blen);
        born.putLong(r, buf.getLong(pos + Records.OFF_BORNTIMESTAMP) * 1000);
        stored.putLong(r, buf.getLong(pos + Records.OFF_STORETIMESTAMP) * 1000);
        int ulen = Math.max(plen - Records.CRC_TAIL_LEN - 1, 0);   // user properties, last separator off
        properties(r, buf, ppos + 2, ulen, pos);
        rows = r + 1;
    }

    /** Append an archive's row (its columns ArchiveRangeReader.COLUMNS; the topic given). */
    void addArchived(byte[] topicName, InternalRow row) {
        int r = rows;
        topic.putByteArray(r, topicName, 0, topicName.length);
        queueId.putInt(r, row.getInt(0));
        queueOffset.putLong(r, row.getLong(1));
        copyLong(row, 2, commitlogOffset, r);
        copyString(row, 3, msgId, r);
        copyString(row, 4, tags, r);
        if (row.isNullAt(5)) {
            keys.putNull(r);
        } else {
            ArrayData a = row.getArray(5);
            int k0 = keyItems.getElementsAppended();
            for (int j = 0; j < a.numElements(); j++) {
                append(keyItems, a.isNullAt(j) ? null : a.getUTF8String(j));
            }
            keys.putArray(r, k0, a.numElements());
        }
        if (row.isNullAt(6)) {
            body.putNull(r);
        } else {
            byte[] v = row.getBinary(6);
            body.putByteArray(r, v, 0, v.length);
        }
        if (row.isNullAt(7)) {
            props.putNull(r);
        } else {
            MapData m = row.getMap(7);
            ArrayData names = m.keyArray(), values = m.valueArray();
            int first = propNames.getElementsAppended();
            for (int j = 0; j < m.numElements(); j++) {
                append(propNames, names.getUTF8String(j));
                append(propValues, values.isNullAt(j) ? null : values.getUTF8String(j));
            }
            props.putArray(r, first, m.numElements());
        }
        copyLong(row, 8, born, r);
        copyLong(row, 9, stored, r);
        rows = r + 1;
    }

    private static void copyLong(InternalRow from, int i, WritableColumnVector to, int r) {
        if (from.isNullAt(i)) {
            to.putNull(r);
        } else {
            to.putLong(r, from.getLong(i));
        }
    }

    private static void copyString(InternalRow from, int i, WritableColumnVector to, int r) {
        if (from.isNullAt(i)) {
            to.putNull(r);
        } else {
            byte[] v = from.getUTF8String(i).getBytes();
            to.putByteArray(r, v, 0, v.length);
        }
    }

    private static void append(WritableColumnVector to, UTF8String s) {
        if (s == null) {
            to.appendNull();
        } else {
            byte[] v = s.getBytes();
            to.appendByteArray(v, 0, v.length);
        }
    }

    /** The properties map of row r, and TAGS / KEYS / msg_id picked from it (the last one of a name wins). */
    private void properties(int r, ByteBuffer buf, int at, int len, int recordPos) {
        byte[] t;
        int i0;
        if (buf.hasArray()) {                // a pull's bytes: read in place
            t = buf.array();
            i0 = buf.arrayOffset() + at;
        } else {                             // a mapped segment: copied once
            if (text.length < len) {
                text = new byte[Math.max(len, text.length * 2)];
            }
            buf.get(at, text, 0, len);
            t = text;
            i0 = 0;
        }
        if (!ascii(t, i0, len)) {            // invalid UTF-8 replaced, as decode.py's _as_string
            t = new String(t, i0, len, StandardCharsets.UTF_8).getBytes(StandardCharsets.UTF_8);
            i0 = 0;
            len = t.length;
        }
        int first = propNames.getElementsAppended();
        int n = 0, tagAt = -1, tagLen = 0, keyAt = -1, keyLen = 0, uniqAt = -1, uniqLen = 0;
        int i = i0, end = i0 + len;
        while (len > 0 && i <= end) {
            int e = i;
            while (e < end && t[e] != 2) {
                e++;
            }
            int sep = i;
            while (sep < e && t[sep] != 1) {
                sep++;
            }
            if (sep < e) {                   // an item without \x01 is not a property: dropped
                int vAt = sep + 1, vLen = e - sep - 1, nLen = sep - i;
                propNames.appendByteArray(t, i, nLen);
                propValues.appendByteArray(t, vAt, vLen);
                n++;
                if (is(t, i, nLen, TAGS)) {
                    tagAt = vAt;
                    tagLen = vLen;
                } else if (is(t, i, nLen, KEYS)) {
                    keyAt = vAt;
                    keyLen = vLen;
                } else if (is(t, i, nLen, UNIQ_KEY)) {
                    uniqAt = vAt;
                    uniqLen = vLen;
                }
            }
            i = e + 1;
        }
        props.putArray(r, first, n);
        if (tagAt >= 0) {
            tags.putByteArray(r, t, tagAt, tagLen);
        } else {
            tags.putNull(r);
        }
        int k0 = keyItems.getElementsAppended(), k = 0;
        for (int j = keyAt, kEnd = keyAt + keyLen; keyAt >= 0 && j < kEnd; ) {
            int e = j;
            while (e < kEnd && t[e] != ' ') {
                e++;
            }
            if (e > j) {
                keyItems.appendByteArray(t, j, e - j);
                k++;
            }
            j = e + 1;
        }
        keys.putArray(r, k0, k);
        if (uniqAt >= 0 && uniqLen > 0) {
            msgId.putByteArray(r, t, uniqAt, uniqLen);
        } else {
            offsetMsgId(r, buf, recordPos);
        }
    }

    private void offsetMsgId(int r, ByteBuffer buf, int pos) {
        byte[] s = scratch;
        for (int i = 0; i < 8; i++) {
            int b = buf.get(pos + Records.OFF_STOREHOST + i) & 0xFF;
            s[2 * i] = HEX[b >>> 4];
            s[2 * i + 1] = HEX[b & 15];
        }
        long off = buf.getLong(pos + Records.OFF_PHYSICALOFFSET);
        for (int i = 0; i < 8; i++) {
            int b = (int) (off >>> (56 - 8 * i)) & 0xFF;
            s[16 + 2 * i] = HEX[b >>> 4];
            s[17 + 2 * i] = HEX[b & 15];
        }
        msgId.putByteArray(r, s, 0, 32);
    }

    private static final java.lang.invoke.VarHandle LONGS =
            java.lang.invoke.MethodHandles.byteArrayViewVarHandle(long[].class, java.nio.ByteOrder.LITTLE_ENDIAN);

    /** Whether t[at : at + len] is all ASCII (eight bytes at a time). */
    private static boolean ascii(byte[] t, int at, int len) {
        int i = at, end = at + len;
        for (; i + 8 <= end; i += 8) {
            if (((long) LONGS.get(t, i) & 0x8080808080808080L) != 0) {
                return false;
            }
        }
        for (; i < end; i++) {
            if (t[i] < 0) {
                return false;
            }
        }
        return true;
    }

    private static boolean is(byte[] t, int at, int len, byte[] name) {
        if (len != name.length) {
            return false;
        }
        for (int i = 0; i < len; i++) {
            if (t[at + i] != name[i]) {
                return false;
            }
        }
        return true;
    }
}
