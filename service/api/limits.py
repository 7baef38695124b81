"""Body size limit, enforced while the body is read.

A declared ``Content-Length`` over the limit is refused before a byte is read; a chunked body
is counted as it arrives and refused as soon as it passes the limit, so a huge body is never
buffered, let alone parsed.
"""

from __future__ import annotations

from typing import Any

import orjson
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from service.errors import PayloadTooLarge


def _too_large(limit: int) -> PayloadTooLarge:
    return PayloadTooLarge(f"body is larger than max_body_bytes={limit}", field="body")


class BodyLimit:
    """Pure ASGI middleware (no per-request task or copy), cheap enough for the hot path."""

    def __init__(self, app: ASGIApp, max_bytes: int) -> None:
        self.app = app
        self.max_bytes = max_bytes

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

        async def counting_receive() -> Message:
            nonlocal seen
            message = await receive()
            if message["type"] == "http.request":
                seen += len(message.get("body", b""))
                if seen > limit:
                    raise _too_large(limit)
            return message

        await self.app(scope, counting_receive, send)


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
