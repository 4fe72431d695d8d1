package org.tidemq.spark;

import java.io.IOException;
import java.util.ArrayDeque;
import java.util.List;

import org.sparkproject.guava.util.concurrent.ListenableFuture;

/**
 * Broker mode: a queue's range read with PullRecords (PullClient), as
 * tidemq.spark.backend.BrokerBackend reads it: the next two pulls are under way while a response
 * is turned into rows (the first ones short: PULL_COUNT_FIRST); offsets a response skips (holes, records cleaned away) and records failing
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
    /** The first pull's records at most; each pull after it may carry twice as many as the one before, up to
     * the partition's pullCountMax: a task's first rows come after a short answer (the broker reads
     * and checks ~0.5 MB of 100-byte messages, not 16 MB), and the longer pulls after it are under way
     * while it turns the short ones into rows. */
    static final int PULL_COUNT_FIRST = 2048;
    /** Pulls under way at once: the one answered next and the one after it, so that the broker makes
     * an answer while the one before is on its way and the one before that is turned into rows. */
    static final int PULLS_IN_FLIGHT = 2;
    /** The record bytes each pull asks for at most, and sizes its count for (from the mean record size of
     * the answer before): under the bound the broker puts on an answer by default (its gRPC message
     * limit, grpc_message_bytes_max 4.5 MiB, less the sizes and the header), so that an answer ends where
     * its count says and the pull under way after it, asked from there, is the one needed next. (A pull
     * of more than the broker sends comes back short and the one after it is dropped: a wait with
     * nothing under way, and an answer the broker made for nothing.) A broker configured to bound its
     * answers lower (pull_records_bytes_max, grpc_message_bytes_max) says its bound in every answer's
     * header (bytes_max): the pulls after the first answer are sized to that instead. */
    static final int ANSWER_BYTES = 4 << 20;
    /** The share of the answer's bytes a pull's count is sized for: records longer than the last answer's
     * mean still end it by count. */
    static final double ANSWER_FILL = 0.9;

    /** A pull under way: from which member, from which offset, how many records it asked for. */
    private static final class Pull {
        final ListenableFuture<byte[]> answer;
        final PullClient from;
        final long at;
        final int count;

        Pull(ListenableFuture<byte[]> answer, PullClient from, long at, int count) {
            this.answer = answer;
            this.from = from;
            this.at = at;
            this.count = count;
        }
    }

    private final List<String> members;
    private final Connection conn;
    private final PullClient[] clients;
    private int member;                    // the member read from now
    private int failedInRound;             // members that failed one after the other
    private long failingSinceMs = -1;      // when the first of those failures happened
    private long backoffMs = BACKOFF_MS_MIN;
    private boolean switched;              // read from another member than the first since the start
    private int failovers;
    private int pullCount = PULL_COUNT_FIRST;   // the next pull's records at most (before pullCountMax)
    private final ArrayDeque<Pull> inFlight = new ArrayDeque<>();   // PULLS_IN_FLIGHT at most, by offset
    private long readableEnd = Long.MAX_VALUE;  // the last answer's max_offset: no pull asked from past it
    private double recordBytes;            // the mean record size of the last answer (0: none yet)
    private long answerBytes = ANSWER_BYTES;   // what a pull asks for: ANSWER_BYTES, or the broker's bound if less
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
        long n = Math.min(Math.min(part.pullCountMax, pullCount), part.end - offset);
        if (recordBytes > 0) {
            n = Math.min(n, Math.max(1, (long) (answerBytes * ANSWER_FILL / (recordBytes + 4))));
        }
        pullCount = (int) Math.min((long) pullCount * 2, part.pullCountMax);
        inFlight.addLast(new Pull(c.pull(part.topic, part.queue, offset, (int) n, (int) answerBytes, waitMs), c,
                offset, (int) n));
    }

    /** Pulls of the offsets after those asked for already, up to PULLS_IN_FLIGHT: each from where the
     * one before would end were it answered whole; one that ends elsewhere (holes, the byte bound)
     * makes the ones after it useless, dropped when their turn comes ({@link #nextFrame}). Never from
     * the range's end or the readable end the last answer gave on, nor before an answer gave the
     * records' size (the count that fits an answer). */
    private void askAhead() {
        while (!inFlight.isEmpty() && inFlight.size() < PULLS_IN_FLIGHT && recordBytes > 0) {
            Pull last = inFlight.peekLast();
            long o = last.at + last.count;
            if (o >= part.end || o >= readableEnd) {
                return;
            }
            ask(o, 0);
        }
    }

    private void drop() {
        for (Pull p : inFlight) {
            p.answer.cancel(true);
        }
        inFlight.clear();
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
            Pull p = inFlight.peekFirst();
            if (p == null || p.at != at || p.from != clients[member]) {
                drop();
                ask(at, waitMs);
                if (waitMs == 0) {
                    askAhead();                          // (a long poll waits alone)
                }
                p = inFlight.peekFirst();
            }
            PullClient.Frame f;
            try {
                f = p.from.frame(p.answer, part.topic, part.queue, at);
            } catch (PullClient.Unreachable u) {
                failOver(u);
                waitMs = 0;
                continue;
            }
            inFlight.pollFirst();
            readableEnd = f.maxOffset;
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
                recordBytes = (double) (f.data.capacity() - f.recordsAt) / f.count;
                if (f.bytesMax > 0) {                    // a broker bounding its answers below ANSWER_BYTES
                    answerBytes = Math.max(1, Math.min(ANSWER_BYTES, f.bytesMax));
                }
                failingSinceMs = -1;
                failedInRound = 0;
                backoffMs = BACKOFF_MS_MIN;
                Pull q = inFlight.peekFirst();
                if (q != null && q.at != next) {         // this answer ended before what it asked for
                    drop();
                }
                if (inFlight.isEmpty() && next < part.end && next < f.maxOffset) {
                    ask(next, 0);                        // the next pulls, under way while this one is read
                }
                askAhead();
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
