"""The embedded storage engine: no network, no asyncio.

The public names below are loaded on first use (PEP 562), so that importing the package (or
one small module of it) does not load the engine, numpy or pyarrow. The record format is
tidemq.record's, the store root's names tidemq.layout's.
"""

from importlib import import_module
from typing import TYPE_CHECKING

if TYPE_CHECKING:                    # what type checkers and IDEs see; at run time __getattr__ loads them
    from ..config import StoreConfig
    from ..record.codec import StoredMessage
    from .store import CheckReport, MessageStore
    from .types import (GetResult, GetStatus, Message, PutReason, PutResult, PutStatus, StoreError,
                        StoreNotRunning, StoreState)

_EXPORTS = {
    "MessageStore": ".store", "CheckReport": ".store",
    "StoredMessage": "..record.codec",
    "Message": ".types", "PutStatus": ".types", "PutResult": ".types", "GetStatus": ".types",
    "GetResult": ".types", "StoreError": ".types", "PutReason": ".types", "StoreNotRunning": ".types",
    "StoreState": ".types",
}
_FROM_CONFIG = ("StoreConfig",)

__all__ = ["MessageStore", "StoreConfig", "Message", "PutStatus", "PutResult", "GetStatus", "GetResult",
           "StoredMessage", "StoreError", "CheckReport", "PutReason", "StoreNotRunning", "StoreState"]


def __getattr__(name: str):
    if name in _FROM_CONFIG:
        from ..config import StoreConfig
        value = StoreConfig
    elif name in _EXPORTS:
        value = getattr(import_module(_EXPORTS[name], __name__), name)
    else:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    globals()[name] = value          # later lookups skip this function
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
