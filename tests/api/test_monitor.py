"""Monitoring: per-model metrics, history points with drift marks, Prometheus, readiness."""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import orjson
import pytest

from service.api.drift import DriftTracker
from service.cli.evaluate import evaluate_file
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
        quality = ("auc", "rolling_auc", "log_loss", "rolling_log_loss")
        assert all(empty[k] is None for k in quality)  # null before any example
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
        # quality of the served scores: ranking worse over the last 1,000 (flipped) examples
        assert 0.5 < m["auc"] <= 1 and 0 <= m["rolling_auc"] < m["auc"]
        assert 0 <= m["auc_error_bound"] < 0.01
        assert 0 < m["log_loss"] < m["rolling_log_loss"]
        h = (await c.get("/models/m/history")).json()["points"]
        assert h[-1]["log_loss"] == m["log_loss"] and h[-1]["auc"] == m["auc"]
        assert h[0]["auc"] is not None and h[0]["auc"] > h[-1]["auc"]  # before the flip
        prom = (await c.get("/metrics")).text
        assert f'streamlearn_model_auc{{model="m"}} {m["auc"]!r}' in prom
        assert 'streamlearn_model_rolling_log_loss{model="m"}' in prom
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


def spam_like_file(path: Path, n: int, seed: int) -> None:
    """NDJSON text examples: two overlapping vocabularies, noisy labels, ids."""
    rng = np.random.default_rng(seed)
    ham = [f"h{i}" for i in range(40)] + [f"c{i}" for i in range(40)]
    spam = [f"s{i}" for i in range(40)] + [f"c{i}" for i in range(40)]
    with path.open("wb") as fh:
        for i in range(n):
            label = "spam" if rng.random() < 0.35 else "ham"
            words = rng.choice(spam if label == "spam" else ham, int(rng.integers(3, 12)))
            if rng.random() < 0.1:
                label = "ham" if label == "spam" else "spam"
            ex = {"id": f"x{i}", "text": " ".join(words.tolist()), "label": label}
            fh.write(orjson.dumps(ex) + b"\n")


async def test_live_quality_equals_evaluate_for_the_same_file(
    settings: Settings, tmp_path: Path
) -> None:
    """A file posted through the API and learned by burst workers (a restart half-way, so the
    tracker is reloaded from its commit) gives the figures ``evaluate`` gives for the file."""
    settings.history_every = 500
    settings.commit_examples = 300
    settings.read_count = 2
    path = tmp_path / "mail.ndjson"
    spam_like_file(path, 3000, seed=5)
    spec = {"algorithm": "pa1", "bits": 14, "classes": ["ham", "spam"], "text": {}}
    lines = path.read_bytes().splitlines(keepends=True)
    async with running(settings) as (_, c):
        assert (await c.put("/models/m", json=spec)).status_code == 201
        sizes = [1, 7, 300, 44, 650, 998]
        start = 0
        for k, size in enumerate([*sizes, len(lines) - sum(sizes)]):
            body = b"".join(lines[start : start + size])
            start += size
            r = await c.post(
                "/models/m/examples", content=body, headers={"content-type": "application/x-ndjson"}
            )
            assert r.status_code == 202, r.text
            if k == 3:
                await learn_all(settings)  # a worker that stops half-way; the next takes over
        await learn_all(settings)
        live = (await c.get("/models/m/metrics")).json()
    report = evaluate_file(path, algorithm="pa1", bits=14, classes=["ham", "spam"], text={})
    assert live["examples_seen"] == report.examples == 3000
    assert (live["mistakes"], live["updates"]) == (report.mistakes, report.updates)
    for key in ("rolling_auc", "log_loss", "rolling_log_loss", "auc_error_bound"):
        assert live[key] == getattr(report, key), key  # same code, same margins: to the bit
    assert report.auc is not None and 0.6 < report.auc < 1.0
    assert abs(live["auc"] - report.auc) <= live["auc_error_bound"]


async def test_ensemble_members_are_shown_in_the_metrics(
    settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A learner with ``member_metrics()`` (the ensemble) gets its members committed with the
    quality figures and shown as ``members``; history points stay small (no members)."""
    import workers.trainer as trainer

    members = [
        {"algorithm": "pa1", "params": {"C": 1.0}, "weight": 0.75, "examples_seen": 40,
         "mistakes": 3, "log_loss": 0.2},
        {"algorithm": "perceptron", "params": {}, "weight": 0.25, "examples_seen": 40,
         "mistakes": 9, "log_loss": 0.9},
    ]  # fmt: skip
    real = trainer.build_learner

    def with_members(spec: Any) -> Any:
        learner = real(spec)
        learner.member_metrics = lambda: members
        return learner

    monkeypatch.setattr(trainer, "build_learner", with_members)
    async with running(settings) as (_, c):
        assert (await c.put("/models/m", json=BINARY_SPEC)).status_code == 201
        await c.post("/models/m/examples", json={"examples": [dense(i) for i in range(40)]})
        await learn_all(settings)
        m = (await c.get("/models/m/metrics")).json()
        assert m["members"] == members and m["auc"] is not None
        h = (await c.get("/models/m/history")).json()["points"]
        assert "members" not in h[-1] and h[-1]["auc"] == m["auc"]
        assert (await c.put("/models/k", json=BINARY_SPEC)).status_code == 201
    monkeypatch.setattr(trainer, "build_learner", real)
    async with running(settings) as (_, c):
        await c.post("/models/k/examples", json={"examples": [dense(i) for i in range(4)]})
        await learn_all(settings)
        assert (await c.get("/models/k/metrics")).json()["members"] is None


async def test_prometheus_with_many_models_matches_the_store(settings: Settings) -> None:
    """1,200 models (two script calls of 1,000), each with its own counters, lag, head and
    (for some) quality figures; one deleted: every sample equals the store's own figure,
    the deleted model is absent, and the text is a valid exposition."""
    from prometheus_client.parser import text_string_to_metric_families

    from service.store import Store

    store = Store.open(settings)
    k = store.keys
    names = [f"m{i:04d}" for i in range(1200)]
    try:
        async with store.client.pipeline(transaction=False) as pipe:
            for i, m in enumerate(names):
                pipe.hset(k.spec(m), mapping={"json": orjson.dumps(BINARY_SPEC), "created_at": 1})
                pipe.sadd(k.models(), m)
                state: dict[str, Any] = {"examples_seen": 7 * i, "mistakes": i, "updates": 2 * i}
                state["applied"] = 7 * i
                if i % 3 == 0:
                    state["quality"] = orjson.dumps({"auc": i / 1200, "log_loss": 0.5 + i})
                pipe.hset(k.state(m), mapping=state)
                pipe.set(k.appended(m), 7 * i + i % 5)
                if i % 2:
                    pipe.set(k.head(m), i)
            await pipe.execute()
        await store.delete_model("m0007")
        async with running(settings) as (_, c):
            text = (await c.get("/metrics")).text
        families = {f.name: f for f in text_string_to_metric_families(text)}
        got: dict[tuple[str, str], float] = {}
        for name in ("examples_seen", "mistakes", "updates", "lag", "version", "auc", "log_loss"):
            for sample in families[f"streamlearn_model_{name}"].samples:
                got[(name, sample.labels["model"])] = sample.value
        want = await store.metrics_many([m for m in names if m != "m0007"])
        assert len(want) == 1199
        assert ("examples_seen", "m0007") not in got
        for m, row in want.items():
            assert got[("examples_seen", m)] == row.examples_seen
            assert got[("mistakes", m)] == row.mistakes
            assert got[("updates", m)] == row.updates
            assert got[("lag", m)] == row.lag
            assert got[("version", m)] == (row.version or 0)
            quality = row.quality or {}
            assert got.get(("auc", m)) == quality.get("auc")
            assert got.get(("log_loss", m)) == quality.get("log_loss")
        assert sum(1 for key in got if key[0] == "auc") == 400  # i % 3 == 0, none deleted
    finally:
        await store.close()
