package org.tidemq.spark;

import java.nio.ByteBuffer;

/**
 * File mode: a queue's range read from the store's files (StoreFiles), as
 * tidemq.spark.backend.FileBackend reads it: units whose records are gone (their segment
 * deleted, the unit empty), records failing Records.check and records that are not the ones
 * their units stand for (Records.standsFor: another topic, queue or queue offset) are offsets
 * not served, unless the record the unit stood for is found again, intact, in the log ({@link #find}:
 * as the store's read path and the Python reader find it, store/unit_repair.py).
 */
final class FileRangeReader extends RangeReader {
    private static final int UNITS = BatchBuilder.CAPACITY;
    static final int BLANK_MAGIC = 0xCBD43194;
    static final long SCAN_BYTES_MAX = 256L << 20;   // log bytes walked at most for one damaged unit

    private final StoreFiles files;
    private final byte[] topic;
    private final ByteBuffer units = ByteBuffer.allocate(UNITS * StoreFiles.UNIT_SIZE);
    private int unitCount, unitAt;
    private long pendingLost;
    private long lastEnd = -1;                           // where the last record read ends (-1: none yet)
    private final long[] found = new long[3];            // find's answer: segment, position, size

    FileRangeReader(RangePartition part) throws java.io.IOException {
        super(part);
        files = new StoreFiles(part.commitlogDirs, part.queueDir);
        topic = part.topic.getBytes(java.nio.charset.StandardCharsets.UTF_8);
        long first = files.firstUnit();
        if (part.tiered()) {                             // what the log no longer holds: archived before
            long cut = files.firstLive(at, part.end);    // it was cleaned (since planning)
            archiveFirst(at, cut);
            at = Math.max(at, cut);
        } else if (first >= 0 && at < first) {           // its head files were cleaned away
            lost(Math.min(first, part.end) - at);
            at = first;
        }
    }

    @Override
    protected boolean done() {
        return at >= part.end && unitAt >= unitCount;
    }

    @Override
    protected void fill() {
        while (!rows.full()) {
            if (unitAt >= unitCount) {
                if (at >= part.end) {
                    return;
                }
                if (!nextUnits()) {
                    return;
                }
            }
            long queueOffset = at - unitCount + unitAt;  // what the unit stands for (at: past the chunk)
            int u = unitAt++ * StoreFiles.UNIT_SIZE;
            long offset = units.getLong(u);
            int size = units.getInt(u + 8);
            int seg = size > 0 ? files.locate(offset) : -1;
            ByteBuffer buf = seg >= 0 ? files.segment(seg) : null;
            long pos = buf == null ? -1 : offset - files.segmentStart(seg);
            boolean gone = size > 0 && offset >= 0 && (files.segmentCount() == 0 || offset < files.segmentStart(0));
            if (buf != null && pos <= Integer.MAX_VALUE && Records.check(buf, (int) pos, size, false, crc)
                    && Records.standsFor(buf, (int) pos, topic, part.queue, queueOffset)) {
                rows.add(buf, (int) pos, size);
                lastEnd = offset + size;
            } else if (!gone && (size <= 0 || seg < 0 || buf != null) && find(queueOffset)) {
                ByteBuffer at = files.segment((int) found[0]);
                rows.add(at, (int) found[1], (int) found[2]);
                lastEnd = files.segmentStart((int) found[0]) + found[1] + found[2];
            } else {
                pendingLost++;
            }
            if (unitAt >= unitCount) {                   // a chunk's losses, counted together
                lost(pendingLost);
                pendingLost = 0;
            }
        }
    }

    /**
     * The record of this queue at {@code queueOffset}, whose unit does not stand for it (damaged, or a
     * hole), looked for in the log: walked from where the last record read ends (the log's first
     * offset before any), passing records that fail their CRCs by their size, until it is found, a
     * record of the queue past it (a queue's records lie in the log in queue-offset order), the end of
     * what was written, or SCAN_BYTES_MAX. True (and {@link #found}) when found.
     */
    private boolean find(long queueOffset) {
        int n = files.segmentCount();
        if (n == 0) {
            return false;
        }
        long start = lastEnd >= files.segmentStart(0) ? lastEnd : files.segmentStart(0);
        int i = files.locate(start);
        long pos = start - files.segmentStart(i);
        long walked = 0;
        for (; i < n; i++, pos = 0) {
            ByteBuffer buf = files.segment(i);
            if (buf == null) {
                continue;                                // deleted since the listing
            }
            int limit = buf.limit();
            while (pos + 8 <= limit) {
                int p = (int) pos;
                int size = buf.getInt(p);
                int magic = buf.getInt(p + 4);
                if (magic == BLANK_MAGIC) {
                    break;                               // the segment's end: the next one
                }
                if (magic != Records.MAGIC || size < Records.FIXED_OVERHEAD || pos + size > limit) {
                    return false;                        // the end of what was written
                }
                walked += size;
                if (walked > SCAN_BYTES_MAX) {
                    return false;
                }
                if (Records.check(buf, p, size, false, crc) && files.segmentStart(i) + pos >= part.deadBefore
                        && Records.ofQueue(buf, p, topic, part.queue)) {
                    long q = buf.getLong(p + Records.OFF_QUEUEOFFSET);
                    if (q == queueOffset) {
                        found[0] = i;
                        found[1] = pos;
                        found[2] = size;
                        return true;
                    }
                    if (q > queueOffset) {
                        return false;
                    }
                }
                pos += size;
            }
        }
        return false;
    }

    private boolean nextUnits() {
        int n = files.units(at, part.end, units);
        unitAt = 0;
        unitCount = n;
        if (n == 0) {                                    // the queue's files end before `end`
            lost(part.end - at);
            at = part.end;
            return false;
        }
        for (Object[] h : part.missing) {
            for (int i = 0; i < n; i++) {
                long offset = units.getLong(i * StoreFiles.UNIT_SIZE);
                if (units.getInt(i * StoreFiles.UNIT_SIZE + 8) > 0 && offset >= (long) h[0] && offset < (long) h[1]) {
                    throw new IncompleteStoreError("tidemq: " + part.topic + " queue " + part.queue + " offset "
                            + (at + i) + " points into commit-log segments that are not in "
                            + String.join(", ", part.commitlogDirs) + ": " + h[3]
                            + ". Give every commit-log directory of the store (option commitlogDirs)", (String) h[2]);
                }
            }
        }
        // a unit past the last segment found with nothing saying one is missing: a damaged unit, found
        // again in the log or an offset lost (fill)
        at += n;
        return true;
    }

    @Override
    public void close() throws java.io.IOException {
        files.close();
        super.close();
    }
}
