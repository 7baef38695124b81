"""The request each client call makes and the reading of its answer: one builder and one
parser shared by :class:`~service.client.Client` and :class:`~service.client.AsyncClient`, so
the two cannot drift apart."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

import httpx
import orjson

from service.client.shapes import JSON, Example

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
class Call:
    """One HTTP request: method, path, body, query; :meth:`kwargs` for ``httpx``."""

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


def parse(response: httpx.Response, raw: bool) -> JSON:
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


class Calls:
    """The request of every endpoint; the sync and async clients only send them."""

    @staticmethod
    def get_model(name: str) -> Call:
        return Call("GET", _model_path(name))

    @staticmethod
    def list_models() -> Call:
        return Call("GET", "/models")

    @staticmethod
    def delete_model(name: str) -> Call:
        return Call("DELETE", _model_path(name))

    @staticmethod
    def get(name: str, resource: str) -> Call:
        """``GET /models/{name}/{resource}`` (metrics, history, versions)."""
        return Call("GET", _model_path(name, resource))

    @staticmethod
    def predict_text(name: str, text: str) -> Call:
        return Call("GET", _model_path(name, "predict"), params={"text": text})

    @staticmethod
    def unpin(name: str) -> Call:
        return Call("DELETE", _model_path(name, "pin"))

    @staticmethod
    def probe(path: str) -> Call:
        """``/healthz`` or ``/readyz``."""
        return Call("GET", path)

    @staticmethod
    def create_model(name: str, spec: Mapping[str, Any] | None, fields: Mapping[str, Any]) -> Call:
        body = {**(spec or {}), **fields}
        return Call("PUT", _model_path(name), json=body)

    @staticmethod
    def learn(
        name: str,
        examples: Example | Sequence[Example],
        ids: Sequence[str] | None,
        wait: float | None = None,
    ) -> Call:
        return Call(
            "POST",
            _model_path(name, "examples"),
            json=_examples_body(examples, ids),
            params=_wait_param(wait),
            wait=wait,
        )

    @staticmethod
    def learn_raw(name: str, data: bytes | str, fmt: str, wait: float | None = None) -> Call:
        if fmt not in ("ndjson", "svmlight"):
            raise ValueError(f"fmt must be 'ndjson' or 'svmlight', got {fmt!r}")
        content = data.encode() if isinstance(data, str) else data
        ctype = NDJSON if fmt == "ndjson" else SVMLIGHT
        params = {"format": "svmlight"} if fmt == "svmlight" else {}
        return Call(
            "POST",
            _model_path(name, "examples"),
            content=content,
            content_type=ctype,
            params={**params, **_wait_param(wait)} or None,
            wait=wait,
        )

    @staticmethod
    def predict(name: str, examples: Example | Sequence[Example], feedback: bool = True) -> Call:
        params = None if feedback else {"feedback": "false"}
        body = _examples_body(examples, None)
        return Call("POST", _model_path(name, "predict"), json=body, params=params)

    @staticmethod
    def feedback(name: str, prediction_id: str, label: Any) -> Call:
        body = {"prediction_id": prediction_id, "label": label}
        return Call("POST", _model_path(name, "feedback"), json=body)

    @staticmethod
    def version(name: str, version: int, fmt: str) -> Call:
        if fmt not in ("json", "npy"):
            raise ValueError(f"fmt must be 'json' or 'npy', got {fmt!r}")
        path = _model_path(name, "versions", str(int(version)))
        return Call("GET", path, params={"format": fmt}, raw=fmt == "npy")

    @staticmethod
    def dead_letters(name: str, limit: int) -> Call:
        return Call("GET", _model_path(name, "dead-letters"), params={"limit": int(limit)})

    @staticmethod
    def set_version(name: str, action: str, version: int) -> Call:
        if isinstance(version, bool) or not isinstance(version, int) or version < 0:
            raise ValueError(f"version must be an integer >= 0, got {version!r}")
        return Call("POST", _model_path(name, action), json={"version": version})


def headers(api_key: str | None) -> dict[str, str]:
    headers = {"user-agent": "streamlearn-client", "accept": "application/json"}
    if api_key:
        headers["authorization"] = f"Bearer {api_key}"
        headers["x-api-key"] = api_key
    return headers


def unreachable(base_url: str, exc: httpx.TransportError) -> ClientError:
    return ClientError(0, "unreachable", f"cannot reach {base_url}: {exc}")


def unwrap_predictions(examples: Example | Sequence[Example], out: JSON) -> JSON:
    """A list request may be answered as ``{"predictions": [...]}``: hand back the list."""
    if not isinstance(examples, Mapping) and isinstance(out, dict):
        for key in ("predictions", "results"):
            if isinstance(out.get(key), list):
                return out[key]
    return out
