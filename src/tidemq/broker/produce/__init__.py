"""Sends: SendMessage (send_message.py) and SendRecords (send_records.py), both through the
send path (send_path.py: flow control, topic checks, the dedup window (dedup.py), the put)."""
