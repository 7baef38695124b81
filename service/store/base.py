"""What every part of :class:`Store` shares: the client, the keys, the limits, the scripts,
and the translation of connection failures into :class:`StoreUnavailable`."""

from __future__ import annotations

import asyncio
import contextlib
import functools
from collections.abc import Callable, Coroutine
from typing import Any, ParamSpec, TypeVar

from redis import exceptions as rexc

from service.errors import StoreUnavailable
from service.settings import Settings
from service.store import scripts
from service.store.connection import Client, is_cluster
from service.store.keys import Keys

P = ParamSpec("P")
T = TypeVar("T")

UNAVAILABLE: tuple[type[BaseException], ...] = (
    rexc.ConnectionError,
    rexc.TimeoutError,
    rexc.BusyLoadingError,
    rexc.ClusterDownError,
    rexc.TryAgainError,
    rexc.MasterDownError,
    rexc.ReadOnlyError,
    rexc.SlotNotCoveredError,
    ConnectionError,
    OSError,
)


def guarded(fn: Callable[P, Coroutine[Any, Any, T]]) -> Callable[P, Coroutine[Any, Any, T]]:
    """Turn Redis connection failures raised by ``fn`` into :class:`StoreUnavailable`."""

    @functools.wraps(fn)
    async def wrapper(*args: P.args, **kwargs: P.kwargs) -> T:
        try:
            return await fn(*args, **kwargs)
        except UNAVAILABLE as e:
            task = asyncio.current_task()
            if task is not None and task.cancelling():
                # redis-py can turn a cancelled read into a connection error: keep the
                # cancellation, or a cancelled task would carry on as if Redis were down.
                raise asyncio.CancelledError() from e
            raise StoreUnavailable(f"Redis is unavailable: {e}") from e

    return wrapper


def text(value: bytes | str | None) -> str | None:
    """A reply as ``str`` (clients keep raw bytes)."""
    if value is None:
        return None
    return value.decode() if isinstance(value, bytes) else str(value)


def parse_id(entry_id: str) -> tuple[int, int]:
    """``"ms-seq"`` → ``(ms, seq)``, the order Redis gives stream ids."""
    ms, _, seq = entry_id.partition("-")
    return int(ms), int(seq or 0)


def next_id(entry_id: str) -> str:
    """The smallest id after ``entry_id`` (for ``XTRIM MINID``: trim everything ≤ it)."""
    ms, seq = parse_id(entry_id)
    return f"{ms}-{seq + 1}"


class StoreBase:
    """Holds the client, :class:`Keys`, the :class:`Settings` limits and registered scripts."""

    def __init__(self, client: Client, keys: Keys, settings: Settings | None = None) -> None:
        self.client = client
        self.keys = keys
        self.settings = settings or Settings()
        self.cluster = is_cluster(client)
        reg: Callable[[str], Any] = client.register_script
        self._create = reg(scripts.CREATE_MODEL)
        self._delete = reg(scripts.DELETE_MODEL)
        self._append = reg(scripts.APPEND)
        self._acquire = reg(scripts.ACQUIRE)
        self._renew = reg(scripts.RENEW)
        self._release = reg(scripts.RELEASE)
        self._commit = reg(scripts.COMMIT)
        self._rollback = reg(scripts.ROLLBACK)
        self._load_state = reg(scripts.LOAD_STATE)
        self._get_version = reg(scripts.GET_VERSION)
        self._pin = reg(scripts.PIN)
        self._unpin = reg(scripts.UNPIN)
        self._metrics = reg(scripts.METRICS)

    async def close(self) -> None:
        """Close the client's connections."""
        close = getattr(self.client, "aclose", None) or self.client.close
        await close()

    async def warm(self) -> None:
        """Open the client before requests share it. A Redis Cluster client discovers its
        nodes on its first command; ~100 concurrent first commands race inside redis-py's
        cluster client (one task reuses a connection another has just reset: an
        ``AttributeError`` that would surface as a 500). Initialising it here, once, avoids
        that. If Redis is not there yet nothing is raised: the client initialises lazily."""
        if is_cluster(self.client):
            with contextlib.suppress(rexc.RedisError, OSError, *UNAVAILABLE):
                await self.client.initialize()

    async def ping(self) -> bool:
        """Whether Redis answers (``readyz``)."""
        try:
            return bool(await self.client.ping())
        except UNAVAILABLE:
            return False
