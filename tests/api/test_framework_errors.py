"""Framework errors answer the same JSON error shape as domain errors."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from tests.api.conftest import assert_error


async def test_unmatched_route_is_json_404(mem_api: httpx.AsyncClient) -> None:
    assert_error(await mem_api.get("/nope"), 404, "not_found", "/nope")


async def test_wrong_method_is_json_405(mem_api: httpx.AsyncClient) -> None:
    assert_error(await mem_api.patch("/models/m"), 405, "method_not_allowed", "PATCH")


async def test_request_validation_is_json_422_naming_the_field(mem_api: httpx.AsyncClient) -> None:
    err = assert_error(await mem_api.get("/models/m/versions/abc"), 422, "invalid_request", "n")
    assert err["field"] == "n"  # the parameter, named as domain errors name theirs


async def test_malformed_small_json_body_is_400(mem_api: httpx.AsyncClient) -> None:
    resp = await mem_api.post(
        "/models/m/rollback", content=b"{nope", headers={"content-type": "application/json"}
    )
    assert_error(resp, 400, "malformed_body")


async def test_healthz(mem_api: httpx.AsyncClient) -> None:
    resp = await mem_api.get("/healthz")
    assert resp.status_code == 200 and resp.json() == {"status": "ok"}


async def test_oversize_body_is_413_before_parsing(mem_api: httpx.AsyncClient) -> None:
    from service.api.app import create_app  # noqa: F401  (the app under test has the default)

    big = b"x" * (32 * 1024 * 1024 + 1)
    resp = await mem_api.post("/models/m/examples", content=big)
    assert_error(resp, 413, "payload_too_large", "max_body_bytes")


async def test_a_bug_is_a_logged_json_500_and_a_raw_redis_outage_a_503(
    mem_settings: object, caplog: pytest.LogCaptureFixture
) -> None:
    from service.api.app import create_app

    app = create_app(mem_settings)  # type: ignore[arg-type]
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app, raise_app_exceptions=False)
        async with httpx.AsyncClient(transport=transport, base_url="http://t") as c:
            assert (await c.put("/models/m", json={"algorithm": "pa1"})).status_code == 201
            backend = app.state.sl.backend

            async def bug(m: str) -> None:
                raise RuntimeError("boom")

            backend.metrics = bug
            with caplog.at_level("ERROR"):
                assert_error(await c.get("/models/m/metrics"), 500, "internal_error")
            assert "boom" in caplog.text

            class ConnectionError(Exception):  # what redis-py raises, recognised by name
                __module__ = "redis.exceptions"

            async def down(m: str) -> None:
                raise ConnectionError("refused")

            backend.metrics = down
            r = await c.get("/models/m/metrics")
            assert_error(r, 503, "store_unavailable")
            assert r.headers["retry-after"] == "1"


async def test_fast_path_leaves_other_shapes_to_the_router(mem_api: httpx.AsyncClient) -> None:
    assert (await mem_api.put("/models/m", json={"algorithm": "pa1"})).status_code == 201
    assert_error(await mem_api.get("/models/m/examples"), 405, "method_not_allowed")
    assert_error(await mem_api.post("/models/m/other", json={}), 404, "not_found")
    assert_error(await mem_api.post("/models//examples", json={}), 404, "not_found")
    assert_error(await mem_api.post("/models/m/examples/x", json={}), 404, "not_found")
    r = await mem_api.post("/models/m/examples", json={"text": "x"})
    assert_error(r, 422, "invalid_example", "label")  # no label: a domain error


async def test_every_error_kind_reads_the_same_way(mem_api: httpx.AsyncClient) -> None:
    """docs/api.md: what is wrong, then ``(field 'F', index I)`` with whichever is known —
    domain errors, framework validation and routing alike."""
    import re

    assert (
        await mem_api.put("/models/m", json={"algorithm": "pa1", "hashing": False, "dim": 4})
    ).status_code == 201
    ex = {"features": [1, 0, 0, 0], "label": 1}
    probes: list[tuple[str, str, dict[str, Any]]] = [
        ("POST", "/models/m/examples", {"content": b"{", "headers": {"content-type": "application/json"}}),
        ("POST", "/models/m/examples", {"json": {"examples": [ex, {**ex, "label": 7}]}}),
        ("POST", "/models/m/examples", {"json": {**ex, "x": 1}}),
        ("POST", "/models/m/examples", {"json": {"label": 1}}),
        ("POST", "/models/m/examples", {"content": b"x", "headers": {"content-type": "text/csv"}}),
        ("POST", "/models/m/examples?wait=99", {"json": ex}),
        ("POST", "/models/nope/examples", {"json": ex}),
        ("PUT", "/models/m", {"json": {"algorithm": "pa1", "params": {"C": -1}}}),
        ("PUT", "/models/m", {"json": {"algorithm": "pa2"}}),
        ("POST", "/models/m/rollback", {"json": {"version": 0}}),
        ("POST", "/models/m/rollback", {"json": {"version": 3}}),
        ("GET", "/models/m/versions/abc", {}),
        ("GET", "/models/m/history?limit=-1", {}),
        ("POST", "/models/m/feedback", {"json": {"label": 1}}),
        ("POST", "/models/m/predict", {"json": {"features": [1, "a", 0, 0]}}),
        ("GET", "/nowhere", {}),
        ("DELETE", "/models/m/examples", {}),
    ]  # fmt: skip
    for method, path, kw in probes:
        r = await mem_api.request(method, path, **kw)
        assert r.status_code >= 400, (path, r.text)
        err = r.json()["error"]
        where = [f"field {err['field']!r}"] if "field" in err else []
        where += [f"index {err['index']}"] if "index" in err else []
        message = err["message"]
        if where:
            assert message.endswith(f" ({', '.join(where)})"), (path, err)
        else:
            assert not message.endswith(")"), (path, err)
        assert not message.startswith(("Input ", "Field ")), (path, err)  # pydantic's voice
        assert not re.match(r"^[\w.\[\]]+: ", message), (path, err)  # no "field: " prefix
