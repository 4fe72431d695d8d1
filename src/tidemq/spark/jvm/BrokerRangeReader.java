package org.tidemq.spark;

import java.io.IOException;
import java.util.List;

import org.sparkproject.guava.util.concurrent.ListenableFuture;

/**
 * Broker mode: a queue's range read with PullRecords (PullClient), as
 * tidemq.spark.backend.BrokerBackend reads it: the next pull is under way while a response is
 * turned into rows; offsets a response skips (holes, records cleaned away) and records failing
 * their checks are offsets not served. A frame whose CRC held carries records the broker
 * checked: only their layout is checked again; without one, both CRCs of every record.
 *
 * <p>Failover: the partition lists the members of the group that holds the queue (the route's:
 * its leader first, then the followers, which serve reads from their copies). A member that does
 * not answer (PullClient.Unreachable: killed, restarting, an election under way) is left for the
 * next one, and the read resumes at the offset it reached, so no offset is served twice or
 * skipped; after a round of members that all failed it waits (100 ms, doubling to 2 s) and goes
 * on, up to the partition's timeout (option timeoutSeconds) from the first failure, then fails
 * with one line naming the members. After a switch, a member whose queue ends before the range
 * does (a follower still catching up) is waited for with long polls, within the same bound,
 * before the missing offsets count as lost. A refusal (PullClient.Refused: keys, permission) is
 * the same everywhere and fails at once. What a member serves is what it says can be read: under
 * SYNC replication the broker stops at what the group committed; the reader computes no limit of
 * its own.
 */
final class BrokerRangeReader extends RangeReader {
    static final long BACKOFF_MS_MIN = 100, BACKOFF_MS_MAX = 2000;

    private final List<String> members;
    private final Connection conn;
    private final PullClient[] clients;
    private int member;                    // the member read from now
    private int failedInRound;             // members that failed one after the other
    private long failingSinceMs = -1;      // when the first of those failures happened
    private long backoffMs = BACKOFF_MS_MIN;
    private boolean switched;              // read from another member than the first since the start
    private int failovers;
    private ListenableFuture<byte[]> pending;
    private long pendingAt = -1;
    private PullClient pendingFrom;
    private PullClient.Frame frame;
    private int index, pos;
    private boolean finished;
    private boolean headChecked;           // tiered: the first answer's min_offset looked at

    BrokerRangeReader(RangePartition part) {
        super(part);
        members = part.endpoints;
        conn = part.connection;
        clients = new PullClient[members.size()];
        client();                              // a bad option (rootCertificates) fails before any pull
    }

    /** How many times this reader moved to another member (for tests and the log). */
    int failovers() {
        return failovers;
    }

    private PullClient client() {
        PullClient c = clients[member];
        if (c == null) {
            c = clients[member] = new PullClient(members.get(member), conn, part.timeoutMs);
        }
        return c;
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
            if (archiving()) {
                return;                                  // the archived head first (RangeReader.next)
            }
            PullClient.Frame f = frame;
            int size = f.sizes[index++];
            if (size >= 0 && Records.check(f.data, pos, size, f.crcChecked, crc)) {
                if (f.data.getLong(pos + Records.OFF_QUEUEOFFSET) < part.end) {   // an answer from below the
                    rows.add(f.data, pos, size);                                   // log's head may run past end
                }
            } else {
                lost(1);
            }
            pos += Math.max(size, 0);
            if (index >= f.count) {
                frame = null;
            }
        }
    }

    private void ask(long offset, int waitMs) {
        PullClient c = client();
        pending = c.pull(part.topic, part.queue, offset, (int) Math.min(part.pullCountMax, part.end - offset), waitMs);
        pendingAt = offset;
        pendingFrom = c;
    }

    private void drop() {
        if (pending != null) {
            pending.cancel(true);
            pending = null;
        }
    }

    /** ``u`` from the member read now: the next member, waiting after a round where all failed;
     * an IOException naming them once the failover budget (the partition's timeout) is spent. */
    private void failOver(PullClient.Unreachable u) throws IOException {
        drop();
        long now = System.currentTimeMillis();
        if (failingSinceMs < 0) {
            failingSinceMs = now;
        }
        if (now - failingSinceMs > part.timeoutMs) {
            throw new IOException("tidemq: no member of the group holding " + part.topic + " queue " + part.queue
                    + " answered for " + (now - failingSinceMs) / 1000 + " s (" + String.join(", ", members)
                    + "), reading from offset " + at + ": check the option endpoints (a member reachable from the "
                    + "executors) or raise timeoutSeconds; last: " + u.getMessage(), u);
        }
        failedInRound++;
        if (failedInRound >= members.size()) {
            failedInRound = 0;
            try {
                Thread.sleep(backoffMs);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                throw new IOException("tidemq: interrupted while failing over", e);
            }
            backoffMs = Math.min(BACKOFF_MS_MAX, backoffMs * 2);
        }
        member = (member + 1) % members.size();
        switched = true;
        failovers++;
    }

    /** Whether to wait for a member whose queue ends before the range does (a copy catching up). */
    private boolean waitForCatchUp() {
        if (!switched) {
            return false;
        }
        long now = System.currentTimeMillis();
        if (failingSinceMs < 0) {
            failingSinceMs = now;
        }
        return now - failingSinceMs <= part.timeoutMs;
    }

    /** The next response with records (false: the range is done). */
    private boolean nextFrame() throws IOException {
        int waitMs = 0;
        while (!finished) {
            if (at >= part.end) {
                finished = true;
                break;
            }
            if (pending == null || pendingAt != at || pendingFrom != clients[member]) {
                drop();
                ask(at, waitMs);
            }
            PullClient.Frame f;
            try {
                f = pendingFrom.frame(pending, part.topic, part.queue, at);
            } catch (PullClient.Unreachable u) {
                failOver(u);
                waitMs = 0;
                continue;
            }
            pending = null;
            if (!headChecked) {
                headChecked = true;
                if (part.tiered() && f.minOffset > at) {   // cleaned since planning: archived before it was
                    archiveFirst(at, Math.min(f.minOffset, part.end));
                    at = Math.min(f.minOffset, part.end);
                    if (at >= part.end) {
                        finished = true;
                        break;
                    }
                    if (f.count == 0) {
                        continue;                        // (OFFSET_TOO_SMALL): asked again from the log's head
                    }
                }
            }
            long next = Math.min(f.nextOffset, part.end);
            if (f.count > 0) {
                failingSinceMs = -1;
                failedInRound = 0;
                backoffMs = BACKOFF_MS_MIN;
                if (next < part.end && next < f.maxOffset) {
                    ask(next, 0);                        // the next pull, under way while this one is read
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
            } else if (waitForCatchUp()) {               // a member still catching up: a long poll
                waitMs = PullClient.WAIT_MS_MAX;
            } else {                                     // the queue ends before `end`
                lost(part.end - at);
                at = part.end;
            }
        }
        drop();
        return false;
    }

    @Override
    public void close() throws IOException {
        drop();
        super.close();
    }
}
