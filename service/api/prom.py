"""Prometheus metrics: per-model gauges (filled at scrape time) and request latencies.

Each app has its own registry (tests build many apps; the default global registry would
refuse duplicate names). With ``--workers N`` every process exposes its own request
histograms; the per-model gauges come from Redis and agree across processes.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping
from typing import Any

from prometheus_client import CollectorRegistry, Gauge, Histogram, generate_latest
from starlette.types import ASGIApp, Message, Receive, Scope, Send

BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0)
METHODS = frozenset({"GET", "HEAD", "POST", "PUT", "DELETE", "PATCH", "OPTIONS"})
MODEL_GAUGES = ("examples_seen", "mistakes", "updates", "lag", "version")
QUALITY_GAUGES = ("auc", "rolling_auc", "log_loss", "rolling_log_loss")


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
        self.gauges = {
            name: Gauge(
                f"streamlearn_model_{name}",
                f"{name} of the model (from the store)",
                ["model"],
                registry=self.registry,
            )
            for name in MODEL_GAUGES
        }
        for name in QUALITY_GAUGES:
            self.gauges[name] = Gauge(
                f"streamlearn_model_{name}",
                f"{name} of the model's served scores (binary models; absent when undefined)",
                ["model"],
                registry=self.registry,
            )
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

    def set_models(self, rows: Iterable[tuple[str, Mapping[str, Any]]]) -> None:
        """Replace the per-model gauges (deleted models disappear)."""
        for gauge in self.gauges.values():
            gauge.clear()
        for model, row in rows:
            quality = row.get("quality") or {}
            for name, gauge in self.gauges.items():
                value = row.get(name, quality.get(name))
                if value is not None:
                    gauge.labels(model=model).set(float(value))

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
