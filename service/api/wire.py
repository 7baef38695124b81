"""uvicorn's HTTP protocols, answering unparseable requests in our JSON error shape.

A request that cannot be parsed as HTTP at all — bad chunked encoding, a ``Content-Length``
that lies so that the surplus bytes read as a garbled next request, an invalid header — never
reaches the ASGI app: uvicorn answers it itself with a plain-text ``400 Invalid HTTP request
received.`` and closes the connection. These subclasses replace only that answer with
``{"error": {"code": "bad_request", "message": ...}}`` (still 400, still closing). What they
cannot change, and docs/api.md says so: a client that *under*-sends its declared
``Content-Length`` and stalls (our ASGI layer answers that: 408 after ``body_timeout_s``), a
request line or header block over the parser's size limits (h11 only), and TLS or HTTP/2
errors below HTTP/1.1.
"""

from __future__ import annotations

import orjson
from uvicorn.protocols.http.h11_impl import H11Protocol
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol


def _json_400(msg: str) -> bytes:
    body = orjson.dumps(
        {"error": {"code": "bad_request", "message": f"malformed HTTP request: {msg}"}}
    )
    return (
        b"HTTP/1.1 400 Bad Request\r\n"
        b"content-type: application/json\r\n"
        b"content-length: " + str(len(body)).encode() + b"\r\n"
        b"connection: close\r\n\r\n" + body
    )


class HttpToolsJSON(HttpToolsProtocol):
    def send_400_response(self, msg: str) -> None:
        self.transport.write(_json_400(msg))
        self.transport.close()


class H11JSON(H11Protocol):
    def send_400_response(self, msg: str) -> None:
        self.transport.write(_json_400(msg))
        self.transport.close()
