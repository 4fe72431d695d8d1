package org.tidemq.spark;

import java.lang.invoke.MethodHandles;
import java.lang.invoke.VarHandle;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.charset.StandardCharsets;

import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.catalyst.expressions.UnsafeRow;
import org.apache.spark.sql.catalyst.expressions.codegen.UnsafeArrayWriter;
import org.apache.spark.sql.catalyst.expressions.codegen.UnsafeRowWriter;
import org.apache.spark.sql.catalyst.util.ArrayData;
import org.apache.spark.sql.catalyst.util.MapData;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.unsafe.Platform;
import org.apache.spark.unsafe.types.UTF8String;

/**
 * Checked records (Records.check) into rows of the source's schema, as tidemq.spark.decode makes
 * its Arrow batches: the properties map without the hidden record-CRC property; tags, keys and
 * msg_id from the properties TAGS, KEYS (split on spaces, empty pieces dropped, [] when absent)
 * and UNIQ_KEY (or, where it is absent or empty, the offset message id: store host and commit-log
 * offset in upper-case hex).
 *
 * <p>Each record is written once, straight from its bytes, as an UnsafeRow (Spark's own row
 * format), the rows of a batch back to back in one buffer: Spark's projection then copies a
 * row's strings, array and map whole. (Column vectors cost a second pass: Spark turns each of
 * their rows into an UnsafeRow element by element, a string object per map entry.) The buffer
 * is reused: a batch's rows are valid until the next {@link #reset}.
 */
final class BatchBuilder {
    static final StructType SCHEMA = StructType.fromDDL(TidemqProvider.SCHEMA_DDL);
    static final int CAPACITY = 4096;
    /** A batch's bytes at most (past it the batch is full whatever its rows): large bodies stay well
     * below a Java array's limit. */
    static final int BYTES_MAX = 64 << 20;
    static final int FIELDS = 11;
    static final int TOPIC = 0, QUEUE_ID = 1, QUEUE_OFFSET = 2, COMMITLOG_OFFSET = 3, MSG_ID = 4, TAGS_COL = 5,
            KEYS_COL = 6, BODY = 7, PROPERTIES = 8, BORN = 9, STORED = 10;
    private static final byte[] TAGS = "TAGS".getBytes(StandardCharsets.US_ASCII);
    private static final byte[] KEYS = "KEYS".getBytes(StandardCharsets.US_ASCII);
    private static final byte[] UNIQ_KEY = "UNIQ_KEY".getBytes(StandardCharsets.US_ASCII);
    private static final byte[] HEX = "0123456789ABCDEF".getBytes(StandardCharsets.US_ASCII);
    private static final VarHandle INTS = MethodHandles.byteArrayViewVarHandle(int[].class, ByteOrder.BIG_ENDIAN);
    private static final VarHandle LONGS = MethodHandles.byteArrayViewVarHandle(long[].class, ByteOrder.BIG_ENDIAN);
    private static final VarHandle LE_LONGS = MethodHandles.byteArrayViewVarHandle(long[].class,
            ByteOrder.LITTLE_ENDIAN);

    // the batch's rows, back to back in the buffer of `all` (a one-field row whose buffer holder they share)
    private final UnsafeRowWriter all = new UnsafeRowWriter(1, 1 << 20);
    private final UnsafeRowWriter w = new UnsafeRowWriter(all, FIELDS);
    private final UnsafeArrayWriter items = new UnsafeArrayWriter(w, 8);     // keys, property names, values
    private final int[] starts = new int[CAPACITY], sizes = new int[CAPACITY];
    private final UnsafeRow row = new UnsafeRow(FIELDS);
    private final byte[] scratch = new byte[32];
    private byte[] text = new byte[512];                 // a mapped record, copied once
    private int[] props = new int[32];                   // name at, name len, value at, value len per property
    private int rows;

    int rows() {
        return rows;
    }

    boolean full() {
        return rows >= CAPACITY || all.cursor() - Platform.BYTE_ARRAY_OFFSET >= BYTES_MAX;
    }

    void reset() {
        all.reset();
        rows = 0;
    }

    /** Row {@code i} of the batch (one UnsafeRow object, pointed at it: valid until the next call). */
    UnsafeRow row(int i) {
        row.pointTo(all.getBuffer(), starts[i], sizes[i]);
        return row;
    }

    void close() {
        rows = 0;
    }

    private int begin() {
        int at = all.cursor();
        w.resetRowWriter();
        return at;
    }

    private void end(int at) {
        starts[rows] = at;
        sizes[rows] = all.cursor() - at;
        rows++;
    }

    /** Append the record at {@code pos} (of {@code size} bytes, already checked) of {@code buf}. */
    void add(ByteBuffer buf, int pos, int size) {
        byte[] t;
        int p;
        if (buf.hasArray()) {                // a pull's bytes: read in place
            t = buf.array();
            p = buf.arrayOffset() + pos;
        } else {                             // a mapped segment: copied once
            if (text.length < size) {
                text = new byte[Math.max(size, text.length * 2)];
            }
            buf.get(pos, text, 0, size);
            t = text;
            p = 0;
        }
        int blen = (int) INTS.get(t, p + Records.OFF_BODYLEN);
        int tpos = p + Records.OFF_BODY + blen;
        int tlen = t[tpos] & 0xFF;
        int ppos = tpos + 1 + tlen;
        int plen = ((t[ppos] & 0xFF) << 8) | (t[ppos + 1] & 0xFF);
        int at = begin();
        w.write(TOPIC, t, tpos + 1, tlen);
        w.write(QUEUE_ID, (int) INTS.get(t, p + Records.OFF_QUEUEID));
        w.write(QUEUE_OFFSET, (long) LONGS.get(t, p + Records.OFF_QUEUEOFFSET));
        w.write(COMMITLOG_OFFSET, (long) LONGS.get(t, p + Records.OFF_PHYSICALOFFSET));
        w.write(BORN, (long) LONGS.get(t, p + Records.OFF_BORNTIMESTAMP) * 1000);
        w.write(STORED, (long) LONGS.get(t, p + Records.OFF_STORETIMESTAMP) * 1000);
        w.write(BODY, t, p + Records.OFF_BODY, blen);
        int ulen = Math.max(plen - Records.CRC_TAIL_LEN - 1, 0);   // user properties, last separator off
        properties(t, ppos + 2, ulen, p);
        end(at);
    }

    /** The properties map, and TAGS / KEYS / msg_id picked from it (the last one of a name wins). */
    private void properties(byte[] t, int i0, int len, int recordAt) {
        byte[] u = t;
        if (!ascii(t, i0, len)) {            // invalid UTF-8 replaced, as decode.py's _as_string
            u = new String(t, i0, len, StandardCharsets.UTF_8).getBytes(StandardCharsets.UTF_8);
            i0 = 0;
            len = u.length;
        }
        int n = 0, tagAt = -1, tagLen = 0, keyAt = -1, keyLen = 0, uniqAt = -1, uniqLen = 0;
        int i = i0, end = i0 + len;
        while (len > 0 && i <= end) {
            int e = i;
            while (e < end && u[e] != 2) {
                e++;
            }
            int sep = i;
            while (sep < e && u[sep] != 1) {
                sep++;
            }
            if (sep < e) {                   // an item without \x01 is not a property: dropped
                int vAt = sep + 1, vLen = e - sep - 1, nLen = sep - i;
                if (4 * n + 4 > props.length) {
                    props = java.util.Arrays.copyOf(props, props.length * 2);
                }
                props[4 * n] = i;
                props[4 * n + 1] = nLen;
                props[4 * n + 2] = vAt;
                props[4 * n + 3] = vLen;
                n++;
                if (is(u, i, nLen, TAGS)) {
                    tagAt = vAt;
                    tagLen = vLen;
                } else if (is(u, i, nLen, KEYS)) {
                    keyAt = vAt;
                    keyLen = vLen;
                } else if (is(u, i, nLen, UNIQ_KEY)) {
                    uniqAt = vAt;
                    uniqLen = vLen;
                }
            }
            i = e + 1;
        }
        // the map: the key array's size in bytes, the key array, the value array (UnsafeMapData)
        int mapAt = w.cursor();
        w.grow(8);
        w.increaseCursor(8);
        int keysAt = w.cursor();
        items.initialize(n);
        for (int j = 0; j < n; j++) {
            items.write(j, u, props[4 * j], props[4 * j + 1]);
        }
        Platform.putLong(w.getBuffer(), keysAt - 8, w.cursor() - keysAt);
        items.initialize(n);
        for (int j = 0; j < n; j++) {
            items.write(j, u, props[4 * j + 2], props[4 * j + 3]);
        }
        w.setOffsetAndSizeFromPreviousCursor(PROPERTIES, mapAt);
        if (tagAt >= 0) {
            w.write(TAGS_COL, u, tagAt, tagLen);
        } else {
            w.setNullAt(TAGS_COL);
        }
        int k = 0;                           // keys: the KEYS value's pieces, counted, then written
        for (int j = keyAt, kEnd = keyAt + keyLen; keyAt >= 0 && j < kEnd; ) {
            int e = j;
            while (e < kEnd && u[e] != ' ') {
                e++;
            }
            if (e > j) {
                k++;
            }
            j = e + 1;
        }
        int arrayAt = w.cursor();
        items.initialize(k);
        k = 0;
        for (int j = keyAt, kEnd = keyAt + keyLen; keyAt >= 0 && j < kEnd; ) {
            int e = j;
            while (e < kEnd && u[e] != ' ') {
                e++;
            }
            if (e > j) {
                items.write(k++, u, j, e - j);
            }
            j = e + 1;
        }
        w.setOffsetAndSizeFromPreviousCursor(KEYS_COL, arrayAt);
        if (uniqAt >= 0 && uniqLen > 0) {
            w.write(MSG_ID, u, uniqAt, uniqLen);
        } else {
            offsetMsgId(t, recordAt);
        }
    }

    private void offsetMsgId(byte[] t, int p) {
        byte[] s = scratch;
        for (int i = 0; i < 8; i++) {
            int b = t[p + Records.OFF_STOREHOST + i] & 0xFF;
            s[2 * i] = HEX[b >>> 4];
            s[2 * i + 1] = HEX[b & 15];
        }
        long off = (long) LONGS.get(t, p + Records.OFF_PHYSICALOFFSET);
        for (int i = 0; i < 8; i++) {
            int b = (int) (off >>> (56 - 8 * i)) & 0xFF;
            s[16 + 2 * i] = HEX[b >>> 4];
            s[17 + 2 * i] = HEX[b & 15];
        }
        w.write(MSG_ID, s, 0, 32);
    }

    /** Append an archive's row (its columns ArchiveRangeReader.COLUMNS; the topic given). */
    void addArchived(byte[] topicName, InternalRow r) {
        int at = begin();
        w.write(TOPIC, topicName, 0, topicName.length);
        w.write(QUEUE_ID, r.getInt(0));
        w.write(QUEUE_OFFSET, r.getLong(1));
        copyLong(r, 2, COMMITLOG_OFFSET);
        copyString(r, 3, MSG_ID);
        copyString(r, 4, TAGS_COL);
        if (r.isNullAt(5)) {
            w.setNullAt(KEYS_COL);
        } else {
            int arrayAt = w.cursor();
            strings(r.getArray(5));
            w.setOffsetAndSizeFromPreviousCursor(KEYS_COL, arrayAt);
        }
        if (r.isNullAt(6)) {
            w.setNullAt(BODY);
        } else {
            w.write(BODY, r.getBinary(6));
        }
        if (r.isNullAt(7)) {
            w.setNullAt(PROPERTIES);
        } else {
            MapData m = r.getMap(7);
            int mapAt = w.cursor();
            w.grow(8);
            w.increaseCursor(8);
            int keysAt = w.cursor();
            strings(m.keyArray());
            Platform.putLong(w.getBuffer(), keysAt - 8, w.cursor() - keysAt);
            strings(m.valueArray());
            w.setOffsetAndSizeFromPreviousCursor(PROPERTIES, mapAt);
        }
        copyLong(r, 8, BORN);
        copyLong(r, 9, STORED);
        end(at);
    }

    /** An array of strings at the cursor (its nulls kept). */
    private void strings(ArrayData a) {
        int n = a.numElements();
        items.initialize(n);
        for (int j = 0; j < n; j++) {
            if (a.isNullAt(j)) {
                items.setNull8Bytes(j);
            } else {
                items.write(j, a.getUTF8String(j));
            }
        }
    }

    private void copyLong(InternalRow from, int i, int to) {
        if (from.isNullAt(i)) {
            w.setNullAt(to);
        } else {
            w.write(to, from.getLong(i));
        }
    }

    private void copyString(InternalRow from, int i, int to) {
        if (from.isNullAt(i)) {
            w.setNullAt(to);
        } else {
            UTF8String s = from.getUTF8String(i);
            w.write(to, s);
        }
    }

    /** Whether t[at : at + len] is all ASCII (eight bytes at a time). */
    private static boolean ascii(byte[] t, int at, int len) {
        int i = at, end = at + len;
        for (; i + 8 <= end; i += 8) {
            if (((long) LE_LONGS.get(t, i) & 0x8080808080808080L) != 0) {
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
