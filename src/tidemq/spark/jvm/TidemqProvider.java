package org.tidemq.spark;

import java.util.Map;

import org.apache.spark.sql.connector.catalog.Table;
import org.apache.spark.sql.connector.catalog.TableProvider;
import org.apache.spark.sql.connector.expressions.Transform;
import org.apache.spark.sql.sources.DataSourceRegister;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.sql.util.CaseInsensitiveStringMap;

/**
 * {@code format("tidemq")} on the JVM: "Python plans, the JVM reads". Spark finds it by its
 * short name (META-INF/services) once tidemq's jar is in the session (tidemq.spark.register).
 * Reads go to the JVM reader (signed, TLS and tiered ones too: Connection, ArchiveRangeReader);
 * what it does not do goes to the Python data source registered as {@code tidemq_python}
 * (PythonTwin): writes, and any read with the option {@code reader=python} (or the session conf
 * spark.tidemq.reader=python).
 */
public final class TidemqProvider implements TableProvider, DataSourceRegister {
    /** tidemq.spark.decode.SPARK_SCHEMA, the Python reader's (tests/spark/test_jvm.py holds them equal). */
    static final String SCHEMA_DDL = "topic string, queue_id int, queue_offset long, commitlog_offset long, "
            + "msg_id string, tags string, keys array<string>, body binary, properties map<string,string>, "
            + "born_timestamp timestamp, store_timestamp timestamp";

    @Override
    public String shortName() {
        return "tidemq";
    }

    @Override
    public StructType inferSchema(CaseInsensitiveStringMap options) {
        return BatchBuilder.SCHEMA;
    }

    @Override
    public boolean supportsExternalMetadata() {
        return true;                 // a write hands the DataFrame's schema to the Python sink, as before
    }

    @Override
    public Table getTable(StructType schema, Transform[] partitioning, Map<String, String> properties) {
        return new TidemqTable(schema, partitioning, properties);
    }
}
