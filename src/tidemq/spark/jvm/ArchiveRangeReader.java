package org.tidemq.spark;

import java.io.FileNotFoundException;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.DirectoryStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.util.ArrayList;
import java.util.BitSet;
import java.util.Comparator;
import java.util.List;
import java.util.concurrent.atomic.AtomicLong;

import org.apache.hadoop.conf.Configuration;
import org.apache.parquet.column.statistics.Statistics;
import org.apache.parquet.hadoop.ParquetFileReader;
import org.apache.parquet.hadoop.metadata.BlockMetaData;
import org.apache.parquet.hadoop.metadata.ColumnChunkMetaData;
import org.apache.parquet.hadoop.util.HadoopInputFile;
import org.apache.spark.paths.SparkPath;
import org.apache.spark.sql.SparkSession;
import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.execution.datasources.PartitionedFile;
import org.apache.spark.sql.execution.datasources.parquet.ParquetFileFormat;
import org.apache.spark.sql.sources.Filter;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.sql.vectorized.ColumnarBatch;
import scala.Function1;

/**
 * Tiered reads: the offsets [from, to) of one queue from the Parquet archive (``tidemq archive``:
 * {@code <dest>/run=<id>/topic=<topic>/day=<day>/part-*.parquet}), as tidemq.spark.tiered.read
 * reads them: one row per offset (an offset archived twice is served once), and the offsets of
 * the range the archive does not hold are a data loss (failOnDataLoss), named with the store's
 * gaps file (segments deleted before they were archived).
 *
 * <p>The runs read are those the store's manifest records (the partition's {@code runs}; a run
 * the manifest names that is gone fails the read), or every run under the destination. The files
 * of the topic's directories are read with Spark's own Parquet reader (ParquetFileFormat's, built on
 * the driver with the session's settings: {@link #parquetReader}, carried by the partition), in log order
 * (run, then the archive task's part number, which follows the segments, then day); a file
 * whose row groups' statistics cannot hold the queue's range is not opened. Rows come out in the
 * order the files hold them (for ``tidemq archive``'s runs, the log's: one file per segment and
 * day, its records as the segment has them), not sorted as the Python reader sorts them; each
 * offset at most once in any case.
 */
final class ArchiveRangeReader extends RangeReader {
    /** The archive's columns this reader takes, in this order (the topic is the directory's). */
    static final StructType COLUMNS = StructType.fromDDL("queue_id int, queue_offset long, commitlog_offset long, "
            + "msg_id string, tags string, keys array<string>, body binary, properties map<string,string>, "
            + "born_timestamp timestamp, store_timestamp timestamp");
    private static final AtomicLong SERVED = new AtomicLong();

    private final long from, to;
    private final byte[] topic;
    private final List<Path> files;
    private final BitSet seen;
    private final Configuration conf = new Configuration();
    private final Function1<PartitionedFile, scala.collection.Iterator<InternalRow>> parquet;
    private int fileAt;
    private scala.collection.Iterator<InternalRow> reader;   // the file read now
    private ColumnarBatch batch;                              // its batch read now (null: it gives rows)
    private InternalRow single;                               // or its row read now
    private int row;
    private boolean finished;

    /** The offsets [from, to) of the partition's queue (its whole range, or the head the log no longer holds). */
    ArchiveRangeReader(RangePartition part, long from, long to) throws IOException {
        super(part);
        this.at = from;
        this.from = from;
        this.to = to;
        this.topic = part.topic.getBytes(StandardCharsets.UTF_8);
        this.seen = new BitSet((int) Math.max(0, Math.min(Integer.MAX_VALUE, to - from)));
        if (to - from > Integer.MAX_VALUE) {
            throw new IllegalArgumentException("tidemq: an archive range of " + (to - from) + " offsets in one partition "
                    + "(lower the option maxRecordsPerPartition)");
        }
        this.files = files(part);
        this.parquet = part.parquet != null ? part.parquet : parquetReader(session());
    }

    /** The session of this thread, or the JVM's default (a read outside a query: ReadOne). */
    private static SparkSession session() {
        scala.Option<SparkSession> s = SparkSession.getActiveSession();
        if (s.isEmpty()) {
            s = SparkSession.getDefaultSession();
        }
        if (s.isEmpty()) {
            throw new IllegalStateException("tidemq: an archived range read without a Spark session to read Parquet with");
        }
        return s.get();
    }

    /** Spark's Parquet reader of the archive's columns (on the driver: the session's settings, its Hadoop
     * configuration broadcast), a function each executor applies to a file; batches where Spark's
     * vectorized reader takes these columns, rows otherwise. */
    static Function1<PartitionedFile, scala.collection.Iterator<InternalRow>> parquetReader(SparkSession spark) {
        ParquetFileFormat f = new ParquetFileFormat();
        boolean batches = f.supportBatch(spark, COLUMNS);
        scala.collection.immutable.Map<String, String> options = scala.collection.immutable.Map$.MODULE$
                .<String, String>empty().updated("returning_batch", Boolean.toString(batches));
        scala.collection.immutable.Seq<Filter> none = scala.jdk.javaapi.CollectionConverters
                .asScala(new ArrayList<Filter>()).toList();
        return f.buildReaderWithPartitionValues(spark, COLUMNS, new StructType(), COLUMNS, none, options,
                f.getHadoopConf(spark));
    }

    /** Rows this JVM has served from archives (tests: which reader read a tiered query). */
    static long served() {
        return SERVED.get();
    }

    /** The topic's Parquet files of the archive, in log order. */
    static List<Path> files(RangePartition part) throws IOException {
        List<Path> runs = new ArrayList<>();
        if (part.archiveRuns != null) {
            List<String> gone = new ArrayList<>();
            for (String r : part.archiveRuns) {
                Path p = Paths.get(r);
                if (Files.isDirectory(p)) {
                    runs.add(p);
                } else {
                    gone.add(r);
                }
            }
            if (!gone.isEmpty()) {
                throw new FileNotFoundException("tidemq: archive runs the manifest records are missing: "
                        + String.join(", ", gone));
            }
        } else {
            runs.addAll(children(Paths.get(part.archiveDest), "run="));
        }
        List<Path> out = new ArrayList<>();
        for (Path run : runs) {
            for (Path t : children(run, "topic=")) {
                if (!unescape(t.getFileName().toString().substring("topic=".length())).equals(part.topic)) {
                    continue;
                }
                for (Path day : children(t, "day=")) {
                    try (DirectoryStream<Path> ds = Files.newDirectoryStream(day)) {
                        for (Path f : ds) {
                            String n = f.getFileName().toString();
                            if (n.endsWith(".parquet") && !n.startsWith(".") && !n.startsWith("_")) {
                                out.add(f);
                            }
                        }
                    }
                }
            }
        }
        out.sort(Comparator.comparing((Path f) -> f.getParent().getParent().getParent().getFileName().toString())
                .thenComparingLong(ArchiveRangeReader::partNumber)
                .thenComparing(f -> f.getParent().getFileName().toString())
                .thenComparing(Path::toString));
        return out;
    }

    private static List<Path> children(Path dir, String prefix) throws IOException {
        List<Path> out = new ArrayList<>();
        if (!Files.isDirectory(dir)) {
            return out;
        }
        try (DirectoryStream<Path> ds = Files.newDirectoryStream(dir)) {
            for (Path p : ds) {
                if (p.getFileName().toString().startsWith(prefix) && Files.isDirectory(p)) {
                    out.add(p);
                }
            }
        }
        return out;
    }

    /** The archive task's number in a Spark output file's name (part-00004-...): its segment's place. */
    static long partNumber(Path f) {
        String n = f.getFileName().toString();
        int i = n.startsWith("part-") ? 5 : n.length(), j = i;
        while (j < n.length() && Character.isDigit(n.charAt(j))) {
            j++;
        }
        return j > i && j - i < 18 ? Long.parseLong(n.substring(i, j)) : Long.MAX_VALUE;
    }

    /** A Hive partition value as Spark and pyarrow escape it (%XX per character). */
    static String unescape(String s) {
        StringBuilder b = new StringBuilder(s.length());
        for (int i = 0; i < s.length(); i++) {
            char c = s.charAt(i);
            if (c == '%' && i + 2 < s.length() && hex(s.charAt(i + 1)) >= 0 && hex(s.charAt(i + 2)) >= 0) {
                b.append((char) (hex(s.charAt(i + 1)) * 16 + hex(s.charAt(i + 2))));
                i += 2;
            } else {
                b.append(c);
            }
        }
        return b.toString();
    }

    private static int hex(char c) {
        return Character.digit(c, 16);
    }

    /** Whether a row group of the file may hold offsets [from, to) of the queue (its statistics say). */
    private boolean mayHold(Path f) throws IOException {
        try (ParquetFileReader r = ParquetFileReader.open(HadoopInputFile.fromPath(
                new org.apache.hadoop.fs.Path(f.toUri()), conf))) {
            for (BlockMetaData b : r.getFooter().getBlocks()) {
                if (b.getRowCount() > 0 && within(b, "queue_id", part.queue, part.queue + 1L)
                        && within(b, "queue_offset", from, to)) {
                    return true;
                }
            }
        }
        return false;
    }

    private static boolean within(BlockMetaData b, String column, long lo, long hi) {
        for (ColumnChunkMetaData c : b.getColumns()) {
            if (!c.getPath().toDotString().equals(column)) {
                continue;
            }
            Statistics<?> s = c.getStatistics();
            if (s == null || s.isEmpty() || !s.hasNonNullValue()
                    || !(s.genericGetMin() instanceof Number) || !(s.genericGetMax() instanceof Number)) {
                return true;                           // no statistics: it may
            }
            long min = ((Number) s.genericGetMin()).longValue(), max = ((Number) s.genericGetMax()).longValue();
            return max >= lo && min < hi;
        }
        return true;
    }

    /** The next batch (or row) of the archive's files: false when they are all read. */
    private boolean nextBatch() throws IOException {
        while (true) {
            if (reader != null && reader.hasNext()) {
                Object got = reader.next();
                batch = got instanceof ColumnarBatch ? (ColumnarBatch) got : null;
                single = batch == null ? (InternalRow) got : null;
                row = 0;
                return true;
            }
            closeFile();
            if (fileAt >= files.size()) {
                return false;
            }
            Path f = files.get(fileAt++);
            if (!mayHold(f)) {
                continue;
            }
            long size = Files.size(f);
            reader = parquet.apply(new PartitionedFile(InternalRow.empty(), SparkPath.fromPath(
                    new org.apache.hadoop.fs.Path(f.toUri())), 0L, size, new String[0], 0L, size,
                    scala.collection.immutable.Map$.MODULE$.<String, Object>empty()));
        }
    }

    private void closeFile() throws IOException {
        if (reader instanceof java.io.Closeable) {
            ((java.io.Closeable) reader).close();
        }
        reader = null;
        batch = null;
        single = null;
    }

    @Override
    protected boolean done() {
        return finished;
    }

    @Override
    protected void fill() throws IOException {
        while (!rows.full()) {
            int n = batch != null ? batch.numRows() : single != null ? 1 : 0;
            if (row >= n && !nextBatch()) {
                long got = seen.cardinality();
                SERVED.addAndGet(got);
                finished = true;
                at = to;
                lost(to - from - got);
                return;
            }
            n = batch != null ? batch.numRows() : 1;
            for (; row < n && !rows.full(); row++) {
                InternalRow r = batch != null ? batch.getRow(row) : single;
                if (r.isNullAt(0) || r.isNullAt(1) || r.getInt(0) != part.queue) {
                    continue;
                }
                long o = r.getLong(1);
                if (o < from || o >= to || seen.get((int) (o - from))) {
                    continue;
                }
                seen.set((int) (o - from));
                rows.addArchived(topic, r);
            }
        }
    }

    @Override
    public void close() throws IOException {
        closeFile();
        super.close();
    }
}
