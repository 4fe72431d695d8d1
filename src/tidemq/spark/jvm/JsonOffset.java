package org.tidemq.spark;

import org.apache.spark.sql.connector.read.streaming.Offset;

/** A stream's offsets, {"topic": {"queue id": offset}}: the Python reader's checkpoint format too. */
final class JsonOffset extends Offset {
    private final String json;

    JsonOffset(String json) {
        this.json = json;
    }

    @Override
    public String json() {
        return json;
    }
}
