"""A small typed Python client for the streamlearn HTTP API (sync :class:`Client`, async
:class:`AsyncClient`).

Both classes share one request builder and one response parser, so they cannot drift apart:
the only difference is whether ``httpx`` is awaited. Every non-2xx answer becomes a
:class:`ClientError` carrying the server's ``{"error": {"code", "message"}}``, so callers can
branch on ``err.code`` instead of parsing text.

Example (against a running ``streamlearn serve``)::

    from service.client import Client

    with Client("http://127.0.0.1:8000") as c:
        c.create_model("spam", {"preset": "spam", "classes": ["ham", "spam"]})
        c.learn("spam", [{"text": "win money now", "label": "spam"},
                         {"text": "lunch at noon?", "label": "ham"}])
        print(c.predict("spam", {"text": "free money"})["label"])
        print(c.metrics("spam")["mistakes"])

Modules: :mod:`~service.client.clients` (the two clients), :mod:`~service.client.calls` (the
request of each endpoint, :class:`ClientError`), :mod:`~service.client.shapes` (the answers'
types).
"""

from service.client.calls import DEFAULT_URL, MAX_WAIT_S, ClientError
from service.client.clients import AsyncClient, Client
from service.client.shapes import (
    Accepted,
    DeadLetter,
    DeadLetters,
    Drift,
    FeedbackAccepted,
    History,
    HistoryPoint,
    Metrics,
    ModelInfo,
    ModelList,
    Prediction,
    VersionList,
    VersionMeta,
)

__all__ = [
    "DEFAULT_URL",
    "MAX_WAIT_S",
    "Accepted",
    "AsyncClient",
    "Client",
    "ClientError",
    "DeadLetter",
    "DeadLetters",
    "Drift",
    "FeedbackAccepted",
    "History",
    "HistoryPoint",
    "Metrics",
    "ModelInfo",
    "ModelList",
    "Prediction",
    "VersionList",
    "VersionMeta",
]
