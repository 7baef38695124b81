"""A JSON response rendered by orjson (FastAPI deprecated its own FastJSON).

Routes on hot paths build plain dicts and return this directly: no pydantic validation of the
answer, one orjson call.
"""

from __future__ import annotations

from typing import Any

import orjson
from starlette.responses import Response


class FastJSON(Response):
    media_type = "application/json"

    def render(self, content: Any) -> bytes:
        return orjson.dumps(content, option=orjson.OPT_SERIALIZE_NUMPY)
