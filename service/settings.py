"""Settings, read from the environment (``STREAMLEARN_*``) or passed in explicitly.

Nothing reads the environment at import time: every entry point (``streamlearn serve``,
``api``, ``worker``, ``python -m workers``) builds its :class:`Settings` once with
:meth:`Settings.from_flags` and passes it down.
"""

from __future__ import annotations

from typing import Any

from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict


class Settings(BaseSettings):
    """Every tunable of the service, with the defaults a first run wants."""

    model_config = SettingsConfigDict(env_prefix="STREAMLEARN_", extra="ignore")

    # --- Redis ---------------------------------------------------------------------------
    redis_url: str | None = Field(
        default=None,
        description="redis://, rediss:// (TLS) or unix:// URL; user and password may be in it. "
        "None means the embedded default (see `streamlearn serve`).",
    )
    redis_cluster: bool = Field(default=False, description="Talk to a Redis Cluster.")
    key_prefix: str = Field(
        default="sl", description="Prefix of every key (tests use a unique one)."
    )
    data_dir: str = Field(
        default=".streamlearn", description="Where the embedded Redis keeps its data."
    )
    redis_max_connections: int = Field(
        default=256,
        ge=1,
        description="Size of each process's Redis connection pool; a request that finds it "
        "full waits up to redis_pool_timeout_s for a connection.",
    )
    redis_pool_timeout_s: float = Field(
        default=1.0, gt=0, description="Longest wait for a free pooled connection (then 503)."
    )
    redis_timeout_s: float = Field(
        default=1.0,
        gt=0,
        description="Socket connect and read timeout of the API's Redis calls: a hung Redis "
        "answers 503 within about this long.",
    )
    redis_worker_timeout_s: float = Field(
        default=10.0,
        gt=0,
        description="The same for the worker, whose commits carry a whole state.",
    )

    # --- ingest limits (the API answers 413/422/429 past them) ----------------------------
    max_body_bytes: int = 32 * 1024 * 1024
    body_timeout_s: float = Field(
        default=30.0,
        gt=0,
        description="A request body must arrive whole within this many seconds of the "
        "handler starting to read it (a stalled upload answers 408).",
    )
    max_batch: int = 10_000
    max_features: int = 100_000
    max_text_chars: int = 1_000_000
    max_lag: int = 5_000_000
    idempotency_window_s: int = 24 * 3600
    feedback_ttl_s: int = 24 * 3600

    # --- worker ----------------------------------------------------------------------------
    worker_id: str | None = None
    commit_ms: int = 200
    commit_examples: int = 200_000
    publish_ms: int = 250
    publish_examples: int = 200_000
    lease_ttl_ms: int = 10_000
    read_count: int = 200
    block_ms: int = 100
    keep_versions: int = 20
    history_every: int = 1_000
    heartbeat_ms: int = 1_000
    worker_memory_bytes: int = Field(
        default=2 << 30,
        ge=0,
        description="Bound on the learner arrays a worker holds (their bytes; the spam "
        "preset: 24 MiB a model). At the bound it takes no more models, and lets models "
        "with nothing in hand go (least recently active first) when others wait; those "
        "are taken again with their next entries. 0 = no bound.",
    )
    idle_release_s: float = Field(
        default=30.0,
        gt=0,
        description="A worker releases the lease of a model that has had no entry for this "
        "long (and frees its learner); the next entry wakes a worker through the model's "
        "work channel. Idle models cost no worker memory and no Redis command.",
    )

    # --- API -------------------------------------------------------------------------------
    host: str = "127.0.0.1"
    port: int = 8000
    api_keys: str = Field(
        default="",
        description="Semicolon-separated `key:scope,scope` entries, scopes among learn, predict, "
        "admin; empty means an open service.",
    )
    cache_check_s: float = 2.0
    model_cache_bytes: int = Field(
        default=1 << 30,
        ge=0,
        description="Bound on the weights each API process keeps in memory (estimated bytes "
        "of the served arrays); past it the least recently used models are evicted and "
        "reloaded on their next use. 0 = no bound.",
    )

    @classmethod
    def from_flags(cls, **flags: Any) -> Settings:
        """The ``STREAMLEARN_*`` variables with a command line's flags on top; a flag left at
        None was not given. The one way every entry point turns its flags into settings.

        >>> Settings.from_flags(key_prefix="t1", redis_url=None).key_prefix
        't1'
        """
        unknown = sorted(set(flags) - set(cls.model_fields))
        if unknown:
            raise TypeError(f"not a setting: {', '.join(unknown)}")
        return cls(**{k: v for k, v in flags.items() if v is not None})

    def environ(self) -> dict[str, str]:
        """The settings given explicitly (by flag or variable) as ``STREAMLEARN_*`` variables:
        how they reach the processes uvicorn starts for ``streamlearn api --workers N``.

        >>> env = Settings.from_flags(key_prefix="t1", redis_cluster=True).environ()
        >>> env["STREAMLEARN_KEY_PREFIX"], env["STREAMLEARN_REDIS_CLUSTER"]
        ('t1', 'true')
        """
        given = self.model_dump(include=self.model_fields_set, exclude_none=True)
        return {
            f"STREAMLEARN_{name.upper()}": str(value).lower()
            if isinstance(value, bool)
            else str(value)
            for name, value in given.items()
        }
