"""The client's error: an answer that is not OK, with the protocol's status code."""

from __future__ import annotations

from ..protocol.stubs import code_name


class ClientError(RuntimeError):
    """An answer that is not OK: ``code`` is the protocol's status code."""

    def __init__(self, code: int, message: str) -> None:
        super().__init__(f"{code_name(code)}: {message}")
        self.code = code
