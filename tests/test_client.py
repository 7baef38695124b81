"""The Python client: what it sends (paths, bodies, headers) and what it makes of answers.

The first part runs against an ``httpx.MockTransport`` that records requests, so each method's
wire form is pinned down without a server; the second runs the client against the real app
and worker (live uvicorn on a free port, real Redis under a unique prefix).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import httpx
import orjson
import pytest

from service.client import AsyncClient, Client, ClientError

Handler = Callable[[httpx.Request], httpx.Response]


class Recorder:
    """A mock server: records every request and answers with ``reply(request)``."""

    def __init__(self, reply: Handler | None = None) -> None:
        self.requests: list[httpx.Request] = []
        self.reply = reply or (lambda r: httpx.Response(200, json={"ok": True}))

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        return self.reply(request)

    @property
    def last(self) -> httpx.Request:
        return self.requests[-1]

    def body(self) -> Any:
        return orjson.loads(self.last.content)


def sync_client(rec: Recorder, **kw: Any) -> Client:
    return Client("http://sl.test", transport=httpx.MockTransport(rec), **kw)


def test_create_model_merges_spec_and_fields() -> None:
    rec = Recorder()
    with sync_client(rec) as c:
        c.create_model("spam", {"preset": "spam"}, bits=18)
    assert rec.last.method == "PUT"
    assert rec.last.url.path == "/models/spam"
    assert rec.last.headers["content-type"] == "application/json"
    assert rec.body() == {"preset": "spam", "bits": 18}


def test_model_names_are_escaped_in_paths() -> None:
    rec = Recorder()
    with sync_client(rec) as c:
        c.metrics("a b/c")
    assert rec.last.url.raw_path == b"/models/a%20b%2Fc/metrics"


def test_learn_one_is_the_object_many_is_examples_with_ids() -> None:
    rec = Recorder()
    with sync_client(rec) as c:
        c.learn("m", {"text": "hi", "label": "ham"}, ids=["x1"])
        assert rec.body() == {"text": "hi", "label": "ham", "id": "x1"}
        c.learn("m", [{"features": [1.0]}, {"features": [2.0]}], ids=["a", "b"])
        assert rec.body() == {
            "examples": [{"features": [1.0], "id": "a"}, {"features": [2.0], "id": "b"}]
        }
    assert rec.last.url.path == "/models/m/examples"


def test_learn_rejects_ids_of_the_wrong_length_before_sending() -> None:
    rec = Recorder()
    with sync_client(rec) as c, pytest.raises(ValueError, match="ids must have 2 entries"):
        c.learn("m", [{"label": 1}, {"label": -1}], ids=["only-one"])
    assert rec.requests == []


def test_learn_raw_sets_the_content_type_per_format() -> None:
    rec = Recorder()
    with sync_client(rec) as c:
        c.learn_raw("m", b'{"label": 1}\n', "ndjson")
        assert rec.last.headers["content-type"] == "application/x-ndjson"
        c.learn_raw("m", "1 3:1\n", "svmlight")
        assert rec.last.headers["content-type"] == "text/plain"
        assert rec.last.url.params["format"] == "svmlight"
        assert rec.last.content == b"1 3:1\n"
        with pytest.raises(ValueError, match="fmt must be 'ndjson' or 'svmlight', got 'csv'"):
            c.learn_raw("m", "", "csv")


def test_predict_list_in_list_out() -> None:
    answer = {"predictions": [{"label": "spam", "score": 0.9}, {"label": "ham", "score": 0.1}]}
    rec = Recorder(lambda r: httpx.Response(200, json=answer))
    with sync_client(rec) as c:
        out = c.predict("m", [{"text": "a"}, {"text": "b"}])
    assert rec.body() == {"examples": [{"text": "a"}, {"text": "b"}]}
    assert [p["label"] for p in out] == ["spam", "ham"]


def test_pin_and_rollback_post_the_version_and_validate_it() -> None:
    rec = Recorder()
    with sync_client(rec) as c:
        c.rollback("m", 3)
        assert (rec.last.url.path, rec.body()) == ("/models/m/rollback", {"version": 3})
        c.pin("m", 2)
        assert (rec.last.url.path, rec.body()) == ("/models/m/pin", {"version": 2})
        with pytest.raises(ValueError, match="version must be an integer >= 0, got '2'"):
            c.pin("m", "2")  # type: ignore[arg-type]


def test_api_key_is_sent_as_bearer_and_x_api_key() -> None:
    rec = Recorder()
    with sync_client(rec, api_key="s3cret") as c:
        c.list_models()
    assert rec.last.headers["authorization"] == "Bearer s3cret"
    assert rec.last.headers["x-api-key"] == "s3cret"
    with sync_client(rec) as c:
        c.list_models()
    assert "authorization" not in rec.last.headers


def test_server_error_body_becomes_client_error() -> None:
    body = {"error": {"code": "invalid_example", "message": "examples[1].label: 7 is not a class"}}
    rec = Recorder(lambda r: httpx.Response(422, json=body))
    with sync_client(rec) as c, pytest.raises(ClientError) as info:
        c.learn("m", [{"label": 1}, {"label": 7}])
    err = info.value
    assert (err.status, err.code) == (422, "invalid_example")
    assert "examples[1].label" in err.message
    assert err.body == body


def test_retry_after_is_kept() -> None:
    body = {"error": {"code": "lag_exceeded", "message": "backlog over max_lag"}}
    rec = Recorder(lambda r: httpx.Response(429, json=body, headers={"retry-after": "2"}))
    with sync_client(rec) as c, pytest.raises(ClientError) as info:
        c.learn("m", {"label": 1})
    assert (info.value.code, info.value.retry_after) == ("lag_exceeded", 2.0)


def test_non_json_error_keeps_status_and_text() -> None:
    rec = Recorder(lambda r: httpx.Response(502, text="bad gateway"))
    with sync_client(rec) as c, pytest.raises(ClientError) as info:
        c.healthz()
    assert (info.value.status, info.value.code, info.value.message) == (
        502,
        "http_error",
        "bad gateway",
    )


def test_unreachable_server_is_a_client_error_with_status_0() -> None:
    def refuse(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError("connection refused", request=request)

    with sync_client(Recorder(refuse)) as c, pytest.raises(ClientError) as info:
        c.list_models()
    assert (info.value.status, info.value.code) == (0, "unreachable")


def test_version_npy_returns_bytes() -> None:
    rec = Recorder(
        lambda r: httpx.Response(
            200, content=b"\x93NUMPY", headers={"content-type": "application/octet-stream"}
        )
    )
    with sync_client(rec) as c:
        assert c.version("m", 4, fmt="npy") == b"\x93NUMPY"
    assert rec.last.url.path == "/models/m/versions/4"
    assert rec.last.url.params["format"] == "npy"


async def test_async_client_sends_the_same_requests() -> None:
    sync_rec, async_rec = Recorder(), Recorder()
    calls: list[tuple[str, tuple[Any, ...]]] = [
        ("create_model", ("m", {"algorithm": "pa1"})),
        ("learn", ("m", [{"label": 1}])),
        ("predict", ("m", {"text": "x"})),
        ("feedback", ("m", "p-1", "spam")),
        ("metrics", ("m",)),
        ("history", ("m",)),
        ("versions", ("m",)),
        ("rollback", ("m", 1)),
        ("pin", ("m", 2)),
        ("unpin", ("m",)),
        ("delete_model", ("m",)),
    ]
    with sync_client(sync_rec) as sc:
        for name, args in calls:
            getattr(sc, name)(*args)
    async with AsyncClient("http://sl.test", transport=httpx.MockTransport(async_rec)) as ac:
        for name, args in calls:
            await getattr(ac, name)(*args)
    assert len(sync_rec.requests) == len(async_rec.requests) == len(calls)
    for a, b in zip(sync_rec.requests, async_rec.requests, strict=True):
        assert (a.method, a.url, a.content) == (b.method, b.url, b.content)


def test_learn_with_wait_asks_the_server_to_hold_the_answer() -> None:
    rec = Recorder(
        lambda r: httpx.Response(200, json={"accepted": 1, "duplicates": 0, "version": 3})
    )
    with sync_client(rec) as c:
        got = c.learn("m", {"text": "hi", "label": "ham"}, wait=5)
        assert rec.last.url.params["wait"] == "5" and got["version"] == 3
        c.learn_raw("m", b"1 1:1\n", "svmlight", wait=2.5)
        assert dict(rec.last.url.params) == {"format": "svmlight", "wait": "2.5"}
        c.learn("m", {"text": "hi", "label": "ham"})
        assert "wait" not in rec.last.url.params
        for bad in (0, 31, -1, True, "5"):
            with pytest.raises(ValueError, match=r"wait must be a number of seconds in \(0, 30\]"):
                c.learn("m", {"text": "hi"}, wait=bad)  # type: ignore[arg-type]


# --- against the real app and worker ---------------------------------------------------------


def test_client_against_live_service(settings) -> None:  # type: ignore[no-untyped-def]
    from tests.live_service import live_service, wait_for

    with live_service(settings) as live, Client(live.url) as c:
        spec = {"algorithm": "perceptron", "bits": 12}
        created = c.create_model("m1", spec)
        assert created is not None
        with pytest.raises(ClientError) as conflict:
            c.create_model("m1", {"algorithm": "pa1", "bits": 12})
        assert (conflict.value.status, conflict.value.code) == (409, "spec_conflict")
        assert "m1" in str(c.list_models())

        examples = [
            {"features": {"a": 1.0, "b": float(i % 2)}, "label": 1 if i % 2 else -1}
            for i in range(20)
        ]
        accepted = c.learn("m1", examples, ids=[f"e{i}" for i in range(20)])
        assert accepted["accepted"] == 20
        again = c.learn("m1", examples[:1], ids=["e0"])  # a repeated id: accepted, learned once
        assert again["accepted"] == 1

        with pytest.raises(ClientError) as bad:
            c.learn(
                "m1", [{"features": {"a": 1.0}, "label": 1}, {"features": {"a": 1.0}, "label": 5}]
            )
        assert bad.value.status == 422 and bad.value.code == "invalid_example"

        metrics = wait_for(lambda: (m := c.metrics("m1"))["examples_seen"] >= 20 and m)
        assert metrics["examples_seen"] == 20
        assert metrics["mistakes"] >= 1
        served = c.learn("m1", {"features": {"a": 2.0}, "label": 1}, wait=20)
        assert served["version"] >= 1 and "ids" not in served
        assert c.metrics("m1")["examples_seen"] == 21
        assert c.predict("m1", {"features": {"a": 1.0}})["version"] >= served["version"]

        one = c.predict("m1", {"features": {"a": 1.0, "b": 1.0}})
        assert {"label", "score", "margin", "version", "prediction_id"} <= set(one)
        many = c.predict("m1", [{"features": {"a": 1.0}}, {"features": {"b": 1.0}}])
        assert isinstance(many, list) and len(many) == 2

        versions = c.versions("m1")
        assert versions["versions"], versions
        assert c.history("m1")["points"]

        fed = c.feedback("m1", one["prediction_id"], -1)  # learns from the kept features
        assert fed["accepted"] == 1
        wait_for(lambda: c.metrics("m1")["examples_seen"] == 22)
        with pytest.raises(ClientError) as unknown:
            c.feedback("m1", "no-such-prediction", 1)
        assert (unknown.value.status, unknown.value.code) == (404, "prediction_not_found")

        c.create_model("t1", {"algorithm": "pa1", "bits": 10, "text": {}})
        quick = c.predict_text("t1", "hello there")  # GET …/predict?text=
        assert {"label", "score", "version"} <= set(quick)
        first = min(int(v["version"]) for v in c.versions("m1")["versions"])
        meta = c.version("m1", first)
        assert int(meta["version"]) == first
        assert c.version("m1", first, fmt="npy")[:6] == b"\x93NUMPY"
        c.pin("m1", first)
        assert c.versions("m1")["head"] == first
        # the API swaps to the pinned version when the pin is announced
        wait_for(lambda: c.predict("m1", {"features": {"a": 1.0}})["version"] == first)
        released = c.unpin("m1")
        assert released["head"] == max(int(v["version"]) for v in released["versions"])
        assert not any(v.get("pinned") for v in released["versions"])
        rolled = c.rollback("m1", first)
        assert rolled is not None
        with pytest.raises(ClientError) as no_version:
            c.version("m1", 9999)
        assert (no_version.value.status, no_version.value.code) == (404, "version_not_found")

        with pytest.raises(ClientError) as missing:
            c.metrics("nope")
        assert (missing.value.status, missing.value.code) == (404, "model_not_found")
        c.delete_model("m1")
        with pytest.raises(ClientError):
            c.get_model("m1")


def test_async_client_against_live_service(settings) -> None:  # type: ignore[no-untyped-def]
    from tests.live_service import live_service

    async def scenario(url: str) -> dict[str, Any]:
        async with AsyncClient(url) as c:
            await c.create_model("m2", {"algorithm": "pa1", "bits": 10})
            await c.learn("m2", [{"features": {"x": 1.0}, "label": 1}])
            return await c.get_model("m2")

    with live_service(settings, worker=False) as live:
        described = asyncio.run(scenario(live.url))
    assert "pa1" in str(described)
