"""The embedded storage engine: no network, no asyncio."""

from ..config import StoreConfig
from .codec import StoredMessage
from .store import CheckReport, MessageStore
from .types import (GetResult, GetStatus, Message, PutReason, PutResult, PutStatus, StoreError, StoreNotRunning,
                    StoreState)

__all__ = ["MessageStore", "StoreConfig", "Message", "PutStatus", "PutResult", "GetStatus", "GetResult",
           "StoredMessage", "StoreError", "CheckReport", "PutReason", "StoreNotRunning", "StoreState"]
