"""Body size and time limits, enforced while the body is read.

A declared ``Content-Length`` over the limit is refused before a byte is read; a chunked body
is counted as it arrives and refused as soon as it passes the limit, so a huge body is never
buffered, let alone parsed.

A body must also arrive whole within ``body_timeout_s`` of the first read (uvicorn has no
body read timeout of its own: a client that declares a ``Content-Length`` and stalls would
hold the request forever): past it the read raises :class:`BodyTimeout` (408, and the
connection is closed). Once the body is complete, later reads (waiting for a disconnect)
pass through untouched.

A client that hangs up mid-upload is not an error of ours: the request ends quietly (nobody is
left to answer; nothing is logged, no traceback).
"""

from __future__ import annotations

import asyncio
from typing import Any

import orjson
from starlette.requests import ClientDisconnect
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from service.errors import BodyTimeout, PayloadTooLarge


def _too_large(limit: int) -> PayloadTooLarge:
    return PayloadTooLarge(f"body is larger than max_body_bytes={limit}", field="body")


class BodyLimit:
    """Pure ASGI middleware (no per-request task or copy), cheap enough for the hot path."""

    def __init__(self, app: ASGIApp, max_bytes: int, timeout_s: float = 30.0) -> None:
        self.app = app
        self.max_bytes = max_bytes
        self.timeout_s = timeout_s

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        limit = self.max_bytes
        for name, value in scope["headers"]:
            if name == b"content-length":
                try:
                    declared = int(value)
                except ValueError:
                    declared = -1
                if declared > limit:
                    await _send_413(send, limit)
                    return
                break
        seen = 0
        complete = False
        deadline: float | None = None
        timeout_s = self.timeout_s

        async def counting_receive() -> Message:
            nonlocal seen, complete, deadline
            if complete:
                return await receive()
            loop = asyncio.get_running_loop()
            if deadline is None:
                deadline = loop.time() + timeout_s
            try:
                async with asyncio.timeout_at(deadline):
                    message = await receive()
            except TimeoutError:
                raise BodyTimeout(
                    f"the request body did not arrive within body_timeout_s={timeout_s:g} s",
                    field="body",
                ) from None
            if message["type"] == "http.request":
                seen += len(message.get("body", b""))
                if seen > limit:
                    raise _too_large(limit)
                complete = not message.get("more_body", False)
            else:
                complete = True
            return message

        try:
            await self.app(scope, counting_receive, send)
        except ClientDisconnect:
            return  # the client hung up: nobody to answer, nothing to log


async def _send_413(send: Send, limit: int) -> None:
    err = _too_large(limit)
    body: dict[str, Any] = {"error": {"code": err.code, "message": err.message, "field": "body"}}
    payload = orjson.dumps(body)
    await send(
        {
            "type": "http.response.start",
            "status": 413,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(payload)).encode()),
                (b"connection", b"close"),
            ],
        }
    )
    await send({"type": "http.response.body", "body": payload})
