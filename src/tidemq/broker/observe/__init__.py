"""What an operator sees of a running broker: the one write verdict (verdict.py), consumer lag
(lag.py), latency buckets (latency.py), messages counted by outcome (outcomes.py), the sampled
history of disks and rates (history.py), the status as plain data (status.py), Prometheus metrics
(metrics.py), the status page (page.py) and the HTTP port that serves them (http.py)."""
