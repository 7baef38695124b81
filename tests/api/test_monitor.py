"""Monitoring: per-model metrics, history points with drift marks, Prometheus, readiness."""

from __future__ import annotations

import random

import httpx

from service.api.drift import DriftTracker
from service.settings import Settings
from tests.api.conftest import BINARY_SPEC, assert_error, dense, learn_all, running


def test_adwin_flags_a_jump_in_the_mistake_rate() -> None:
    rng = random.Random(0)
    tracker = DriftTracker()
    seen = mistakes = 0
    for point in range(120):
        rate = 0.05 if point < 60 else 0.5
        seen += 100
        mistakes += sum(rng.random() < rate for _ in range(100))
        tracker.feed(seen, mistakes, float(point))
    assert tracker.detections, "a 10x jump in the mistake rate must be detected"
    first = tracker.detections[0].examples_seen
    assert 6_000 < first <= 8_000  # after the change, and soon after it
    assert tracker.summary()["detections"] == len(tracker.detections)


def test_adwin_is_quiet_on_a_stable_stream() -> None:
    rng = random.Random(1)
    tracker = DriftTracker()
    seen = mistakes = 0
    for point in range(200):
        seen += 100
        mistakes += sum(rng.random() < 0.1 for _ in range(100))
        tracker.feed(seen, mistakes, float(point))
    assert tracker.detections == []


async def test_metrics_history_and_drift_over_http(settings: Settings) -> None:
    settings.history_every = 50
    async with running(settings) as (_, c):
        assert (await c.put("/models/m", json=BINARY_SPEC)).status_code == 201
        empty = (await c.get("/models/m/metrics")).json()
        assert (
            empty["examples_seen"] == 0 and empty["mistake_rate"] == 0.0 and empty["version"] == 0
        )
        # a separable stream, then the labels flip: the mistake rate jumps
        for flip in (False, True):
            for _ in range(20):
                batch = [dense(i) for i in range(50)]
                if flip:
                    batch = [
                        {**e, "label": -e["label"]} if i % 3 else e for i, e in enumerate(batch)
                    ]
                await c.post("/models/m/examples", json={"examples": batch})
                await learn_all(settings)
        m = (await c.get("/models/m/metrics")).json()
        assert m["examples_seen"] == 2000 and m["lag"] == 0 and m["version"] >= 1
        assert m["mistakes"] > 0 and m["mistake_rate"] == m["mistakes"] / 2000
        assert (
            m["rolling_mistake_rate"] is not None and m["rolling_mistake_rate"] > m["mistake_rate"]
        )
        assert m["last_update"] is not None
        assert m["drift"]["detections"] >= 1, m
        h = (await c.get("/models/m/history")).json()["points"]
        assert len(h) >= 30
        assert [p["examples_seen"] for p in h] == sorted(p["examples_seen"] for p in h)
        assert any(p["drift"] for p in h)
        assert_error(await c.get("/models/zz/metrics"), 404, "model_not_found")
        assert_error(await c.get("/models/zz/history"), 404, "model_not_found")


async def test_prometheus_exposition(mem_api: httpx.AsyncClient) -> None:
    assert (await mem_api.put("/models/m", json=BINARY_SPEC)).status_code == 201
    await mem_api.post("/models/m/examples", json=dense(1))
    await mem_api.get("/nope")
    r = await mem_api.get("/metrics")
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/plain")
    text = r.text
    assert 'streamlearn_model_lag{model="m"} 1.0' in text
    assert 'streamlearn_model_examples_seen{model="m"} 0.0' in text
    assert "streamlearn_model_version" in text
    assert (
        'streamlearn_http_request_seconds_count{method="POST",route="/models/{m}/examples",status="202"} 1.0'
        in text
    )
    assert 'route="unmatched",status="404"' in text


async def test_readyz_needs_redis_and_a_worker(settings: Settings) -> None:
    from service.store import Store

    async with running(settings) as (_, c):
        assert_error(await c.get("/readyz"), 503, "not_ready", "worker")
        store = Store.open(settings)
        await store.heartbeat("w-test", [])
        ready = await c.get("/readyz")
        await store.forget_worker("w-test")
        await store.close()
        assert ready.status_code == 200 and ready.json() == {
            "status": "ready",
            "redis": True,
            "workers": 1,
        }
