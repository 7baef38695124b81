"""Where the API gets :class:`ModelSpec` from (one import site, resolved on first use)."""

from __future__ import annotations

from typing import Any


def spec_from_dict(d: dict[str, Any]) -> Any:
    """``ModelSpec.from_dict`` (validates; raises ``InvalidSpec`` naming the field)."""
    from service.learning.spec import ModelSpec

    return ModelSpec.from_dict(d)
