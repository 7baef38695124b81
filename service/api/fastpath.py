"""A dispatch shortcut for the two hot routes: ``POST /models/{m}/examples`` and ``/predict``.

Their handlers take only the :class:`Request` (see ``deps.hot``), so they can be called
without FastAPI's routing, dependency and exception layers, which cost about as much as the
handlers themselves. This middleware (the innermost: body limit and latency metrics still
apply) recognises exactly those two method + path shapes, calls the *same* handler functions
the FastAPI routes are declared with (so OpenAPI documents them and there is one
implementation), and maps domain errors with the same handler as the app. Everything else —
other methods and paths, 405s, unmatched routes — goes through FastAPI as usual; unexpected
exceptions propagate to the app's catch-all.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from starlette.requests import Request
from starlette.responses import Response
from starlette.types import ASGIApp, Receive, Scope, Send

from service.api.errors import domain_error
from service.errors import StreamlearnError

Handler = Callable[[Request], Awaitable[Response]]
PREFIX = "/models/"


class FastPath:
    def __init__(self, app: ASGIApp, routes: dict[str, tuple[Handler, Any]]) -> None:
        self.app = app
        self.routes = routes  # last path segment → (handler, the APIRoute, for metrics labels)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope["method"] == "POST":
            path: str = scope["path"]
            if path.startswith(PREFIX):
                m, sep, tail = path[len(PREFIX) :].partition("/")
                hit = self.routes.get(tail) if sep and m else None
                if hit is not None:
                    handler, route = hit
                    scope["path_params"] = {"m": m}
                    scope["route"] = route
                    request = Request(scope, receive)
                    try:
                        response = await handler(request)
                    except StreamlearnError as exc:
                        response = await domain_error(request, exc)
                    await response(scope, receive, send)
                    return
        await self.app(scope, receive, send)
