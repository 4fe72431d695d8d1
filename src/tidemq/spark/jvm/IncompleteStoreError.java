package org.tidemq.spark;

/**
 * Segments of the store's commit log are not in the directories read (a commit-log directory left
 * out of the option commitlogDirs, or moved): tidemq.spark.files.IncompleteStoreError's twin, same
 * words; {@link #why} "gap" (the segments found are not contiguous) or "checkpoint" (the store's
 * checkpoint says the log is durable past the segments found).
 */
public final class IncompleteStoreError extends IllegalStateException {
    private static final long serialVersionUID = 1L;

    public final String why;

    IncompleteStoreError(String message, String why) {
        super(message);
        this.why = why;
    }
}
