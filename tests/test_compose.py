"""The deployment files refer to what exists: compose services, the image build, the CLI
commands they run and the environment variables they set (no docker engine needed)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from service.settings import Settings

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def compose() -> dict[str, Any]:
    data = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
    assert isinstance(data, dict)
    return data


@pytest.fixture(scope="module")
def services(compose: dict[str, Any]) -> dict[str, Any]:
    return compose["services"]


def cli_commands() -> set[str]:
    import typer.main

    from service.cli.app import app

    group = typer.main.get_command(app)
    return set(group.commands)  # type: ignore[attr-defined]


def test_services_present(services: dict[str, Any]) -> None:
    assert {"redis", "api", "worker"} <= set(services)


def test_redis_is_durable_and_checked(services: dict[str, Any], compose: dict[str, Any]) -> None:
    redis = services["redis"]
    command = " ".join(redis["command"])
    assert "--appendonly yes" in command
    assert redis["healthcheck"]["test"][-1] == "ping"
    mounts = [v.split(":")[0] for v in redis["volumes"]]
    assert any(m in compose.get("volumes", {}) for m in mounts), "Redis data must be a volume"


@pytest.mark.parametrize("name", ["api", "worker"])
def test_api_and_worker_share_one_image_built_here(services: dict[str, Any], name: str) -> None:
    svc = services[name]
    assert svc["image"] == services["api"]["image"]
    context = ROOT / svc["build"]["context"]
    assert (context / svc["build"].get("dockerfile", "Dockerfile")).is_file()
    assert svc["depends_on"]["redis"]["condition"] == "service_healthy"


@pytest.mark.parametrize("name", ["api", "worker"])
def test_commands_are_real_cli_commands(services: dict[str, Any], name: str) -> None:
    command = services[name]["command"]
    assert command[0] == "streamlearn"
    assert command[1] == name
    assert command[1] in cli_commands(), f"`streamlearn {command[1]}` is not a CLI command"


def test_environment_names_are_settings(services: dict[str, Any]) -> None:
    fields = set(Settings.model_fields)
    seen = 0
    for name in ("api", "worker"):
        for var in services[name]["environment"]:
            assert var.startswith("STREAMLEARN_"), var
            assert var.removeprefix("STREAMLEARN_").lower() in fields, f"{var} is not a setting"
            seen += 1
    assert seen >= 4


def test_workers_can_scale(services: dict[str, Any]) -> None:
    worker = services["worker"]
    assert "container_name" not in worker and "ports" not in worker
    assert worker["environment"]["STREAMLEARN_REDIS_URL"].startswith("redis://redis:")


def test_api_port_matches_settings(services: dict[str, Any]) -> None:
    api = services["api"]
    env = api["environment"]
    port = env["STREAMLEARN_PORT"]
    assert Settings(port=int(port), host=env["STREAMLEARN_HOST"]).port == int(port)
    assert any(p.endswith(f":{port}") for p in api["ports"])
    assert all(p.startswith("${STREAMLEARN_BIND:-127.0.0.1}:") for p in api["ports"]), (
        "the API is open without keys: publish it on loopback unless told otherwise"
    )
    assert "ports" not in services["redis"], "Redis must not be published"
    assert f"127.0.0.1:{port}/healthz" in " ".join(api["healthcheck"]["test"])


def test_dockerfile_builds_the_package_as_non_root() -> None:
    text = (ROOT / "Dockerfile").read_text()
    assert re.search(r"^FROM python:3\.\d+-slim", text, re.M)
    assert re.search(r"^RUN pip install \.", text, re.M)
    users = re.findall(r"^USER (\S+)", text, re.M)
    assert users and users[-1] not in ("root", "0")
    for src in re.findall(r"^COPY (\S+) ", text, re.M):
        assert (ROOT / src).exists(), f"Dockerfile copies {src}, which does not exist"
    cmd = re.search(r'^CMD \["streamlearn", "(\w+)"\]', text, re.M)
    assert cmd and cmd.group(1) in cli_commands()


def test_dockerignore_keeps_local_state_out() -> None:
    ignored = (ROOT / ".dockerignore").read_text().split()
    for entry in (".git", ".streamlearn", "test-output"):
        assert entry in ignored
    for needed in ("service", "workers", "pyproject.toml", "README.md"):
        assert needed not in ignored


def test_the_installed_package_ships_the_dashboard() -> None:
    """The image runs ``pip install .``: every dashboard file must be package data."""
    import fnmatch
    import tomllib

    config = tomllib.loads((ROOT / "pyproject.toml").read_text())
    patterns = config["tool"]["setuptools"]["package-data"]["service"]
    static = ROOT / "service" / "api" / "static"
    files = [p.relative_to(ROOT / "service").as_posix() for p in static.rglob("*") if p.is_file()]
    assert {"api/static/index.html", "api/static/dashboard.js", "api/static/dashboard.css"} <= set(
        files
    )
    for f in files:
        assert any(fnmatch.fnmatch(f, pat) for pat in patterns), f"{f} would not be installed"
    for f in files:  # self-contained: nothing fetched from the internet at run time
        text = (ROOT / "service" / f).read_text()
        assert not re.search(r"(src|href)=[\"']?(https?:)?//", text), f"{f} loads a remote file"
        assert "@import url(http" not in text and "fetch('http" not in text
    scripts = config["project"]["scripts"]
    assert scripts["streamlearn"] == "service.cli.launch:main"  # evaluate without typer, see there
