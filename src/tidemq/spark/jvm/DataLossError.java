package org.tidemq.spark;

/**
 * Offsets a read asked for that are not in the store (cleaned away, holes, damaged records)
 * while failOnDataLoss is on: tidemq.spark.backend.DataLossError's twin, same words.
 */
public final class DataLossError extends RuntimeException {
    private static final long serialVersionUID = 1L;

    DataLossError(String message) {
        super(message);
    }
}
