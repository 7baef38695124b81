"""Exception handlers: every error the API answers has the body ``{"error": {"code", "message"}}``.

Domain errors (``service.errors``) map to one status each, here and nowhere else, so route
handlers just raise. Framework errors (unmatched routes, 405, request validation) are
rewritten into the same shape, and a catch-all answers 500 only for genuine bugs, after
logging them.
"""

from __future__ import annotations

import logging
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from starlette.exceptions import HTTPException as StarletteHTTPException

from service import errors as e
from service.api.responses import FastJSON

log = logging.getLogger("streamlearn.api")

STATUS: dict[type[e.StreamlearnError], int] = {
    e.MalformedBody: 400,
    e.Unauthorized: 401,
    e.Forbidden: 403,
    e.ModelNotFound: 404,
    e.VersionNotFound: 404,
    e.PredictionNotFound: 404,
    e.SpecConflict: 409,
    e.CommitConflict: 409,
    e.BodyTimeout: 408,
    e.PayloadTooLarge: 413,
    e.UnsupportedMediaType: 415,
    e.InvalidSpec: 422,
    e.InvalidExample: 422,
    e.InvalidRequest: 422,
    e.Backpressure: 429,
    e.StoreUnavailable: 503,
}

RETRY_AFTER_S = {429: "1", 503: "1"}

HTTP_CODES = {
    400: "bad_request",
    401: "unauthorized",
    403: "forbidden",
    404: "not_found",
    405: "method_not_allowed",
    406: "not_acceptable",
    408: "body_timeout",
    413: "payload_too_large",
    415: "unsupported_media_type",
}

# Connection failures of the Redis client, recognised by name: service/api may not import
# redis, and the store should already have turned them into StoreUnavailable.
_REDIS_DOWN = {"ConnectionError", "TimeoutError", "BusyLoadingError", "ClusterDownError"}


def status_of(exc: e.StreamlearnError) -> int:
    for cls in type(exc).__mro__:
        if cls in STATUS:
            return STATUS[cls]
    return 500


def located(message: str, field: str | None, index: int | None) -> str:
    """Every error message has one form: what is wrong, then ``(field 'F', index I)`` with
    whichever of the two is known.

    >>> located("label 7 is not one of the classes [-1, 1]", "label", 2)
    "label 7 is not one of the classes [-1, 1] (field 'label', index 2)"
    >>> located("no route for GET /x", None, None)
    'no route for GET /x'
    """
    where = []
    if field:
        where.append(f"field {field!r}")
    if index is not None:
        where.append(f"index {index}")
    return f"{message} ({', '.join(where)})" if where else message


def describe(exc: e.StreamlearnError) -> str:
    """The message, with the field and batch index named when the error carries them."""
    return located(exc.message, exc.field, exc.index)


def error_response(
    status: int,
    code: str,
    message: str,
    *,
    field: str | None = None,
    index: int | None = None,
    headers: dict[str, str] | None = None,
) -> FastJSON:
    body: dict[str, Any] = {"code": code, "message": message}
    if field is not None:
        body["field"] = field
    if index is not None:
        body["index"] = index
    hdrs = dict(headers or {})
    if status in RETRY_AFTER_S:
        hdrs.setdefault("Retry-After", RETRY_AFTER_S[status])
    if status == 401:
        hdrs.setdefault("WWW-Authenticate", "Bearer")
    if status == 408:  # the rest of the body may still come: do not read it as a request
        hdrs.setdefault("Connection", "close")
    return FastJSON({"error": body}, status_code=status, headers=hdrs)


def _outage(request: Request, reason: str) -> None:
    """An outage is logged once, when it starts (and once when it ends, by the cache check):
    not a line per failed request, and never a traceback."""
    state = getattr(request.app.state, "sl", None)
    if state is not None:
        state.outage.went_down(reason)
    else:  # pragma: no cover - an app without our state
        log.warning("Redis unreachable: %s", reason)


async def domain_error(request: Request, exc: Exception) -> FastJSON:
    assert isinstance(exc, e.StreamlearnError)
    status = status_of(exc)
    if isinstance(exc, e.StoreUnavailable):
        _outage(request, exc.message)
    elif status >= 500:
        log.error("store error: %s", exc.message, exc_info=exc)
    return error_response(status, exc.code, describe(exc), field=exc.field, index=exc.index)


def _loc(loc: Any) -> str:
    parts = [str(p) for p in loc if p not in ("body", "path", "query", "header")] or ["body"]
    out = parts[0]
    for p in parts[1:]:
        out += f"[{p}]" if p.isdigit() else f".{p}"
    return out


async def validation_error(_: Request, exc: Exception) -> FastJSON:
    assert isinstance(exc, RequestValidationError)
    errs = list(exc.errors())
    if any(err.get("type") == "json_invalid" for err in errs):
        return error_response(400, e.MalformedBody.code, "body is not valid JSON", field="body")
    first = errs[0] if errs else {"loc": ("body",), "msg": "invalid request"}
    field = _loc(first.get("loc", ("body",)))
    index = next((p for p in first.get("loc", ()) if isinstance(p, int)), None)
    text = str(first.get("msg", "invalid"))
    message = text[:1].lower() + text[1:]
    if "input" in first and not isinstance(first["input"], dict | list):
        got = repr(first["input"])
        message += f", got {got if len(got) <= 80 else got[:77] + '...'}"
    return error_response(
        422, "invalid_request", located(message, field, index), field=field, index=index
    )


async def http_error(request: Request, exc: Exception) -> FastJSON:
    assert isinstance(exc, StarletteHTTPException)
    status = exc.status_code
    if status == 404 and exc.detail == "Not Found":
        message = f"no route for {request.method} {request.url.path}"
    elif status == 405:
        message = f"method {request.method} not allowed on {request.url.path}"
    else:
        message = str(exc.detail)
    headers = dict(exc.headers or {})
    return error_response(status, HTTP_CODES.get(status, "http_error"), message, headers=headers)


async def unexpected_error(request: Request, exc: Exception) -> FastJSON:
    """Last resort: a Redis outage the store did not translate is a 503; anything else a bug."""
    name = type(exc).__name__
    if type(exc).__module__.startswith("redis") and name in _REDIS_DOWN:
        _outage(request, name)
        return error_response(503, e.StoreUnavailable.code, "the store (Redis) is unreachable")
    log.exception("unhandled error on %s %s", request.method, request.url.path, exc_info=exc)
    return error_response(500, "internal_error", "internal server error (logged)")


def install(app: FastAPI) -> None:
    """Register every handler on ``app``."""
    app.add_exception_handler(e.StreamlearnError, domain_error)
    app.add_exception_handler(RequestValidationError, validation_error)
    app.add_exception_handler(StarletteHTTPException, http_error)
    app.add_exception_handler(Exception, unexpected_error)
