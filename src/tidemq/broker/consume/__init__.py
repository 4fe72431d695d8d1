"""Consumption. Pop (the SimpleConsumer and PushConsumer): the durable per-group state
(pop_state.py), ReceiveMessage / AckMessage / ChangeInvisibleDuration / forward to the
dead-letter queue (receive.py), auto-renewal of invisible time (renew.py). By offset (the
fast client, Spark): PullMessage / QueryOffset / GetOffset / UpdateOffset and long polling
(pull.py), the committed offsets of groups (group_offsets.py), raw records (pull_records.py)."""
