"""``GET /``: the dashboard — one HTML page with its JS and CSS, shipped inside the package.

The files are read from ``service/api/static`` once and served from memory; only the names
listed in :data:`ASSETS` are served, so no request path ever reaches the file system.
The page talks to the API with relative URLs, so it also works behind a path prefix.
"""

from __future__ import annotations

from functools import cache
from importlib import resources

from fastapi import APIRouter
from fastapi.responses import Response

ASSETS = {
    "index.html": "text/html; charset=utf-8",
    "dashboard.js": "text/javascript; charset=utf-8",
    "dashboard.css": "text/css; charset=utf-8",
}

router = APIRouter(tags=["dashboard"])


@cache
def asset(name: str) -> bytes:
    """The bytes of a shipped asset (cached for the life of the process)."""
    return resources.files("service.api").joinpath("static", name).read_bytes()


def _response(name: str) -> Response:
    return Response(
        asset(name),
        media_type=ASSETS[name],
        headers={"cache-control": "no-cache", "x-content-type-options": "nosniff"},
    )


@router.get("/", include_in_schema=False)
def dashboard() -> Response:
    """The dashboard page."""
    return _response("index.html")


@router.get("/static/{name}", include_in_schema=False)
def static_asset(name: str) -> Response:
    """One of the dashboard's own files; any other name is a 404."""
    if name not in ASSETS:
        return Response(
            b'{"error": {"code": "not_found", "message": "no such asset"}}',
            status_code=404,
            media_type="application/json",
        )
    return _response(name)
