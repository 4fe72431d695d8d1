package org.tidemq.spark;

import java.util.EnumSet;
import java.util.Locale;
import java.util.Map;
import java.util.Set;

import org.apache.spark.sql.connector.catalog.SupportsRead;
import org.apache.spark.sql.connector.catalog.SupportsWrite;
import org.apache.spark.sql.connector.catalog.Table;
import org.apache.spark.sql.connector.catalog.TableCapability;
import org.apache.spark.sql.connector.expressions.Transform;
import org.apache.spark.sql.connector.read.ScanBuilder;
import org.apache.spark.sql.connector.write.LogicalWriteInfo;
import org.apache.spark.sql.connector.write.WriteBuilder;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.sql.util.CaseInsensitiveStringMap;

/**
 * A topic read by the JVM reader unless told otherwise: the option {@code reader} ("jvm",
 * "python" or "auto", the default; the session conf spark.tidemq.reader gives the default).
 * Reads that sign their calls or speak TLS (options accessKey, secretKey, tls, rootCertificates)
 * and tiered reads (an archive in play) are the JVM reader's too (Connection, ArchiveRangeReader).
 * Writes always go to the Python sink (PythonTwin), with the same capabilities as the Python
 * data source's own table.
 */
final class TidemqTable implements Table, SupportsRead, SupportsWrite {
    private final StructType schema;
    private final Transform[] partitioning;
    private final Map<String, String> properties;
    private Table twin;

    TidemqTable(StructType schema, Transform[] partitioning, Map<String, String> properties) {
        this.schema = schema;
        this.partitioning = partitioning;
        this.properties = properties;
    }

    synchronized Table twin() {
        if (twin == null) {
            twin = PythonTwin.table(schema, partitioning, properties);
        }
        return twin;
    }

    static String reader(CaseInsensitiveStringMap options) {
        String r = options.getOrDefault("reader", Planner.conf("spark.tidemq.reader", "auto")).trim()
                .toLowerCase(Locale.ROOT);
        if (!r.equals("auto") && !r.equals("jvm") && !r.equals("python")) {
            throw new IllegalArgumentException("tidemq: option reader must be auto, jvm or python, not '" + r + "'");
        }
        return r;
    }

    @Override
    public String name() {
        return "tidemq";
    }

    @Override
    public StructType schema() {
        return schema;               // the source's (inferSchema), or a write's DataFrame's (as the Python table's)
    }

    @Override
    public Set<TableCapability> capabilities() {
        return EnumSet.of(TableCapability.BATCH_READ, TableCapability.MICRO_BATCH_READ, TableCapability.BATCH_WRITE,
                TableCapability.STREAMING_WRITE, TableCapability.TRUNCATE);
    }

    @Override
    public ScanBuilder newScanBuilder(CaseInsensitiveStringMap options) {
        String r = reader(options);
        if (r.equals("python")) {
            return ((SupportsRead) twin()).newScanBuilder(options);
        }
        return new TidemqScan(this, options);
    }

    @Override
    public WriteBuilder newWriteBuilder(LogicalWriteInfo info) {
        return ((SupportsWrite) twin()).newWriteBuilder(info);
    }
}
