"""Property-based fuzzing of the OpenAPI schema (schemathesis): no input yields a 5xx.

The app runs under a real uvicorn server in a thread (its own event loop, its lifespan), on
the real Redis under the test's unique key prefix, with two models the fuzzer can hit.
"""

from __future__ import annotations

import asyncio
import socket
import threading
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
import schemathesis
import uvicorn
from hypothesis import HealthCheck
from hypothesis import settings as hsettings
from schemathesis.checks import not_a_server_error

from service.settings import Settings


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture
def base_url(settings: Settings) -> Iterator[str]:
    from service.api.app import create_app

    port = _free_port()
    config = uvicorn.Config(create_app(settings), host="127.0.0.1", port=port, log_level="error")
    server = uvicorn.Server(config)
    thread = threading.Thread(target=lambda: asyncio.run(server.serve()), daemon=True)
    thread.start()
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 30
    while not server.started:
        if time.monotonic() > deadline:
            raise RuntimeError("uvicorn did not start")
        time.sleep(0.05)
    for name, spec in (
        ("m", {"algorithm": "perceptron", "hashing": False, "dim": 4}),
        ("t", {"algorithm": "pa1", "classes": ["ham", "spam"], "text": {}}),
    ):
        httpx.put(f"{url}/models/{name}", json=spec).raise_for_status()
    yield url
    server.should_exit = True
    thread.join(timeout=10)


@pytest.fixture
def api_schema(base_url: str) -> Any:
    return schemathesis.openapi.from_url(f"{base_url}/openapi.json")


schema = schemathesis.pytest.from_fixture("api_schema")


@schemathesis.serializer("application/x-ndjson", "text/x-svmlight")
def _text_body(ctx: Any, value: Any) -> bytes:
    """NDJSON and svmlight bodies are documented as strings: send them as they are."""
    return value.encode() if isinstance(value, str) else str(value).encode()


@schema.parametrize()
@hsettings(
    max_examples=40,
    deadline=None,
    suppress_health_check=list(HealthCheck),
    derandomize=True,
)
@pytest.mark.timeout(120)
def test_no_server_errors(case: Any) -> None:
    if case.path == "/readyz":  # 503 is its documented answer while no worker runs
        status = case.call().status_code
        assert status < 500 or status == 503
        return
    case.call_and_validate(checks=[not_a_server_error])
