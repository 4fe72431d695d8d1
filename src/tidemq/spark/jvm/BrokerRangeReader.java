package org.tidemq.spark;

import java.io.IOException;

import org.sparkproject.guava.util.concurrent.ListenableFuture;

/**
 * Broker mode: a queue's range read with PullRecords (PullClient), as
 * tidemq.spark.backend.BrokerBackend reads it: the next pull is under way while a response is
 * turned into rows; offsets a response skips (holes, records cleaned away) and records failing
 * their checks are offsets not served. A frame whose CRC held carries records the broker
 * checked: only their layout is checked again; without one, both CRCs of every record.
 */
final class BrokerRangeReader extends RangeReader {
    private final PullClient client;
    private ListenableFuture<byte[]> pending;
    private long pendingAt = -1;
    private PullClient.Frame frame;
    private int index, pos;
    private boolean finished;

    BrokerRangeReader(RangePartition part) {
        super(part);
        client = new PullClient(part.endpoint, part.timeoutMs);
    }

    @Override
    protected boolean done() {
        return finished && frame == null;
    }

    @Override
    protected void fill() throws IOException {
        while (!rows.full()) {
            if (frame == null && !nextFrame()) {
                return;
            }
            PullClient.Frame f = frame;
            int size = f.sizes[index++];
            if (size >= 0 && Records.check(f.data, pos, size, f.crcChecked, crc)) {
                rows.add(f.data, pos, size);
            } else {
                lost(1);
            }
            pos += Math.max(size, 0);
            if (index >= f.count) {
                frame = null;
            }
        }
    }

    private void ask(long offset) {
        pending = client.pull(part.topic, part.queue, offset, (int) Math.min(PullClient.COUNT_MAX, part.end - offset));
        pendingAt = offset;
    }

    /** The next response with records (false: the range is done). */
    private boolean nextFrame() throws IOException {
        while (!finished) {
            if (at >= part.end) {
                finished = true;
                break;
            }
            if (pending == null || pendingAt != at) {
                if (pending != null) {
                    pending.cancel(true);
                }
                ask(at);
            }
            PullClient.Frame f = PullClient.frame(pending, at);
            pending = null;
            long next = Math.min(f.nextOffset, part.end);
            if (f.count > 0) {
                if (next < part.end && next < f.maxOffset) {
                    ask(next);                           // the next pull, under way while this one is read
                }
                lost(next - at - f.count);
                at = next;
                frame = f;
                index = 0;
                pos = f.recordsAt;
                return true;
            }
            if (next > at) {                             // holes, or cleaned away under us
                lost(next - at);
                at = next;
            } else {                                     // the queue ends before `end`
                lost(part.end - at);
                at = part.end;
            }
        }
        if (pending != null) {
            pending.cancel(true);
            pending = null;
        }
        return false;
    }

    @Override
    public void close() throws IOException {
        if (pending != null) {
            pending.cancel(true);
        }
        super.close();
    }
}
