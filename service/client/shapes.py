"""What the server answers (docs/api.md), as the client's return types; ``total=False``
where fields may be absent."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypedDict

Example = Mapping[str, Any]
JSON = Any


# --- what the server answers (docs/api.md); ``total=False`` where fields may be absent -------
class Accepted(TypedDict, total=False):
    accepted: int
    duplicates: int  # examples whose id was already accepted (learned once)
    ids: list[str | None]  # only when ids were sent
    version: int  # with wait: the first version covering the batch, once served


class Prediction(TypedDict):
    label: Any
    score: float
    margin: float
    version: int
    prediction_id: str | None  # None when nothing was kept for feedback


class Drift(TypedDict):
    detected: bool
    detections: int
    last_at_examples: int | None
    last_at: float | None


class Metrics(TypedDict):
    examples_seen: int
    mistakes: int
    updates: int
    mistake_rate: float
    rolling_mistake_rate: float | None
    version: int
    lag: int
    last_update: float | None
    drift: Drift


class HistoryPoint(TypedDict, total=False):
    examples_seen: int
    mistakes: int
    updates: int
    time: float
    version: int | None
    drift: bool


class History(TypedDict):
    points: list[HistoryPoint]


class VersionMeta(TypedDict, total=False):
    version: int
    examples_seen: int | None
    mistakes: int | None
    updates: int | None
    time: float | None
    pinned: bool
    head: bool


class VersionList(TypedDict):
    head: int
    versions: list[VersionMeta]


class ModelInfo(TypedDict):
    name: str
    spec: dict[str, Any]
    feedback_ttl: int
    version: int


class ModelList(TypedDict):
    models: list[str]


class DeadLetter(TypedDict):
    id: str
    entry: str | None
    reason: str | None
    bytes: int
    time: float


class DeadLetters(TypedDict):
    dead_letters: list[DeadLetter]


class FeedbackAccepted(TypedDict):
    accepted: int
    prediction_id: str
