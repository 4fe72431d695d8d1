"""What protects the broker: resource alarms (alarms.py), flow control of sends (flow.py),
authentication of every call (auth.py)."""
