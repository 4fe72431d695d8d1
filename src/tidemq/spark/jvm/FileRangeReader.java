package org.tidemq.spark;

import java.nio.ByteBuffer;

/**
 * File mode: a queue's range read from the store's files (StoreFiles), as
 * tidemq.spark.backend.FileBackend reads it: units whose records are gone (their segment
 * deleted, the unit empty), records failing Records.check and records that are not the ones
 * their units stand for (Records.standsFor: another topic, queue or queue offset) are offsets
 * not served.
 */
final class FileRangeReader extends RangeReader {
    private static final int UNITS = BatchBuilder.CAPACITY;

    private final StoreFiles files;
    private final byte[] topic;
    private final ByteBuffer units = ByteBuffer.allocate(UNITS * StoreFiles.UNIT_SIZE);
    private int unitCount, unitAt;
    private long pendingLost;

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
            if (buf != null && pos <= Integer.MAX_VALUE && Records.check(buf, (int) pos, size, false, crc)
                    && Records.standsFor(buf, (int) pos, topic, part.queue, queueOffset)) {
                rows.add(buf, (int) pos, size);
            } else {
                pendingLost++;
            }
            if (unitAt >= unitCount) {                   // a chunk's losses, counted together
                lost(pendingLost);
                pendingLost = 0;
            }
        }
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
        long logEnd = files.logEnd();
        for (int i = 0; i < n; i++) {
            if (units.getLong(i * StoreFiles.UNIT_SIZE) >= logEnd) {
                throw new IllegalStateException("tidemq: " + part.topic + " queue " + part.queue
                        + " points past the last commit-log segment found in " + String.join(", ", part.commitlogDirs)
                        + ": is the option commitlogDirs complete?");
            }
        }
        at += n;
        return true;
    }

    @Override
    public void close() throws java.io.IOException {
        files.close();
        super.close();
    }
}
