package org.tidemq.spark;

import java.nio.ByteBuffer;
import java.util.zip.CRC32;

/**
 * The commit-log record layout (tidemq/record/codec.py, accel_c/accel.h) and its checks. No I/O.
 *
 * <pre>
 * A record, big-endian (RocketMQ message format v1), fixed overhead 91 bytes:
 *   off  size  field
 *     0   4    TOTALSIZE       the whole record, this field included
 *     4   4    MAGIC           0xDAA320A7 (BLANK, a segment's end: 0xCBD43194)
 *     8   4    BODYCRC         crc32(body) &amp; 0x7FFFFFFF
 *    12   4    QUEUEID
 *    16   4    FLAG
 *    20   8    QUEUEOFFSET
 *    28   8    PHYSICALOFFSET  the record's commit-log offset
 *    36   4    SYSFLAG
 *    40   8    BORNTIMESTAMP   ms
 *    48   8    BORNHOST        ipv4 (4) + port (i32)
 *    56   8    STORETIMESTAMP  ms
 *    64   8    STOREHOST       ipv4 (4) + port (i32)
 *    72   4    RECONSUMETIMES
 *    76   8    PREPAREDTRANSACTIONOFFSET
 *    84   4    BODYLEN n
 *    88   n    BODY
 *  88+n   1    TOPICLEN t (u8)
 *         t    TOPIC (ascii)
 *         2    PROPERTIESLEN p (i16)
 *         p    PROPERTIES  name\x01value\x02 ... ending with the record-CRC property
 *              __CRC32#\x01 + 10 decimal digits + \x02 (20 bytes, hidden from readers)
 * </pre>
 *
 * Two CRCs guard a record: BODYCRC (the body only) and the record CRC, whose digits are
 * crc32(tail, then header): <i>tail</i> the bytes from TOPICLEN up to the digits, <i>header</i>
 * the 88 bytes up to BODYLEN (BODYCRC among them, so the body is covered through it). The last
 * byte (the \x02 after the digits) is outside the CRC and must be as written. A record passes
 * {@link #check} only when its lengths agree with the size its consume-queue unit (or pull
 * frame) gives, and both CRCs hold: nothing else is ever served.
 */
final class Records {
    static final int MAGIC = 0xDAA320A7;
    static final int OFF_BODYCRC = 8, OFF_QUEUEID = 12, OFF_QUEUEOFFSET = 20, OFF_PHYSICALOFFSET = 28;
    static final int OFF_BORNTIMESTAMP = 40, OFF_STORETIMESTAMP = 56, OFF_STOREHOST = 64, OFF_BODYLEN = 84;
    static final int OFF_BODY = 88;
    static final int FIXED_OVERHEAD = 91;
    static final int CRC_TAIL_LEN = 20;          // __CRC32#\x01 + 10 digits + \x02
    static final int CRC_DIGITS = 10;
    static final int CRC_DIGITS_BACK = 11;       // the digits sit at record[end - 11 : end - 1]
    static final int RECORD_MIN = FIXED_OVERHEAD + CRC_TAIL_LEN;

    private Records() {}

    /**
     * Whether the record at {@code pos} of {@code buf} (absolute positions; big-endian) is
     * a whole, intact record of {@code size} bytes: lengths, magic, body CRC and record CRC.
     * {@code crcChecked}: its CRCs were already checked (a pull frame whose CRC held): layout only.
     */
    static boolean check(ByteBuffer buf, int pos, int size, boolean crcChecked, CRC32 crc) {
        if (size < RECORD_MIN || pos < 0 || (long) pos + size > buf.limit()) {
            return false;
        }
        if (buf.getInt(pos) != size || buf.getInt(pos + 4) != MAGIC) {
            return false;
        }
        int blen = buf.getInt(pos + OFF_BODYLEN);
        if (blen < 0 || (long) FIXED_OVERHEAD + blen + CRC_TAIL_LEN > size) {
            return false;
        }
        int tpos = pos + OFF_BODY + blen;
        int tlen = buf.get(tpos) & 0xFF;
        int ppos = tpos + 1 + tlen;
        if (ppos + 2 > pos + size) {
            return false;
        }
        int plen = buf.getShort(ppos) & 0xFFFF;
        if (FIXED_OVERHEAD + blen + tlen + plen != size || plen < CRC_TAIL_LEN) {
            return false;
        }
        if (crcChecked) {
            return true;
        }
        int end = pos + size;
        if (buf.get(end - 1) != 2) {
            return false;
        }
        long stored = 0;
        for (int i = end - CRC_DIGITS_BACK; i < end - 1; i++) {
            int d = buf.get(i) - '0';
            if (d < 0 || d > 9) {
                return false;
            }
            stored = stored * 10 + d;
        }
        crc.reset();
        crc.update(buf.slice(pos + OFF_BODY, blen));
        if ((int) (crc.getValue() & 0x7FFFFFFF) != buf.getInt(pos + OFF_BODYCRC)) {
            return false;
        }
        crc.reset();
        crc.update(buf.slice(tpos, end - CRC_DIGITS_BACK - tpos));
        crc.update(buf.slice(pos, OFF_BODY));
        return crc.getValue() == stored;
    }

    /**
     * Whether the record at {@code pos} (one {@link #check} passed) is the one a consume-queue unit
     * of {@code topic} (its bytes) queue {@code queueId} at {@code queueOffset} stands for: a unit has
     * no CRC of its own, and a damaged one can point at an intact record of another queue
     * (tidemq.record.integrity: the Python readers' and the store's check).
     */
    static boolean standsFor(ByteBuffer buf, int pos, byte[] topic, int queueId, long queueOffset) {
        return buf.getLong(pos + OFF_QUEUEOFFSET) == queueOffset && ofQueue(buf, pos, topic, queueId);
    }

    /** Whether the record at {@code pos} (one {@link #check} passed) is of {@code topic} queue {@code queueId}. */
    static boolean ofQueue(ByteBuffer buf, int pos, byte[] topic, int queueId) {
        if (buf.getInt(pos + OFF_QUEUEID) != queueId) {
            return false;
        }
        int tpos = pos + OFF_BODY + buf.getInt(pos + OFF_BODYLEN);
        if ((buf.get(tpos) & 0xFF) != topic.length) {
            return false;
        }
        for (int i = 0; i < topic.length; i++) {
            if (buf.get(tpos + 1 + i) != topic[i]) {
                return false;
            }
        }
        return true;
    }
}
