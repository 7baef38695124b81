"""Domain errors. Each carries a stable ``code``; the API maps each class to one HTTP status.

Errors that concern one field of the input name it in ``field`` (and, in a batch, ``index``),
so the client is told exactly what was wrong.
"""

from __future__ import annotations


class StreamlearnError(Exception):
    """Base of every error this package raises on purpose."""

    code = "error"

    def __init__(self, message: str, *, field: str | None = None, index: int | None = None):
        super().__init__(message)
        self.message = message
        self.field = field
        self.index = index


class InvalidSpec(StreamlearnError):
    """A model spec (algorithm, hyper-parameters, featurizer, classes) is not valid."""

    code = "invalid_spec"


class SpecConflict(StreamlearnError):
    """A model exists under that name with another spec."""

    code = "spec_conflict"


class ModelNotFound(StreamlearnError):
    code = "model_not_found"


class VersionNotFound(StreamlearnError):
    code = "version_not_found"


class PredictionNotFound(StreamlearnError):
    """A feedback names a prediction id that is unknown or has expired."""

    code = "prediction_not_found"


class InvalidExample(StreamlearnError):
    """An example is not valid for its model (bad number, label, index, length, size)."""

    code = "invalid_example"


class EmptyExample(InvalidExample):
    """An example with neither ``features`` nor ``text``: there is nothing to learn from."""

    code = "empty_example"


class InvalidRequest(StreamlearnError):
    """A query parameter (or another part of a request that is not an example) is invalid."""

    code = "invalid_request"


class MalformedBody(StreamlearnError):
    """The body cannot be parsed at all (bad JSON, NDJSON or svmlight)."""

    code = "malformed_body"


class PayloadTooLarge(StreamlearnError):
    code = "payload_too_large"


class TextTooLong(PayloadTooLarge, InvalidExample):
    """An example's text is longer than ``max_text_chars``: a bad example (a batch drops it
    like any other) that the API answers as too large (413)."""


class BodyTimeout(StreamlearnError):
    """The request body did not arrive within ``body_timeout_s`` (a stalled upload)."""

    code = "body_timeout"


class UnsupportedMediaType(StreamlearnError):
    code = "unsupported_media_type"


class Backpressure(StreamlearnError):
    """The model's unlearned backlog is over ``max_lag``: retry later."""

    code = "lag_exceeded"


class StoreUnavailable(StreamlearnError):
    """Redis cannot be reached."""

    code = "store_unavailable"


class Unauthorized(StreamlearnError):
    code = "unauthorized"


class Forbidden(StreamlearnError):
    code = "forbidden"


class DecodeError(StreamlearnError):
    """Bytes from the store cannot be decoded (unknown format, truncated, corrupt)."""

    code = "decode_error"


class LeaseLost(StreamlearnError):
    """A worker's lease expired or was taken over: its commit must not land."""

    code = "lease_lost"


class CommitConflict(StreamlearnError):
    """The stored cursor is not the one the writer started from."""

    code = "commit_conflict"
