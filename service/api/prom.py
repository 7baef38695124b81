"""Prometheus metrics: per-model gauges (read at scrape time) and request latencies.

Each app has its own registry (tests build many apps; the default global registry would
refuse duplicate names) for the request histograms and the process's own figures (CPU,
resident memory). With ``--workers N`` every process exposes its own request histograms;
the per-model gauges come from Redis and agree across processes.

The per-model gauges are not ``prometheus_client`` objects: with thousands of models,
filling labelled gauges and letting the client render them cost ~10x more than the read
itself (2,000 models: ~300 ms to set and ~200 ms to render on a busy 2-core machine), so
:func:`model_exposition` writes their text directly — the same exposition format, values
formatted as the client formats them (``floatToGoString``).
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

from prometheus_client import CollectorRegistry, Histogram, ProcessCollector, generate_latest
from prometheus_client.utils import floatToGoString
from starlette.types import ASGIApp, Message, Receive, Scope, Send

BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0)
METHODS = frozenset({"GET", "HEAD", "POST", "PUT", "DELETE", "PATCH", "OPTIONS"})
MODEL_GAUGES = ("examples_seen", "mistakes", "updates", "lag", "version")
QUALITY_GAUGES = ("auc", "rolling_auc", "log_loss", "rolling_log_loss")
_HELP = {
    **{name: f"{name} of the model (from the store)" for name in MODEL_GAUGES},
    **{
        name: f"{name} of the model's served scores (binary models; absent when undefined)"
        for name in QUALITY_GAUGES
    },
}


def _number(value: Any) -> str:
    """``value`` as the Prometheus client writes a sample (Go's float format, its
    ``floatToGoString``); the common cases without its general path: counters under a
    million (``7.0``) and floats under a million in magnitude (``repr``)."""
    kind = type(value)
    if kind is int and 0 <= value < 1_000_000:
        return f"{value}.0"
    if kind is float and -1e6 < value < 1e6:  # NaN and infinities fail the test
        return repr(value)
    return str(floatToGoString(value))


def model_exposition(rows: Mapping[str, Any]) -> bytes:
    """The per-model gauges of ``rows`` (model → ``store.Metrics``; model names are safe in
    a label: ``keys.validate_model_name`` allows no quote or backslash) in the text format:
    one family per gauge, one sample per model that has the value (a version 0 before the
    first; quality figures only where defined). One pass over the models."""
    names = (*MODEL_GAUGES, *QUALITY_GAUGES)
    lines: dict[str, list[str]] = {name: [] for name in names}
    seen, mistakes, updates = lines["examples_seen"], lines["mistakes"], lines["updates"]
    lag, version = lines["lag"], lines["version"]
    number = _number
    for model, row in rows.items():
        label = f'{{model="{model}"}} '
        seen.append(f"streamlearn_model_examples_seen{label}{number(row.examples_seen)}\n")
        mistakes.append(f"streamlearn_model_mistakes{label}{number(row.mistakes)}\n")
        updates.append(f"streamlearn_model_updates{label}{number(row.updates)}\n")
        lag.append(f"streamlearn_model_lag{label}{number(row.lag)}\n")
        version.append(f"streamlearn_model_version{label}{number(row.version or 0)}\n")
        quality = row.quality
        if quality:
            for name in QUALITY_GAUGES:
                value = quality.get(name)
                if value is not None:
                    lines[name].append(f"streamlearn_model_{name}{label}{number(value)}\n")
    out: list[str] = []
    for name in names:
        full = f"streamlearn_model_{name}"
        out.append(f"# HELP {full} {_HELP[name]}\n# TYPE {full} gauge\n")
        out += lines[name]
    return "".join(out).encode()


class Metrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        self.latency = Histogram(
            "streamlearn_http_request_seconds",
            "HTTP request latency by route template, method and status",
            ["method", "route", "status"],
            buckets=BUCKETS,
            registry=self.registry,
        )
        ProcessCollector(registry=self.registry)  # CPU seconds, resident memory, fds
        self._children: dict[tuple[str, str, int], Any] = {}

    def observe(self, method: str, route: str, status: int, seconds: float) -> None:
        """One request's latency (label children cached: ``labels()`` costs per call)."""
        if method not in METHODS:  # clients choose methods: keep the label set bounded
            method = "OTHER"
        key = (method, route, status)
        child = self._children.get(key)
        if child is None:
            child = self._children[key] = self.latency.labels(method, route, str(status))
        child.observe(seconds)

    def exposition(self) -> bytes:
        return generate_latest(self.registry)


class LatencyMiddleware:
    """Pure ASGI: times each request and labels it by route template, not raw path."""

    def __init__(self, app: ASGIApp, metrics: Metrics) -> None:
        self.app = app
        self.metrics = metrics

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        start = time.perf_counter()
        status = 0  # no response sent: 500 if the app raised, 499 if the client hung up

        async def send_status(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            await send(message)

        failed = True
        try:
            await self.app(scope, receive, send_status)
            failed = False
        finally:
            if status == 0:
                status = 500 if failed else 499  # (nginx's code for a client that went away)
            route = scope.get("route")
            template = getattr(route, "path", None) or "unmatched"
            self.metrics.observe(scope["method"], template, status, time.perf_counter() - start)
