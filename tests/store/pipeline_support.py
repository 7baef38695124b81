"""Shared pieces of the pipeline's hard tests (chaos, Redis restart, cluster).

- :func:`synthetic` — a deterministic sparse stream, cut into batches of varying size;
- :class:`WorkerProcess` — ``python -m workers`` as a subprocess configured by the environment
  alone (as an operator would run it), which the tests SIGKILL and restart;
- :func:`reference_state` — the uninterrupted in-process run every test compares against;
- :func:`assert_same_state` — bit-for-bit equality of two learner states, naming what differs.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from service.learning.features import Batch

REPO = Path(__file__).resolve().parents[2]


def synthetic(n: int, dim: int, nnz: int, seed: int, *, float32: bool = False) -> Batch:
    """``n`` examples with ~``nnz`` signed values each over ``dim`` columns, labelled by a
    hidden hyperplane with 10 % label noise, so every algorithm keeps making mistakes and
    updates until the end (a stream the model has "solved" would hide ordering errors).

    With ``float32`` the values are float32-exact, so the codec stores them narrow (and a
    ``dim`` up to 65,536 makes it store the indices narrow too): both entry forms get used.
    """
    rng = np.random.default_rng(seed)
    idx = np.sort(rng.integers(0, dim, size=(n, nnz), dtype=np.int64), axis=1)
    keep = np.ones((n, nnz), dtype=bool)
    keep[:, 1:] = idx[:, 1:] != idx[:, :-1]
    indptr = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(keep.sum(axis=1), out=indptr[1:])
    indices = idx[keep].astype(np.int32)
    data = np.asarray(rng.standard_normal(indices.shape[0]), dtype=np.float64)
    if float32:
        data = data.astype(np.float32).astype(np.float64)
    w_true = rng.standard_normal(dim)
    margin = np.add.reduceat(w_true[indices] * data, indptr[:-1])
    y = (margin > 0).astype(np.int32)
    flip = rng.random(n) < 0.10
    y[flip] = 1 - y[flip]
    return Batch(indptr, indices, data, y)


def split(batch: Batch, sizes: Iterable[int]) -> list[Batch]:
    """Cut ``batch`` into consecutive batches of the given sizes (the last takes the rest)."""
    out: list[Batch] = []
    start = 0
    for size in sizes:
        if start >= batch.n:
            break
        stop = min(start + size, batch.n)
        out.append(batch.slice(start, stop))
        start = stop
    if start < batch.n:
        out.append(batch.slice(start, batch.n))
    return out


def random_sizes(rng: np.random.Generator, total: int, lo: int, hi: int) -> list[int]:
    """Batch sizes drawn uniformly in ``[lo, hi]`` until they cover ``total`` examples."""
    sizes: list[int] = []
    while sum(sizes) < total:
        sizes.append(int(rng.integers(lo, hi + 1)))
    return sizes


def reference_state(spec: Mapping[str, Any], batches: Sequence[Batch]) -> dict[str, Any]:
    """The state of one uninterrupted in-process run of ``spec``'s learner over ``batches``."""
    from service.learning.registry import make_learner

    n_classes = len(spec.get("classes") or (0, 1))
    learner = make_learner(spec["algorithm"], spec["dim"], n_classes, dict(spec.get("params", {})))
    for b in batches:
        learner.learn(b)
    return dict(learner.get_state())


def assert_same_state(actual: Mapping[str, Any], expected: Mapping[str, Any], what: str) -> None:
    """Every field of ``expected`` is in ``actual`` and equal to the bit (arrays and scalars)."""
    missing = sorted(set(expected) - set(actual))
    assert not missing, f"{what}: state lacks {missing}"
    for key, want in expected.items():
        got = actual[key]
        if isinstance(want, np.ndarray):
            got_arr = np.asarray(got)
            assert got_arr.dtype == want.dtype and got_arr.shape == want.shape, (
                f"{what}: {key} is {got_arr.dtype}{got_arr.shape}, want {want.dtype}{want.shape}"
            )
            # Compare the bytes: bit-identical, and NaN-safe.
            if got_arr.tobytes() != want.tobytes():
                diff = np.flatnonzero(got_arr.ravel() != want.ravel())
                raise AssertionError(
                    f"{what}: {key} differs at {diff.size} positions, first {diff[:5].tolist()}"
                )
        else:
            assert got == want, f"{what}: {key} = {got!r}, want {want!r}"


@dataclass
class WorkerProcess:
    """``python -m workers`` in a subprocess, configured through ``STREAMLEARN_*`` variables.

    ``kill()`` is a crash (SIGKILL: no commit, no lease release); ``start()`` after it is the
    restart a supervisor would do. Output goes to ``log`` so a failing test can show it.
    """

    env: dict[str, str]
    log: Path
    burst: bool = False
    extra_args: Sequence[str] = ()
    proc: subprocess.Popen[bytes] | None = None
    starts: int = 0
    exit_codes: list[int] = field(default_factory=list)

    def start(self) -> WorkerProcess:
        assert not self.alive, "already running"
        args = [
            sys.executable,
            "-m",
            "workers",
            *(["--burst"] if self.burst else []),
            *self.extra_args,
        ]
        with self.log.open("ab") as out:
            out.write(f"--- start #{self.starts} ---\n".encode())
            out.flush()
            self.proc = subprocess.Popen(
                args, cwd=REPO, env=self.env, stdout=out, stderr=subprocess.STDOUT
            )
        self.starts += 1
        return self

    @property
    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    def signal(self, sig: int) -> None:
        if self.alive:
            assert self.proc is not None
            self.proc.send_signal(sig)

    def kill(self) -> None:
        """SIGKILL and reap."""
        if self.proc is None:
            return
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
        self.exit_codes.append(self.proc.wait(30))
        self.proc = None

    def wait(self, timeout: float) -> int:
        """Wait for a (burst) worker to exit by itself; its exit code."""
        assert self.proc is not None
        code = self.proc.wait(timeout)
        self.exit_codes.append(code)
        self.proc = None
        return code

    @property
    def worker_id(self) -> str:
        return self.env.get("STREAMLEARN_WORKER_ID", "")

    def ready(self) -> bool:
        """Whether the worker logged that it is running (its signal handlers are installed:
        before that, SIGTERM kills the interpreter with the default action)."""
        try:
            return f"worker {self.worker_id} starting" in self.log.read_text(errors="replace")
        except OSError:
            return False

    def tail(self, n: int = 40) -> str:
        try:
            return "\n".join(self.log.read_text(errors="replace").splitlines()[-n:])
        except OSError:
            return "(no log)"


def worker_env(settings: Any, **overrides: Any) -> dict[str, str]:
    """The environment a worker subprocess gets: ``settings`` as ``STREAMLEARN_*`` variables."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("STREAMLEARN_")}
    values = {
        "redis_url": settings.redis_url,
        "redis_cluster": settings.redis_cluster,
        "key_prefix": settings.key_prefix,
        "commit_ms": settings.commit_ms,
        "commit_examples": settings.commit_examples,
        "publish_ms": settings.publish_ms,
        "publish_examples": settings.publish_examples,
        "lease_ttl_ms": settings.lease_ttl_ms,
        "read_count": settings.read_count,
        "block_ms": settings.block_ms,
        "heartbeat_ms": settings.heartbeat_ms,
        **overrides,
    }
    for name, value in values.items():
        if value is None:
            continue
        env[f"STREAMLEARN_{name.upper()}"] = (
            str(value).lower() if isinstance(value, bool) else str(value)
        )
    env["PYTHONPATH"] = str(REPO) + os.pathsep + env.get("PYTHONPATH", "")
    return env


def model_spec(algorithm: str, dim: int, **params: Any) -> dict[str, Any]:
    """A stored spec dict (``ModelSpec.to_dict()``) for an un-hashed binary model."""
    from service.learning.spec import ModelSpec

    return ModelSpec.from_dict(
        {"algorithm": algorithm, "params": params, "dim": dim, "hashing": False}
    ).to_dict()


@dataclass
class Reference:
    """One uninterrupted in-process run over a model's entries, in stream order.

    ``counters[entry_id]`` are (examples_seen, mistakes, updates) right after that entry, so
    any committed state can be checked against the true prefix it claims to be;
    ``snapshots[entry_id]`` the full learner state there, for the ids asked for;
    ``quality`` the state of the quality tracker fed the served margins (binary models).
    """

    state: dict[str, Any]
    serving: dict[str, Any]
    counters: dict[str, tuple[int, int, int]]
    snapshots: dict[str, dict[str, Any]]
    quality: dict[str, Any] | None = None


def reference_run(
    spec: Mapping[str, Any],
    entries: Sequence[tuple[str, Batch]],
    snapshot_at: Iterable[str] = (),
) -> Reference:
    """Learn ``entries`` ((entry id, batch), in order) with a fresh learner of ``spec``."""
    from service.learning.quality import QualityTracker
    from service.learning.registry import make_learner

    wanted = set(snapshot_at)
    n_classes = len(spec.get("classes") or (0, 1))
    learner = make_learner(spec["algorithm"], spec["dim"], n_classes, dict(spec.get("params", {})))
    counters: dict[str, tuple[int, int, int]] = {"0-0": (0, 0, 0)}
    snapshots: dict[str, dict[str, Any]] = {}
    tracker = None if learner.multiclass else QualityTracker()
    for entry_id, batch in entries:
        if tracker is None:
            learner.learn(batch)
        else:
            _, margins = learner.learn_scored(batch)
            tracker.update(margins, batch.y, learner.link)
        c = learner.counters()
        counters[entry_id] = (int(c["examples_seen"]), int(c["mistakes"]), int(c["updates"]))
        if entry_id in wanted:
            snapshots[entry_id] = dict(learner.get_state())
    return Reference(
        dict(learner.get_state()),
        dict(learner.serving().get_state()),
        counters,
        snapshots,
        tracker.get_state() if tracker is not None else None,
    )


@dataclass
class CommitWatcher:
    """Samples each model's committed (cursor, counters) as fast as it can while workers are
    being killed; :meth:`violations` then checks every sample against the reference run: the
    counters must be those of the true prefix ending at the cursor, and a cursor never moves
    backwards. A commit that landed twice, out of order, or from a writer whose state was not
    the committed one shows up as a sample that matches no prefix."""

    client: Any  # redis.asyncio.Redis
    state_keys: dict[str, str]  # model -> its state key
    samples: dict[str, list[tuple[str, tuple[int, ...]]]] = field(default_factory=dict)

    async def sample(self) -> None:
        fields = ["cursor", "examples_seen", "mistakes", "updates"]
        for m, key in self.state_keys.items():
            raw = await self.client.hmget(key, fields)
            if raw[0] is None:
                continue
            got = (raw[0].decode(), tuple(int(x or 0) for x in raw[1:]))
            seq = self.samples.setdefault(m, [])
            if not seq or seq[-1] != got:
                seq.append(got)

    async def run(self, stop: Any) -> None:
        """Sample until the ``asyncio.Event`` ``stop`` is set."""
        import asyncio

        while not stop.is_set():
            await self.sample()
            await asyncio.sleep(0.001)

    def commits_seen(self, m: str) -> int:
        return len(self.samples.get(m, []))

    def violations(self, m: str, counters: Mapping[str, tuple[int, int, int]]) -> list[str]:
        out: list[str] = []
        last: tuple[int, int] | None = None
        for cursor, got in self.samples.get(m, []):
            want = counters.get(cursor)
            if want is None:
                out.append(f"{m}: cursor {cursor} is no entry id")
            elif got != want:
                out.append(f"{m}: at {cursor} counters {got}, true prefix {want}")
            ms, _, sq = cursor.partition("-")
            pos = (int(ms), int(sq))
            if last is not None and pos < last:
                out.append(f"{m}: cursor went back from {last} to {pos}")
            last = pos
        return out
