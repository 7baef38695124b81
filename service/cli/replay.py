"""Replay a file of examples into a running service: ``streamlearn replay`` and ``demo``.

Lines are posted as they are (NDJSON or svmlight bodies of ``batch_size`` lines), not parsed
and re-encoded, so the client is never the bottleneck; only ``--order`` needs the ids, and
then each line is parsed once to learn its id. A 429 (backlog over ``max_lag``) or 503 is
retried after the server's ``Retry-After`` (at most 5 s): a replay slows down instead
of failing.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import orjson

from service.cli.datasets import FORMATS, SPAMBASE, SPAMBASE_ORDER, open_binary
from service.client import Client, ClientError, Metrics
from service.learning.features import ALLOWED_KEYS

RETRY_STATUSES = (429, 503)
MAX_BACKOFF_S = 5.0


@dataclass
class ReplayResult:
    posted: int
    requests: int
    seconds: float
    retries: int
    duplicates: int = 0  # already learned (their ids were accepted before): not learned again
    version: int | None = None  # with wait: the version that serves everything posted

    @property
    def new(self) -> int:
        return self.posted - self.duplicates

    @property
    def rate(self) -> float:
        return self.posted / self.seconds if self.seconds > 0 else 0.0


def read_lines(path: Path, fmt: str) -> list[bytes]:
    """The non-blank, non-comment lines of the file (.gz/.bz2/.xz decompressed), without their
    line ends."""
    if fmt not in FORMATS:
        raise ValueError(f"format must be one of {list(FORMATS)}, got {fmt!r}")
    out = []
    with open_binary(path) as f:
        for n, raw in enumerate(f):
            line = raw.strip()
            if n == 0 and line.startswith(b"\xef\xbb\xbf"):  # a UTF-8 byte-order mark
                line = line[3:].strip()
            if line and not (fmt == "svmlight" and line.startswith(b"#")):
                out.append(line)
    return out


def drop_unknown_keys(lines: Sequence[bytes]) -> tuple[list[bytes], dict[str, int]]:
    """NDJSON lines without the keys an example does not have (a file's own metadata), and
    how many lines carried each dropped key; lines that need no change are kept as they are.

    >>> drop_unknown_keys([b'{"text": "hi", "label": 1, "src": "a"}', b'{"label": 1}'])
    ([b'{"text":"hi","label":1}', b'{"label": 1}'], {'src': 1})
    """
    out: list[bytes] = []
    dropped: Counter[str] = Counter()
    for line in lines:
        try:
            obj = orjson.loads(line)
        except orjson.JSONDecodeError:
            out.append(line)  # the server names the bad line
            continue
        if isinstance(obj, dict) and not obj.keys() <= ALLOWED_KEYS:
            dropped.update(str(k) for k in obj.keys() - ALLOWED_KEYS)
            line = orjson.dumps({k: v for k, v in obj.items() if k in ALLOWED_KEYS})
        out.append(line)
    return out, dict(sorted(dropped.items()))


def apply_order(
    lines: Sequence[bytes], order: Sequence[str], *, source: str = "file"
) -> list[bytes]:
    """Reorder NDJSON lines by their ``id``; every id of ``order`` must be in the file once."""
    by_id: dict[str, bytes] = {}
    for n, line in enumerate(lines, 1):
        try:
            obj = orjson.loads(line)
        except orjson.JSONDecodeError as e:
            raise ValueError(f"{source} line {n} is not JSON: {e}") from e
        ident = obj.get("id") if isinstance(obj, dict) else None
        if ident is None:
            raise ValueError(f"{source} line {n} has no 'id': --order needs ids on every line")
        by_id[str(ident)] = line
    missing = [i for i in order if i not in by_id]
    if missing:
        raise ValueError(f"order names {len(missing)} ids not in {source}, e.g. {missing[0]!r}")
    if len(set(order)) != len(order):
        raise ValueError("order lists an id more than once")
    return [by_id[i] for i in order]


def batches(lines: Sequence[bytes], size: int) -> Iterator[Sequence[bytes]]:
    if size < 1:
        raise ValueError(f"batch_size must be >= 1, got {size}")
    for i in range(0, len(lines), size):
        yield lines[i : i + size]


def replay(
    client: Client,
    model: str,
    lines: Sequence[bytes],
    *,
    fmt: str = "ndjson",
    batch_size: int = 500,
    rate: float = 0.0,
    on_batch: Callable[[int], None] | None = None,
    max_retries: int = 100,
    wait: float | None = None,
    start: float | None = None,
) -> ReplayResult:
    """Post ``lines`` in batches; ``rate`` > 0 paces the posts to about that many examples/s.

    ``wait`` (seconds, at most 30): the last batch asks the server to answer once a version
    covering it (and so everything before it) is served; that version is in the result.
    ``start`` (a ``time.perf_counter()`` value) is when the clock of the rate started.
    """
    if rate < 0:
        raise ValueError(f"rate must be >= 0 (0 = as fast as possible), got {rate}")
    start = time.perf_counter() if start is None else start
    posted = requests = retries = duplicates = 0
    version: int | None = None
    chunks = list(batches(lines, batch_size))
    for n, chunk in enumerate(chunks, 1):
        body = b"\n".join(chunk) + b"\n"
        last_wait = wait if n == len(chunks) else None
        for attempt in range(max_retries + 1):
            try:
                answer = client.learn_raw(model, body, fmt, wait=last_wait)
                break
            except ClientError as e:
                if e.status not in RETRY_STATUSES or attempt == max_retries:
                    e.add_note(
                        f"{posted:,} examples were accepted before this; the rejected batch is "
                        f"examples {posted + 1:,}..{posted + len(chunk):,} of the replay "
                        "(an index in the message counts from the batch's first)"
                    )
                    raise
                retries += 1
                time.sleep(min(max(e.retry_after or 0.5, 0.05), MAX_BACKOFF_S))
        requests += 1
        posted += len(chunk)
        if isinstance(answer, dict):
            duplicates += int(answer.get("duplicates", 0))
            version = answer.get("version", version)
        if on_batch is not None:
            on_batch(len(chunk))
        if rate > 0:
            ahead = posted / rate - (time.perf_counter() - start)
            if ahead > 0:
                time.sleep(ahead)
    seconds = time.perf_counter() - start
    return ReplayResult(posted, requests, seconds, retries, duplicates, version)


def wait_learned(client: Client, model: str, *, timeout: float = 60.0) -> Metrics:
    """Poll the model's metrics until its lag is 0 (or ``timeout``); return the last metrics."""
    deadline = time.monotonic() + timeout
    metrics = client.metrics(model)
    while metrics.get("lag") not in (0, None) and time.monotonic() < deadline:
        time.sleep(0.2)
        metrics = client.metrics(model)
    return metrics


def find_spambase(explicit: Path | None = None) -> tuple[Path, Path | None]:
    """Spambase's examples and order files: from ``explicit`` (a directory holding
    ``stream.jsonl`` or ``spambase.jsonl.gz``, or the examples file itself), else the copy
    shipped in the package."""
    if explicit is None:
        return SPAMBASE, SPAMBASE_ORDER
    if explicit.is_file():
        directory, stream = explicit.parent, explicit
    else:
        directory = explicit
        found = [p for p in (explicit / "stream.jsonl", explicit / SPAMBASE.name) if p.is_file()]
        if not found:
            raise FileNotFoundError(
                f"Spambase not found in {explicit} (looked for stream.jsonl and "
                f"{SPAMBASE.name}); leave out --data to use the copy shipped with streamlearn"
            )
        stream = found[0]
    orders = [directory / "order_shuffled_seed0.txt", directory / SPAMBASE_ORDER.name]
    return stream, next((o for o in orders if o.is_file()), None)


__all__ = [
    "ReplayResult",
    "apply_order",
    "drop_unknown_keys",
    "find_spambase",
    "read_lines",
    "replay",
    "wait_learned",
]
