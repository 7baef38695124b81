"""The only package that talks to Redis: keys, codecs, the connection and the :class:`Store`.

>>> from service.store import Keys
>>> Keys("sl").lease("spam")
'sl:{spam}:lease'
"""

from service.store.connection import connect
from service.store.keys import Keys, validate_model_name
from service.store.models import (
    CommitResult,
    CommittedState,
    DeadLetter,
    Lease,
    Metrics,
    Quality,
    StateBlob,
    Store,
    WorkerInfo,
)
from service.store.streams import AppendResult, StreamEntry
from service.store.versions import Version, VersionInfo

__all__ = [
    "AppendResult",
    "CommitResult",
    "CommittedState",
    "DeadLetter",
    "Keys",
    "Lease",
    "Metrics",
    "Quality",
    "StateBlob",
    "Store",
    "StreamEntry",
    "Version",
    "VersionInfo",
    "WorkerInfo",
    "connect",
    "validate_model_name",
]
