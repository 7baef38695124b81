"""The import rules of docs/architecture.md, checked by reading the sources.

Only ``service/store`` may import redis, only ``service/api`` fastapi/starlette, and
``service/learning`` stays pure math.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SOURCES = sorted(p for d in ("service", "workers") for p in (ROOT / d).rglob("*.py"))


def top_level_imports(path: Path) -> set[str]:
    """Every module name a file imports (top-level package only), wherever the import is."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            names.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module.split(".")[0])
    return names


def rel(path: Path) -> str:
    return path.relative_to(ROOT).as_posix()


def test_sources_found() -> None:
    assert any(rel(p).startswith("service/") for p in SOURCES)


@pytest.mark.parametrize("path", SOURCES, ids=rel)
def test_import_rules(path: Path) -> None:
    name = rel(path)
    imports = top_level_imports(path)
    if not name.startswith("service/store/"):
        assert "redis" not in imports, f"{name} imports redis; only service/store may"
    if not name.startswith("service/api/"):
        assert not imports & {"fastapi", "starlette"}, f"{name} imports the web framework"
    if name.startswith("service/learning/"):
        allowed_ours = {"service"}
        third_party = imports - allowed_ours
        forbidden = third_party & {"redis", "fastapi", "starlette", "httpx", "pydantic", "orjson"}
        assert not forbidden, f"{name} must stay pure math, imports {sorted(forbidden)}"


def test_learning_imports_only_errors_of_ours() -> None:
    for path in (ROOT / "service" / "learning").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if (
                isinstance(node, ast.ImportFrom)
                and node.module
                and node.module.startswith("service.")
            ):
                assert node.module.startswith(("service.learning", "service.errors")), (
                    f"{rel(path)} imports {node.module}"
                )
