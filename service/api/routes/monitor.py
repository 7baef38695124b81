"""Monitoring: a model's metrics and history (with drift), and the Prometheus exposition."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Query
from fastapi.responses import Response

from service.api.backend import Backend
from service.api.deps import BackendDep, Read, StateDep
from service.api.drift import DriftTracker
from service.api.prom import model_exposition
from service.api.responses import FastJSON
from service.api.routes.models import ERRORS, ModelName
from service.api.schemas import History, ModelMetrics

router = APIRouter(tags=["monitor"])

#: Progressive quality of the served scores (binary models; null when undefined).
QUALITY = ("auc", "auc_error_bound", "rolling_auc", "log_loss", "rolling_log_loss")

ROLLING_POINTS = 10  # the rolling mistake rate spans the last 10 history intervals


async def update_drift(m: str, backend: Backend, trackers: dict[str, DriftTracker]) -> DriftTracker:
    """Feed the model's ADWIN with the history points it has not seen yet."""
    tracker = trackers.get(m) or DriftTracker()
    points = await backend.history_since(m, tracker.last_id)  # 404 first: keep nothing
    for marker, p in points:
        tracker.feed(int(p["examples_seen"]), int(p["mistakes"]), float(p["time"]))
        tracker.last_id = marker
    trackers[m] = tracker
    return tracker


def rolling_rate(points: list[dict[str, Any]], seen: int, mistakes: int) -> float | None:
    if not points:
        return None
    first = points[0]
    d = seen - int(first["examples_seen"])
    if d <= 0:
        return None
    return max(0.0, (mistakes - int(first["mistakes"])) / d)


@router.get(
    "/models/{m}/metrics",
    response_model=ModelMetrics,
    responses=ERRORS,
    dependencies=[Read],
    tags=["models"],
)
async def model_metrics(m: ModelName, state: StateDep, backend: BackendDep) -> FastJSON:
    """Examples seen, mistakes, updates, rates, quality (AUC, log loss), version, lag, drift."""
    row = await backend.metrics(m)
    assert state.drift is not None
    tracker = await update_drift(m, backend, state.drift)
    recent = await backend.history_tail(m, ROLLING_POINTS + 1)
    seen, mistakes = int(row["examples_seen"]), int(row["mistakes"])
    quality = row.get("quality") or {}
    return FastJSON(
        {
            "examples_seen": seen,
            "mistakes": mistakes,
            "updates": int(row["updates"]),
            "mistake_rate": mistakes / seen if seen else 0.0,
            "rolling_mistake_rate": rolling_rate(recent, seen, mistakes),
            **{k: quality.get(k) for k in QUALITY},
            "members": quality.get("members"),
            "version": int(row["version"]),
            "lag": int(row["lag"]),
            "last_update": row.get("last_update"),
            "drift": tracker.summary(),
        }
    )


@router.get(
    "/models/{m}/history",
    response_model=History,
    responses=ERRORS,
    dependencies=[Read],
    tags=["models"],
)
async def model_history(
    m: ModelName,
    state: StateDep,
    backend: BackendDep,
    limit: Annotated[int, Query(ge=1, le=10_000)] = 1000,
) -> FastJSON:
    """The newest ``limit`` points (examples_seen, mistakes, updates, time, drift) for a chart."""
    assert state.drift is not None
    tracker = await update_drift(m, backend, state.drift)
    points = await backend.history_tail(m, limit)
    for p in points:
        p["drift"] = tracker.is_detection(int(p["examples_seen"]))
    return FastJSON({"points": points})


@router.get(
    "/metrics",
    response_class=Response,
    responses={200: {"content": {"text/plain": {}}}, **ERRORS},
    dependencies=[Read],
)
async def prometheus(state: StateDep, backend: BackendDep) -> Response:
    """Prometheus exposition: per-model counters, lag, version; request latency histograms."""
    names = await backend.list_models()
    # one script call per 1,000 models, one at a time (one call per model would drain the
    # pool); the gauges are written as text, not through prometheus_client (see prom.py)
    models = model_exposition(await backend.metrics_table(sorted(names)))
    cache = state.cache.exposition() if state.cache is not None else b""
    return Response(
        state.metrics.exposition() + models + cache,
        media_type="text/plain; version=0.0.4; charset=utf-8",
    )
