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
 * A read with signing or TLS options goes to the Python reader (tidemq.client has both).
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

    /** The options that sign calls or ask for TLS (tidemq/spark/backend.py connection()). */
    static final String[] CONNECTION_OPTIONS = {"accessKey", "secretKey", "tls", "rootCertificates"};

    /** Whether a read needs what only the Python reader has: signed calls, TLS. */
    static boolean needsConnectionOptions(CaseInsensitiveStringMap options) {
        for (String k : CONNECTION_OPTIONS) {
            String v = options.get(k);
            if (v != null && !v.isEmpty() && !(k.equals("tls") && v.trim().equalsIgnoreCase("false"))) {
                return true;
            }
        }
        return false;
    }

    @Override
    public ScanBuilder newScanBuilder(CaseInsensitiveStringMap options) {
        String r = reader(options);
        if (needsConnectionOptions(options)) {
            if (r.equals("jvm")) {
                throw new IllegalArgumentException("tidemq: the JVM reader does not sign calls or speak TLS "
                        + "(options accessKey, secretKey, tls, rootCertificates): leave the option reader out "
                        + "(the Python reader takes such reads) or set reader=python");
            }
            r = "python";
        }
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
