"""Hostile HTTP on a real socket (uvicorn, as shipped): stalled bodies, lying lengths, bad
chunking, clients that hang up mid-upload."""

from __future__ import annotations

import asyncio
import logging
import socket
import threading
import time
import uuid
from collections.abc import Iterator

import orjson
import pytest
import uvicorn

from service.settings import Settings

pytestmark = pytest.mark.timeout(60)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture
def server() -> Iterator[tuple[str, int]]:
    from service.api.app import create_app
    from service.api.server import uvicorn_options

    settings = Settings(redis_url=f"memory://{uuid.uuid4().hex}", body_timeout_s=0.5)
    port = _free_port()
    config = uvicorn.Config(
        create_app(settings), host="127.0.0.1", port=port, log_level="info", **uvicorn_options()
    )
    srv = uvicorn.Server(config)
    thread = threading.Thread(target=lambda: asyncio.run(srv.serve()), daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not srv.started:
        assert time.monotonic() < deadline, "uvicorn did not start"
        time.sleep(0.02)
    put = b'{"algorithm": "perceptron", "hashing": false, "dim": 4}'
    status, _ = exchange(
        port,
        b"PUT /models/m HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
        b"Content-Length: %d\r\n\r\n%s" % (len(put), put),
    )
    assert status == 201
    yield "127.0.0.1", port
    srv.should_exit = True
    thread.join(timeout=10)


def exchange(port: int, raw: bytes, *, timeout: float = 10.0) -> tuple[int, bytes]:
    """Send ``raw``, read until the server closes or the response is complete."""
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as s:
        s.sendall(raw)
        data = b""
        while True:
            try:
                chunk = s.recv(65536)
            except TimeoutError:
                break
            if not chunk:
                break
            data += chunk
            head, sep, body = data.partition(b"\r\n\r\n")
            if sep:
                length = next(
                    (
                        int(line.split(b":", 1)[1])
                        for line in head.split(b"\r\n")
                        if line.lower().startswith(b"content-length:")
                    ),
                    None,
                )
                if length is not None and len(body) >= length:
                    break
    head, _, body = data.partition(b"\r\n\r\n")
    status = int(head.split(b" ", 2)[1]) if head else 0
    return status, body


def test_a_stalled_body_gets_408_json(server: tuple[str, int]) -> None:
    _, port = server
    raw = (
        b"POST /models/m/examples HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
        b'Content-Length: 1000\r\n\r\n{"features": [1, 0'
    )
    status, body = exchange(port, raw)  # then nothing: the client stalls
    assert status == 408, body
    err = orjson.loads(body)["error"]
    assert err["code"] == "body_timeout" and "body_timeout_s" in err["message"]


@pytest.mark.parametrize(
    "raw",
    [
        # bad chunked encoding
        b"POST /models/m/examples HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
        b"Transfer-Encoding: chunked\r\n\r\nzz\r\n{}\r\n0\r\n\r\n",
        # a Content-Length that lies short: the surplus is read as a garbled next request
        b"POST /models/m/examples HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
        b"Content-Length: 2\r\n\r\n{}garbage that is not a request line\r\n\r\n",
        # a header line without a colon
        b"GET /healthz HTTP/1.1\r\nHost: x\r\nno colon here\r\n\r\n",
    ],
    ids=["bad-chunking", "lying-content-length", "bad-header"],
)
def test_malformed_http_gets_our_json_400(server: tuple[str, int], raw: bytes) -> None:
    _, port = server
    with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
        s.sendall(raw)
        data = b""
        while chunk := s.recv(65536):
            data += chunk
    # the lying length first gets the answer to its 2-byte request, then the 400
    last = data[data.rfind(b"HTTP/1.1 ") :]
    head, _, body = last.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 400"), data
    assert orjson.loads(body)["error"]["code"] == "bad_request"


def test_a_client_hanging_up_mid_upload_logs_no_error(
    server: tuple[str, int], caplog: pytest.LogCaptureFixture
) -> None:
    _, port = server
    caplog.set_level(logging.INFO)
    for path in (b"/models/m/examples", b"/models/m/predict", b"/models/m/feedback", b"/models"):
        with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
            s.sendall(
                b"POST %s HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                b'Content-Length: 100000\r\n\r\n{"features": [1, 0' % path
            )
            time.sleep(0.1)  # the handler is reading the body
        # closed mid-upload
    time.sleep(0.3)
    noisy = [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert not noisy, [r.getMessage() for r in noisy]
    # the server is still fine, and counts those requests as 499 (client gone), not 500
    status, _ = exchange(port, b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
    assert status == 200
    status, body = exchange(port, b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
    assert status == 200
    assert b'status="499"' in body and b'status="500"' not in body, body
