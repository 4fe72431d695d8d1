"""Message filters a subscription names: RocketMQ's SQL92 property filters (sql92.py parses an
expression once, evaluate.py turns it into a matcher over a stored message's properties) and
tag filters (``a || b``). Used by the broker's consumption paths; the store only sees a
``match(message) -> bool`` callable (store/reader.py), never this package."""
