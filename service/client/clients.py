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
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from types import TracebackType
from typing import Any, Self, TypedDict, overload
from urllib.parse import quote

import httpx
import orjson

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


NDJSON = "application/x-ndjson"
SVMLIGHT = "text/plain"
DEFAULT_URL = "http://127.0.0.1:8000"


class ClientError(Exception):
    """The server answered with an error (or could not be reached: ``status`` 0).

    ``code`` is the stable machine-readable code of the server's error body (e.g.
    ``"invalid_example"``, ``"model_not_found"``), ``message`` its human text.
    """

    def __init__(
        self,
        status: int,
        code: str,
        message: str,
        body: JSON = None,
        retry_after: float | None = None,
    ):
        super().__init__(f"{status} {code}: {message}" if status else f"{code}: {message}")
        self.status = status
        self.code = code
        self.message = message
        self.body = body
        self.retry_after = retry_after  # seconds, from a 429/503's Retry-After header


@dataclass(frozen=True, slots=True)
class _Request:
    method: str
    path: str
    json: JSON = None
    content: bytes | None = None
    content_type: str | None = None
    params: Mapping[str, Any] | None = None
    raw: bool = False  # return bytes/text instead of parsed JSON
    wait: float | None = None  # the server may hold the answer this long: read longer

    def kwargs(self) -> dict[str, Any]:
        headers: dict[str, str] = {}
        content = self.content
        if self.json is not None:
            content = orjson.dumps(self.json)
            headers["content-type"] = "application/json"
        if self.content_type:
            headers["content-type"] = self.content_type
        out: dict[str, Any] = {"headers": headers}
        if content is not None:
            out["content"] = content
        if self.params:
            out["params"] = {k: v for k, v in self.params.items() if v is not None}
        if self.wait is not None:
            out["timeout"] = httpx.Timeout(30.0, read=self.wait + 30.0)
        return out


def _model_path(name: str, *rest: str) -> str:
    """The path of a model's resource, the name escaped.

    >>> _model_path("spam", "metrics")
    '/models/spam/metrics'
    """
    if not isinstance(name, str) or not name:
        raise ValueError(f"model name must be a non-empty string, got {name!r}")
    return "/".join(["/models", quote(name, safe=""), *rest])


def _parse(response: httpx.Response, raw: bool) -> JSON:
    """Decode a success body, or raise :class:`ClientError` with the server's error."""
    if response.status_code >= 400:
        code, message, body = "http_error", response.reason_phrase or "error", None
        try:
            body = response.json()
            err = body.get("error", body) if isinstance(body, dict) else {}
            if isinstance(err, dict):
                code = str(err.get("code", code))
                message = str(err.get("message", err.get("detail", message)))
        except ValueError:
            message = response.text[:500] or message
        raise ClientError(response.status_code, code, message, body, _retry_after(response.headers))
    if raw:
        return response.content
    if not response.content:
        return None
    ctype = response.headers.get("content-type", "")
    if "json" in ctype:
        return orjson.loads(response.content)
    return response.text


def _retry_after(headers: httpx.Headers) -> float | None:
    """``Retry-After`` in seconds (the HTTP-date form is not used by this API)."""
    try:
        value = float(headers.get("retry-after", ""))
    except ValueError:
        return None
    return value if value >= 0 else None


def _examples_body(examples: Example | Sequence[Example], ids: Sequence[str] | None) -> JSON:
    """One example as itself; several as ``{"examples": [...]}``; ``ids`` merged in order."""
    if isinstance(examples, Mapping):
        one = dict(examples)
        if ids is not None:
            if len(ids) != 1:
                raise ValueError(f"ids must have 1 entry for one example, got {len(ids)}")
            one["id"] = ids[0]
        return one
    many = [dict(e) for e in examples]
    if ids is not None:
        if len(ids) != len(many):
            raise ValueError(f"ids must have {len(many)} entries (one per example), got {len(ids)}")
        for e, i in zip(many, ids, strict=True):
            e["id"] = i
    return {"examples": many}


MAX_WAIT_S = 30.0


def _wait_param(wait: float | None) -> dict[str, Any]:
    """``{"wait": S}`` for read-your-writes (0 < S <= 30), else nothing.

    >>> _wait_param(5), _wait_param(None)
    ({'wait': 5}, {})
    """
    if wait is None:
        return {}
    if isinstance(wait, bool) or not isinstance(wait, int | float) or not 0 < wait <= MAX_WAIT_S:
        raise ValueError(f"wait must be a number of seconds in (0, 30], got {wait!r}")
    return {"wait": wait}


class _Requests:
    """Builds the request of every endpoint; shared by the sync and async clients."""

    @staticmethod
    def create_model(
        name: str, spec: Mapping[str, Any] | None, fields: Mapping[str, Any]
    ) -> _Request:
        body = {**(spec or {}), **fields}
        return _Request("PUT", _model_path(name), json=body)

    @staticmethod
    def learn(
        name: str,
        examples: Example | Sequence[Example],
        ids: Sequence[str] | None,
        wait: float | None = None,
    ) -> _Request:
        return _Request(
            "POST",
            _model_path(name, "examples"),
            json=_examples_body(examples, ids),
            params=_wait_param(wait),
            wait=wait,
        )

    @staticmethod
    def learn_raw(name: str, data: bytes | str, fmt: str, wait: float | None = None) -> _Request:
        if fmt not in ("ndjson", "svmlight"):
            raise ValueError(f"fmt must be 'ndjson' or 'svmlight', got {fmt!r}")
        content = data.encode() if isinstance(data, str) else data
        ctype = NDJSON if fmt == "ndjson" else SVMLIGHT
        params = {"format": "svmlight"} if fmt == "svmlight" else {}
        return _Request(
            "POST",
            _model_path(name, "examples"),
            content=content,
            content_type=ctype,
            params={**params, **_wait_param(wait)} or None,
            wait=wait,
        )

    @staticmethod
    def predict(
        name: str, examples: Example | Sequence[Example], feedback: bool = True
    ) -> _Request:
        params = None if feedback else {"feedback": "false"}
        body = _examples_body(examples, None)
        return _Request("POST", _model_path(name, "predict"), json=body, params=params)

    @staticmethod
    def feedback(name: str, prediction_id: str, label: Any) -> _Request:
        body = {"prediction_id": prediction_id, "label": label}
        return _Request("POST", _model_path(name, "feedback"), json=body)

    @staticmethod
    def version(name: str, version: int, fmt: str) -> _Request:
        if fmt not in ("json", "npy"):
            raise ValueError(f"fmt must be 'json' or 'npy', got {fmt!r}")
        path = _model_path(name, "versions", str(int(version)))
        return _Request("GET", path, params={"format": fmt}, raw=fmt == "npy")

    @staticmethod
    def dead_letters(name: str, limit: int) -> _Request:
        return _Request("GET", _model_path(name, "dead-letters"), params={"limit": int(limit)})

    @staticmethod
    def set_version(name: str, action: str, version: int) -> _Request:
        if isinstance(version, bool) or not isinstance(version, int) or version < 0:
            raise ValueError(f"version must be an integer >= 0, got {version!r}")
        return _Request("POST", _model_path(name, action), json={"version": version})


def _headers(api_key: str | None) -> dict[str, str]:
    headers = {"user-agent": "streamlearn-client", "accept": "application/json"}
    if api_key:
        headers["authorization"] = f"Bearer {api_key}"
        headers["x-api-key"] = api_key
    return headers


def _unreachable(base_url: str, exc: httpx.TransportError) -> ClientError:
    return ClientError(0, "unreachable", f"cannot reach {base_url}: {exc}")


class Client:
    """Synchronous client. Use as a context manager, or call :meth:`close`."""

    def __init__(
        self,
        base_url: str = DEFAULT_URL,
        *,
        api_key: str | None = None,
        timeout: float = 30.0,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self._http = httpx.Client(
            base_url=self.base_url, headers=_headers(api_key), timeout=timeout, transport=transport
        )

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self, et: type[BaseException] | None, ev: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def close(self) -> None:
        self._http.close()

    def _send(self, req: _Request) -> JSON:
        try:
            response = self._http.request(req.method, req.path, **req.kwargs())
        except httpx.TransportError as e:
            raise _unreachable(self.base_url, e) from e
        return _parse(response, req.raw)

    # --- models ---------------------------------------------------------------------------
    def create_model(
        self, name: str, spec: Mapping[str, Any] | None = None, **fields: Any
    ) -> ModelInfo:
        """Create model ``name`` (or describe it, when the same spec exists already)."""
        return self._send(_Requests.create_model(name, spec, fields))

    def get_model(self, name: str) -> ModelInfo:
        return self._send(_Request("GET", _model_path(name)))

    def list_models(self) -> ModelList:
        return self._send(_Request("GET", "/models"))

    def delete_model(self, name: str) -> JSON:
        return self._send(_Request("DELETE", _model_path(name)))

    # --- data -----------------------------------------------------------------------------
    def learn(
        self,
        name: str,
        examples: Example | Sequence[Example],
        ids: Sequence[str] | None = None,
        *,
        wait: float | None = None,
    ) -> Accepted:
        """Post one example or a list; returns ``{"accepted": n, "duplicates": d}`` (and
        ``ids`` when given). Learning is asynchronous: with ``wait`` (seconds, at most 30)
        the answer comes once a version covering these examples is served, with that
        ``version`` (no ``version`` if the time ran out first)."""
        return self._send(_Requests.learn(name, examples, ids, wait))

    def learn_raw(
        self, name: str, data: bytes | str, fmt: str = "ndjson", *, wait: float | None = None
    ) -> Accepted:
        """Post an NDJSON or svmlight body as it is (``wait`` as in :meth:`learn`)."""
        return self._send(_Requests.learn_raw(name, data, fmt, wait))

    @overload
    def predict(self, name: str, examples: Example, feedback: bool = True) -> Prediction: ...
    @overload
    def predict(
        self, name: str, examples: Sequence[Example], feedback: bool = True
    ) -> list[Prediction]: ...
    def predict(
        self, name: str, examples: Example | Sequence[Example], feedback: bool = True
    ) -> Prediction | list[Prediction]:
        """One example in, one answer out; a list in, a list out."""
        out = self._send(_Requests.predict(name, examples, feedback))
        return _unwrap_predictions(examples, out)

    def predict_text(self, name: str, text: str) -> Prediction:
        return self._send(_Request("GET", _model_path(name, "predict"), params={"text": text}))

    def feedback(self, name: str, prediction_id: str, label: Any) -> FeedbackAccepted:
        return self._send(_Requests.feedback(name, prediction_id, label))

    # --- monitoring and versions ----------------------------------------------------------
    def metrics(self, name: str) -> Metrics:
        return self._send(_Request("GET", _model_path(name, "metrics")))

    def history(self, name: str) -> History:
        return self._send(_Request("GET", _model_path(name, "history")))

    def versions(self, name: str) -> VersionList:
        return self._send(_Request("GET", _model_path(name, "versions")))

    def version(self, name: str, version: int, fmt: str = "json") -> JSON:
        return self._send(_Requests.version(name, version, fmt))

    def rollback(self, name: str, version: int) -> JSON:
        return self._send(_Requests.set_version(name, "rollback", version))

    def pin(self, name: str, version: int) -> JSON:
        return self._send(_Requests.set_version(name, "pin", version))

    def unpin(self, name: str) -> VersionList:
        """Release a pin: the served head follows the newest version again."""
        return self._send(_Request("DELETE", _model_path(name, "pin")))

    def dead_letters(self, name: str, limit: int = 100) -> DeadLetters:
        """The newest dead letters (entries the worker could not learn), with the reasons."""
        return self._send(_Requests.dead_letters(name, limit))

    def healthz(self) -> JSON:
        return self._send(_Request("GET", "/healthz"))

    def readyz(self) -> JSON:
        return self._send(_Request("GET", "/readyz"))


class AsyncClient:
    """Asynchronous client with the same methods as :class:`Client`, awaited."""

    def __init__(
        self,
        base_url: str = DEFAULT_URL,
        *,
        api_key: str | None = None,
        timeout: float = 30.0,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self._http = httpx.AsyncClient(
            base_url=self.base_url, headers=_headers(api_key), timeout=timeout, transport=transport
        )

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self, et: type[BaseException] | None, ev: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        await self._http.aclose()

    async def _send(self, req: _Request) -> JSON:
        try:
            response = await self._http.request(req.method, req.path, **req.kwargs())
        except httpx.TransportError as e:
            raise _unreachable(self.base_url, e) from e
        return _parse(response, req.raw)

    async def create_model(
        self, name: str, spec: Mapping[str, Any] | None = None, **fields: Any
    ) -> ModelInfo:
        return await self._send(_Requests.create_model(name, spec, fields))

    async def get_model(self, name: str) -> ModelInfo:
        return await self._send(_Request("GET", _model_path(name)))

    async def list_models(self) -> ModelList:
        return await self._send(_Request("GET", "/models"))

    async def delete_model(self, name: str) -> JSON:
        return await self._send(_Request("DELETE", _model_path(name)))

    async def learn(
        self,
        name: str,
        examples: Example | Sequence[Example],
        ids: Sequence[str] | None = None,
        *,
        wait: float | None = None,
    ) -> Accepted:
        return await self._send(_Requests.learn(name, examples, ids, wait))

    async def learn_raw(
        self, name: str, data: bytes | str, fmt: str = "ndjson", *, wait: float | None = None
    ) -> Accepted:
        return await self._send(_Requests.learn_raw(name, data, fmt, wait))

    @overload
    async def predict(self, name: str, examples: Example, feedback: bool = True) -> Prediction: ...
    @overload
    async def predict(
        self, name: str, examples: Sequence[Example], feedback: bool = True
    ) -> list[Prediction]: ...
    async def predict(
        self, name: str, examples: Example | Sequence[Example], feedback: bool = True
    ) -> Prediction | list[Prediction]:
        out = await self._send(_Requests.predict(name, examples, feedback))
        return _unwrap_predictions(examples, out)

    async def predict_text(self, name: str, text: str) -> Prediction:
        return await self._send(
            _Request("GET", _model_path(name, "predict"), params={"text": text})
        )

    async def feedback(self, name: str, prediction_id: str, label: Any) -> FeedbackAccepted:
        return await self._send(_Requests.feedback(name, prediction_id, label))

    async def metrics(self, name: str) -> Metrics:
        return await self._send(_Request("GET", _model_path(name, "metrics")))

    async def history(self, name: str) -> History:
        return await self._send(_Request("GET", _model_path(name, "history")))

    async def versions(self, name: str) -> VersionList:
        return await self._send(_Request("GET", _model_path(name, "versions")))

    async def version(self, name: str, version: int, fmt: str = "json") -> JSON:
        return await self._send(_Requests.version(name, version, fmt))

    async def rollback(self, name: str, version: int) -> JSON:
        return await self._send(_Requests.set_version(name, "rollback", version))

    async def pin(self, name: str, version: int) -> JSON:
        return await self._send(_Requests.set_version(name, "pin", version))

    async def unpin(self, name: str) -> VersionList:
        return await self._send(_Request("DELETE", _model_path(name, "pin")))

    async def dead_letters(self, name: str, limit: int = 100) -> DeadLetters:
        return await self._send(_Requests.dead_letters(name, limit))

    async def healthz(self) -> JSON:
        return await self._send(_Request("GET", "/healthz"))

    async def readyz(self) -> JSON:
        return await self._send(_Request("GET", "/readyz"))


def _unwrap_predictions(examples: Example | Sequence[Example], out: JSON) -> JSON:
    """A list request may be answered as ``{"predictions": [...]}``: hand back the list."""
    if not isinstance(examples, Mapping) and isinstance(out, dict):
        for key in ("predictions", "results"):
            if isinstance(out.get(key), list):
                return out[key]
    return out


__all__ = [
    "DEFAULT_URL",
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
