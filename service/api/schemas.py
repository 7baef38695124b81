"""Response (and small request) models: they document the API in OpenAPI.

Ingest and predict bodies are parsed by :mod:`service.api.parsing` (orjson, vectorised
validation), not by pydantic; their schemas here only document them.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

Label = str | int | float | bool


class ErrorBody(BaseModel):
    code: str
    message: str
    field: str | None = None
    index: int | None = None


class ErrorResponse(BaseModel):
    error: ErrorBody


class Example(BaseModel):
    """One example (documentation only: bodies are validated by the model's featurizer)."""

    model_config = ConfigDict(extra="allow")
    features: dict[str, float] | list[float] | None = None
    text: str | None = None
    label: Label | None = None
    id: str | None = None
    meta: Any = Field(default=None, description="any JSON, ignored by learning")


class ExampleBatch(BaseModel):
    examples: list[Example]


class Accepted(BaseModel):
    accepted: int = Field(description="examples accepted (repeated ids count, learned once)")
    duplicates: int = Field(
        description="of them, examples whose id was already accepted (not learned again)"
    )
    ids: list[str | None] | None = Field(
        default=None,
        description="each example's id as given (null where none); only when the request gave ids",
    )
    version: int | None = Field(
        default=None, description="with ?wait: the first version that covers these examples"
    )


class Prediction(BaseModel):
    label: Label | None
    score: float = Field(ge=0.0, le=1.0, description="P(positive) binary; P(label) multi-class")
    margin: float
    version: int
    prediction_id: str | None = Field(
        description="for feedback; null when nothing was kept (the model's feedback_ttl is 0, "
        "or the request said ?feedback=false)"
    )


class Predictions(BaseModel):
    predictions: list[Prediction]


class ModelInfo(BaseModel):
    name: str
    spec: dict[str, Any]
    feedback_ttl: int
    version: int


class ModelList(BaseModel):
    models: list[str]


class Feedback(BaseModel):
    model_config = ConfigDict(extra="forbid")
    prediction_id: str = Field(min_length=1, max_length=128)
    label: Label


class FeedbackAccepted(BaseModel):
    accepted: int
    prediction_id: str


class VersionRef(BaseModel):
    model_config = ConfigDict(extra="forbid")
    version: int = Field(ge=1)


class Drift(BaseModel):
    detected: bool = Field(description="a change was detected in the latest window")
    detections: int
    last_at_examples: int | None = None
    last_at: float | None = None


class ModelMetrics(BaseModel):
    examples_seen: int
    mistakes: int
    updates: int
    mistake_rate: float
    rolling_mistake_rate: float | None
    auc: float | None = Field(
        None, description="progressive ROC AUC of the served scores over every example"
    )
    auc_error_bound: float | None = Field(
        None, description="a proven bound on |auc − exact AUC| (auc is kept in a histogram)"
    )
    rolling_auc: float | None = Field(
        None, description="exact ROC AUC over the last 1,000 examples"
    )
    log_loss: float | None = Field(
        None, description="mean log loss of the served score (nats, p clipped to [1e-15, 1-1e-15])"
    )
    rolling_log_loss: float | None = Field(
        None, description="log loss over the last 1,000 examples"
    )
    members: list[dict[str, Any]] | None = Field(
        None,
        description="ensemble models: each member's algorithm, params, weight, examples_seen, "
        "mistakes and log_loss",
    )
    version: int
    lag: int
    last_update: float | None
    drift: Drift


class HistoryPoint(BaseModel):
    examples_seen: int
    mistakes: int
    updates: int
    time: float
    version: int | None = None
    drift: bool = False
    auc: float | None = None
    rolling_auc: float | None = None
    log_loss: float | None = None
    rolling_log_loss: float | None = None


class History(BaseModel):
    points: list[HistoryPoint]


class VersionMeta(BaseModel):
    model_config = ConfigDict(extra="allow")
    version: int
    examples_seen: int | None = None
    mistakes: int | None = None
    updates: int | None = None
    time: float | None = None
    pinned: bool = False
    head: bool = False


class VersionList(BaseModel):
    head: int
    versions: list[VersionMeta]


class Weights(BaseModel):
    shape: list[int]
    indices: list[int] = Field(description="flat indices of the non-zero weights")
    values: list[float]
    bias: float | list[float]
    link: str


class VersionDetail(VersionMeta):
    weights: Weights | None = None


class DeadLetter(BaseModel):
    id: str = Field(description="id of the dead letter in sl:{m}:dead")
    entry: str | None = Field(description="the examples-stream entry that was set aside")
    reason: str | None = Field(description="why it could not be learned")
    bytes: int = Field(description="size of the entry's payload")
    time: float = Field(description="when it was set aside (Unix seconds)")


class DeadLetters(BaseModel):
    dead_letters: list[DeadLetter]


class Health(BaseModel):
    status: str


class Ready(BaseModel):
    status: str
    redis: bool
    workers: int
