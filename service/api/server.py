"""Running the API under uvicorn, one process or several behind one port.

With ``workers > 1`` uvicorn forks processes that each build their own app through the
factory :func:`service.api.app.create_app_from_env`, so the settings travel through the
environment: :meth:`Settings.environ` is exported before uvicorn starts.
Each process has its own model cache and events subscription.
"""

from __future__ import annotations

import os
from typing import Any

from service.settings import Settings

FACTORY = "service.api.app:create_app_from_env"


def run(settings: Settings, *, workers: int = 1, log_level: str = "info") -> None:
    """Serve ``settings`` on ``settings.host:settings.port`` until interrupted."""
    import uvicorn

    if workers < 1:
        raise ValueError(f"workers must be >= 1, got {workers}")
    os.environ.update(settings.environ())
    uvicorn.run(
        FACTORY,
        factory=True,
        host=settings.host,
        port=settings.port,
        workers=workers,
        log_level=log_level,
        access_log=False,
        timeout_graceful_shutdown=5,
        **uvicorn_options(),
    )


def uvicorn_options() -> dict[str, Any]:
    """The event loop and HTTP parser we ship (tests run the server with the same)."""
    return {
        "loop": "uvloop" if _has("uvloop") else "asyncio",
        # uvicorn's own parsers, answering unparseable HTTP in our JSON shape (wire.py)
        "http": "service.api.wire:" + ("HttpToolsJSON" if _has("httptools") else "H11JSON"),
    }


def _has(module: str) -> bool:
    import importlib.util

    return importlib.util.find_spec(module) is not None
