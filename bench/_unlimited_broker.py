"""``python -m _unlimited_broker serve ...``: tidemq's broker with reads NOT limited to what is
durable under SYNC_FLUSH (the behaviour before issue 27.2: consumers served what a crash can take
back), for bench/consume_latency.py's reference. Only the store's readable limit (ReadableEnd) changes (a frozen
log's durable end still holds); everything else is tidemq.cli.main as it is."""

from tidemq.store.readable import ReadableEnd


def _unlimited(self):
    cl = self.commit_log
    return cl.flushed_offset if cl.frozen else None


ReadableEnd.limit = _unlimited

if __name__ == "__main__":
    from tidemq.cli.main import cli
    cli()
