"""The broker's own durable state: where it lives under the store root (layout.py) and the
snapshot + journal format its pop state and transaction decisions use (journal.py)."""
