"""The broker's clients: which are alive (clients.py), their Telemetry streams and the commands
the broker sends on them (telemetry.py)."""
