"""The streamlearn HTTP client (see :mod:`service.client.clients`)."""

from service.client.clients import (
    DEFAULT_URL,
    MAX_WAIT_S,
    Accepted,
    AsyncClient,
    Client,
    ClientError,
    FeedbackAccepted,
    History,
    Metrics,
    ModelInfo,
    ModelList,
    Prediction,
    VersionList,
)

__all__ = [
    "DEFAULT_URL",
    "MAX_WAIT_S",
    "Accepted",
    "AsyncClient",
    "Client",
    "ClientError",
    "FeedbackAccepted",
    "History",
    "Metrics",
    "ModelInfo",
    "ModelList",
    "Prediction",
    "VersionList",
]
