"""Ingest: one example, a batch, NDJSON or svmlight → 202; nothing of a bad batch is appended."""

from __future__ import annotations

import asyncio
import contextlib
import math
from typing import Any

from fastapi import APIRouter, Request

from service.api.backend import Backend
from service.api.batching import read_json
from service.api.cache import ModelCache
from service.api.compute import run_cpu
from service.api.deps import hot, hot_parameters
from service.api.parsing import body_format, parse_examples
from service.api.responses import FastJSON
from service.api.routes.models import ERRORS
from service.api.schemas import Accepted
from service.errors import InvalidRequest

router = APIRouter(prefix="/models", tags=["examples"])

INGEST_BODY: dict[str, Any] = {
    "requestBody": {
        "required": True,
        "content": {
            "application/json": {
                "schema": {
                    "oneOf": [
                        {"$ref": "#/components/schemas/Example"},
                        {"$ref": "#/components/schemas/ExampleBatch"},
                    ]
                },
                "example": {"examples": [{"text": "win money now", "label": 1, "id": "m-1"}]},
            },
            "application/x-ndjson": {"schema": {"type": "string"}},
            "text/x-svmlight": {"schema": {"type": "string"}},
        },
    }
}


MAX_WAIT_S = 30.0
WAIT_PARAMETER: dict[str, Any] = {
    "name": "wait",
    "in": "query",
    "required": False,
    "schema": {"type": "number", "exclusiveMinimum": 0, "maximum": MAX_WAIT_S},
    "description": "read-your-writes: wait up to this many seconds until a version that "
    "covers the batch is served; 200 with that `version`, or 202 without it when the time "
    "runs out",
}
POLL_S = 0.25  # re-check this often too: pub/sub messages can be lost


def wait_seconds(raw: str | None) -> float | None:
    """The ``wait`` query parameter: None, or seconds in (0, 30].

    >>> wait_seconds("2.5"), wait_seconds(None)
    (2.5, None)
    >>> wait_seconds("31")
    Traceback (most recent call last):
    ...
    service.errors.InvalidRequest: wait must be a number of seconds in (0, 30], got '31'
    """
    if raw is None:
        return None
    try:
        seconds = float(raw)
    except ValueError:
        seconds = math.nan
    if not 0 < seconds <= MAX_WAIT_S:  # NaN fails too
        raise InvalidRequest(
            f"wait must be a number of seconds in (0, {MAX_WAIT_S:g}], got {raw[:40]!r}",
            field="wait",
        )
    return seconds


async def wait_until_served(
    cache: ModelCache, backend: Backend, m: str, entry_id: str, seconds: float
) -> int | None:
    """The first version covering ``entry_id``, once it is served (and this process's cache
    holds it or a later one); None when ``seconds`` run out first. Woken by the model's
    events channel (through the cache's listener), with a periodic re-check."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + seconds
    while True:
        announced = cache.announcement(m)
        version = await backend.covering_version(m, entry_id)
        if version is not None:
            await cache.refresh(m)
            return version
        left = deadline - loop.time()
        if left <= 0:
            return None
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(announced.wait(), min(left, POLL_S))


def answer(n: int, duplicates: int, ids: list[str | None]) -> dict[str, Any]:
    """The ingest answer; ``ids`` only when the request gave some."""
    out: dict[str, Any] = {"accepted": n, "duplicates": duplicates}
    if any(i is not None for i in ids):
        out["ids"] = ids
    return out


@router.post(
    "/{m}/examples",
    status_code=202,
    response_model=Accepted,
    responses={
        **ERRORS,
        200: {"model": Accepted, "description": "with ?wait: learned, and served"},
        429: {"model": Accepted},
    },
    openapi_extra={
        **INGEST_BODY,
        "parameters": [*hot_parameters("json|ndjson|svmlight"), WAIT_PARAMETER],
    },
)
async def post_examples(request: Request) -> FastJSON:
    """Accept labeled examples for learning (202; learned asynchronously). With ``?wait=S``,
    200 with the version that first covers them once it is served."""
    ctx = hot(request, "learn")  # scope check; parameters read without FastAPI's validation
    state, backend, cache, m = ctx.state, ctx.backend, ctx.cache, ctx.m
    kind = body_format(request.headers.get("content-type"), ctx.format)
    wait = wait_seconds(request.query_params.get("wait"))
    served = await cache.get(m)  # 404 before reading a body for an unknown model
    raw = await request.body()
    max_batch = state.settings.max_batch
    fast = await run_cpu(
        len(raw), read_json, served.featurizer, raw, kind, labels=True, max_batch=max_batch
    )
    if fast is not None:  # a big JSON batch, parsed and featurized in one compiled pass
        batch, ids = fast
        dropped, entry = await ctx.batcher.ingest_batch(m, batch, ids)
    else:  # parse for shape, then featurize (with concurrent small requests of this model)
        parsed = await run_cpu(len(raw), parse_examples, raw, kind, max_batch=max_batch)
        ids = parsed.ids
        dropped, entry = await ctx.batcher.ingest(
            m, served.featurizer, parsed.examples, ids, len(raw)
        )
    out = answer(len(ids), dropped, ids)
    if wait is None:
        return FastJSON(out, status_code=202)
    covers = entry or await backend.appended_up_to(m)  # all duplicates: what came before
    version = await wait_until_served(cache, backend, m, covers, wait)
    if version is None:
        return FastJSON(out, status_code=202)
    return FastJSON({**out, "version": version}, status_code=200)
