package org.tidemq.spark;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.ByteBuffer;
import java.nio.MappedByteBuffer;
import java.nio.channels.FileChannel;
import java.nio.file.Files;
import java.nio.file.NoSuchFileException;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.stream.Stream;

/**
 * A store's files, read-only, as tidemq/spark/files.py reads them: one queue's consume-queue
 * files and the commit-log segments of every commit-log directory, mapped read-only. Nothing
 * is written or locked: a broker may run on the same store; segments it deletes meanwhile
 * read as missing (a data-loss gap), what it has not dispatched yet is not seen.
 *
 * <pre>
 * Segment-like files are named by a number zero-padded to 20 digits: a commit-log segment
 * by the commit-log offset of its first byte, a consume-queue file by the byte offset of its
 * first unit in the queue. A consume-queue unit, 20 bytes big-endian:
 *   commit-log offset i64 | record size i32 | tag hash i64
 * The position of a unit (byte offset / 20) is the message's queue offset.
 * </pre>
 */
final class StoreFiles implements AutoCloseable {
    static final int UNIT_SIZE = 20;

    private final long[] segmentStarts;
    private final Path[] segmentPaths;
    private final long logEnd;
    private final long[] cqStarts;          // in units
    private final Path[] cqPaths;
    private final Map<Integer, ByteBuffer> maps = new HashMap<>();

    StoreFiles(List<String> commitlogDirs, String queueDir) {
        List<long[]> found = new ArrayList<>();
        List<Path> paths = new ArrayList<>();
        for (String d : commitlogDirs) {
            list(Path.of(d), found, paths);
        }
        Integer[] order = sorted(found);
        segmentStarts = new long[order.length];
        segmentPaths = new Path[order.length];
        for (int i = 0; i < order.length; i++) {
            segmentStarts[i] = found.get(order[i])[0];
            segmentPaths[i] = paths.get(order[i]);
        }
        logEnd = order.length == 0 ? 0 : segmentStarts[order.length - 1] + size(segmentPaths[order.length - 1]);
        found.clear();
        paths.clear();
        list(Path.of(queueDir), found, paths);
        order = sorted(found);
        cqStarts = new long[order.length];
        cqPaths = new Path[order.length];
        for (int i = 0; i < order.length; i++) {
            cqStarts[i] = found.get(order[i])[0] / UNIT_SIZE;
            cqPaths[i] = paths.get(order[i]);
        }
    }

    private static Integer[] sorted(List<long[]> found) {
        Integer[] order = new Integer[found.size()];
        for (int i = 0; i < order.length; i++) {
            order[i] = i;
        }
        Arrays.sort(order, (a, b) -> Long.compare(found.get(a)[0], found.get(b)[0]));
        return order;
    }

    private static void list(Path dir, List<long[]> starts, List<Path> paths) {
        if (!Files.isDirectory(dir)) {
            return;
        }
        try (Stream<Path> s = Files.list(dir)) {
            s.forEach(p -> {
                String n = p.getFileName().toString();
                if (n.length() == 20 && n.chars().allMatch(Character::isDigit)) {
                    starts.add(new long[] {Long.parseLong(n)});
                    paths.add(p);
                }
            });
        } catch (IOException e) {
            throw new UncheckedIOException("tidemq: cannot list " + dir, e);
        }
    }

    private static long size(Path p) {
        try {
            return Files.size(p);
        } catch (IOException e) {
            return 0;                      // deleted since the listing
        }
    }

    /** One past the last byte the listed segments can hold. */
    long logEnd() {
        return logEnd;
    }

    /** The queue offset of the first unit the queue's files still hold (-1: no file). */
    long firstUnit() {
        return cqStarts.length == 0 ? -1 : cqStarts[0];
    }

    /**
     * The first queue offset in [from, end) whose unit's record the commit log still holds (as
     * tidemq.spark.files.StoreFiles.queue_range finds the minimum), {@code end} when none does;
     * {@code from} when the queue has no file.
     */
    long firstLive(long from, long end) {
        long first = firstUnit();
        if (first < 0) {
            return from;
        }
        long logMin = segmentStarts.length == 0 ? Long.MAX_VALUE : segmentStarts[0];
        ByteBuffer buf = ByteBuffer.allocate(4096 * UNIT_SIZE);
        long at = Math.max(from, first);
        while (at < end) {
            int n = units(at, end, buf);
            if (n == 0) {
                return end;
            }
            for (int i = 0; i < n; i++) {
                if (buf.getInt(i * UNIT_SIZE + 8) > 0 && buf.getLong(i * UNIT_SIZE) >= logMin) {
                    return at + i;
                }
            }
            at += n;
        }
        return end;
    }

    /**
     * Units [start, end) into {@code out} (big-endian, 20 bytes each), fewer when the files end
     * first or at a file's end; how many were read.
     */
    int units(long start, long end, ByteBuffer out) {
        int i = Arrays.binarySearch(cqStarts, start);
        i = i >= 0 ? i : -i - 2;
        if (i < 0) {
            return 0;
        }
        long want = Math.min(end - start, out.capacity() / UNIT_SIZE);
        out.clear().limit((int) want * UNIT_SIZE);
        try (FileChannel ch = FileChannel.open(cqPaths[i], StandardOpenOption.READ)) {
            long at = (start - cqStarts[i]) * UNIT_SIZE;
            while (out.hasRemaining()) {
                int n = ch.read(out, at);
                if (n <= 0) {
                    break;
                }
                at += n;
            }
        } catch (NoSuchFileException e) {
            return 0;                      // cleaned away since the listing
        } catch (IOException e) {
            throw new UncheckedIOException("tidemq: cannot read " + cqPaths[i], e);
        }
        int got = out.position() / UNIT_SIZE;
        out.flip();
        return got;
    }

    /** Index of the segment holding a commit-log offset (-1: before the first one). */
    int locate(long offset) {
        int i = Arrays.binarySearch(segmentStarts, offset);
        return i >= 0 ? i : -i - 2;
    }

    long segmentStart(int i) {
        return segmentStarts[i];
    }

    /** How many commit-log segments were listed. */
    int segmentCount() {
        return segmentStarts.length;
    }

    /** Segment i mapped read-only (null: deleted since the listing). */
    ByteBuffer segment(int i) {
        ByteBuffer b = maps.get(i);
        if (b == null) {
            try (FileChannel ch = FileChannel.open(segmentPaths[i], StandardOpenOption.READ)) {
                MappedByteBuffer m = ch.map(FileChannel.MapMode.READ_ONLY, 0, ch.size());
                b = m;
            } catch (NoSuchFileException e) {
                return null;
            } catch (IOException e) {
                throw new UncheckedIOException("tidemq: cannot map " + segmentPaths[i], e);
            }
            maps.put(i, b);
        }
        return b;
    }

    @Override
    public void close() {
        maps.clear();                      // the mappings go with the buffers (Java unmaps on collection)
    }
}
