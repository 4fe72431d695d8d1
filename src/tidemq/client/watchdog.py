"""A streamed call has no deadline of its own (it lasts as long as its messages): ``Watchdog``
cancels it when its next message is awaited longer than a timeout (``fired`` says why it ended)."""

from __future__ import annotations

import threading
import time


class Watchdog:
    def __init__(self, timeout_s: float) -> None:
        """Watches from ``waiting()`` to ``got()``; cancels ``call`` (a gRPC call, set once made)."""
        self.call = None
        self.timeout_s = timeout_s
        self.fired = False
        self._since: float | None = None        # when the awaited message was first awaited (None: none is)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._watch, name="tidemq-stream-watchdog", daemon=True)
        self._thread.start()

    def waiting(self) -> None:
        """A message is awaited from now (kept when one already was)."""
        if self._since is None:
            self._since = time.monotonic()

    def got(self, more: bool = False) -> None:
        """The awaited message came; ``more``: another one is awaited from now."""
        self._since = time.monotonic() if more else None

    def stop(self) -> None:
        self._stop.set()

    def _watch(self) -> None:
        step = min(1.0, max(0.01, self.timeout_s / 4))
        while not self._stop.wait(step):
            since = self._since
            if since is not None and self.call is not None and time.monotonic() - since > self.timeout_s:
                self.fired = True
                self.call.cancel()
                return
