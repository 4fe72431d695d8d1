package org.tidemq.spark;

import java.util.Map;

import org.apache.spark.sql.connector.catalog.Table;
import org.apache.spark.sql.connector.expressions.Transform;
import org.apache.spark.sql.execution.datasources.v2.python.PythonDataSourceV2;
import org.apache.spark.sql.types.StructType;

/**
 * The Python data source (tidemq.spark.entry, registered as {@code tidemq_python} by
 * tidemq.spark.register) as a table this JVM source hands work to: Spark's own wrapper of a
 * Python data source, given that name.
 */
final class PythonTwin {
    static final String NAME = "tidemq_python";

    private PythonTwin() {}

    static Table table(StructType schema, Transform[] partitioning, Map<String, String> properties) {
        PythonDataSourceV2 ds = new PythonDataSourceV2();
        ds.setShortName(NAME);
        try {
            return ds.getTable(schema, partitioning, properties);
        } catch (RuntimeException e) {
            throw new IllegalStateException("tidemq: this needs the Python data source registered as " + NAME
                    + ": call tidemq.spark.register(spark) (" + e.getMessage() + ")", e);
        }
    }
}
