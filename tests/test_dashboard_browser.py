"""The dashboard in a real headless Chromium (Debian's, driven by Playwright; no download).

The service runs for real (uvicorn on a free loopback port + a worker, real Redis under a
unique prefix). The page must show the model, follow its counters and chart as examples
arrive, and pin and roll back from its buttons — asking for a key when the service has keys.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from service.client import Client

CHROMIUM = Path("/usr/bin/chromium")
ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
TIMEOUT_MS = 60_000

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(not CHROMIUM.exists(), reason=f"Chromium not installed at {CHROMIUM}"),
]


@pytest.fixture
def browser() -> Iterator[Any]:
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=str(CHROMIUM), args=ARGS)
        try:
            yield b
        finally:
            b.close()


def examples(start: int, n: int) -> list[dict[str, Any]]:
    """A learnable stream with one label in eight flipped, so mistakes keep coming."""
    out = []
    for i in range(start, start + n):
        y = 1 if (i * 7919) % 13 < 6 else -1
        label = -y if i % 8 == 3 else y
        x = {"signal": float(y), "noise": float((i * 31) % 5 - 2), "bias": 1.0}
        out.append({"features": x, "label": label})
    return out


def wait_text(page: Any, selector: str, text: str) -> None:
    page.wait_for_function(
        "([s, t]) => document.querySelector(s) && document.querySelector(s).textContent === t",
        arg=[selector, text],
        timeout=TIMEOUT_MS,
    )


def learned(client: Client, model: str, n: int) -> None:
    deadline = time.monotonic() + 60
    while client.metrics(model)["examples_seen"] < n:
        assert time.monotonic() < deadline, f"the worker did not catch up: {client.metrics(model)}"
        time.sleep(0.05)


def test_dashboard_follows_a_model_and_pins_and_rolls_back(
    settings: Any, browser: Any, output_dir: Path
) -> None:
    from tests.live_service import live_service

    settings = settings.model_copy(update={"history_every": 10})
    with live_service(settings) as live, Client(live.url) as client:
        client.create_model("dash", {"algorithm": "perceptron", "bits": 8})
        for start in (0, 20, 40):  # three commits: several history points and versions
            client.learn("dash", examples(start, 20))
            learned(client, "dash", start + 20)

        page = browser.new_page(viewport={"width": 1280, "height": 900})
        errors: list[str] = []
        page.on("pageerror", lambda e: errors.append(str(e)))
        requested: list[str] = []  # no CDN, no internet: every request goes to the service
        page.on("request", lambda r: requested.append(r.url))
        page.goto(live.url + "/")
        page.wait_for_selector('#model-list li[data-model="dash"]', timeout=TIMEOUT_MS)
        wait_text(page, "#stat-examples", "60")
        mistakes_before = page.text_content("#stat-mistakes")
        assert int(mistakes_before or "0") >= 1
        page.wait_for_selector("#chart path.series.mistakes", state="attached", timeout=TIMEOUT_MS)
        path_before = page.get_attribute("#chart path.series.mistakes", "d")
        points_before = int(page.get_attribute("#chart path.series.mistakes", "data-points") or 0)
        assert points_before >= 2

        client.learn("dash", examples(60, 140))
        wait_text(page, "#stat-examples", "200")
        page.wait_for_function(
            "(n) => +document.querySelector('#chart path.series.mistakes').dataset.points > n",
            arg=points_before,
            timeout=TIMEOUT_MS,
        )
        assert page.get_attribute("#chart path.series.mistakes", "d") != path_before
        assert page.locator("#chart path.series.updates").count() == 1
        box = page.locator("#chart").bounding_box()
        page.mouse.move(box["x"] + box["width"] * 0.6, box["y"] + box["height"] / 2)
        label = page.text_content("#chart .hover-label") or ""
        assert " examples · " in label and " mistakes" in label and " updates" in label
        page.click('.legend .toggle[data-series="updates"]')  # hide a series, then show it again
        page.wait_for_selector("#chart path.series.updates", state="detached", timeout=TIMEOUT_MS)
        page.click('.legend .toggle[data-series="updates"]')
        page.wait_for_selector("#chart path.series.updates", state="attached", timeout=TIMEOUT_MS)
        assert page.locator("#rate-chart path.series.rate").count() == 1
        wait_text(page, "#stat-lag", "0")
        # quality of the served scores: tiles and a chart beside the mistakes chart
        metrics = client.metrics("dash")
        assert metrics["auc"] is not None and metrics["log_loss"] is not None
        wait_text(page, "#stat-auc", f"{metrics['auc']:.4f}")
        wait_text(page, "#stat-loss", f"{metrics['log_loss']:.3f}")
        assert (page.text_content("#stat-auc-rolling") or "").startswith("rolling 0.")
        for chart, series, key in (("auc-chart", "auc", "auc"), ("loss-chart", "loss", "log_loss")):
            last = page.get_attribute(f"#{chart} path.series.{series}:not(.rolling)", "data-last")
            assert last is not None and float(last) == metrics[key], chart
            assert page.locator(f"#{chart} path.series.{series}.rolling").count() == 1
        quality_box = page.locator("#quality-card").bounding_box()
        chart_box = page.locator("#chart").bounding_box()
        assert quality_box["x"] > chart_box["x"] + chart_box["width"]  # beside it, at 1280 px

        versions = sorted(int(v["version"]) for v in client.versions("dash")["versions"])
        assert len(versions) >= 2
        oldest = versions[0]
        page.wait_for_selector(f'#versions tr[data-version="{oldest}"]', timeout=TIMEOUT_MS)
        page.click(f'#versions tr[data-version="{oldest}"] button[data-action="pin"]')
        page.wait_for_selector("#toast:not(.hidden)", timeout=TIMEOUT_MS)
        assert f"Pinned dash to version {oldest}" in (page.text_content("#toast") or "")
        listing = client.versions("dash")
        assert listing["head"] == oldest
        page.wait_for_selector(
            f'#versions tr[data-version="{oldest}"] .badge.pinned', timeout=TIMEOUT_MS
        )
        page.click(f'#versions tr[data-version="{oldest}"] button[data-action="unpin"]')
        page.wait_for_function(
            "() => document.querySelector('#toast').textContent.startsWith('Unpinned dash')",
            timeout=TIMEOUT_MS,
        )
        assert client.versions("dash")["head"] == versions[-1]  # the newest serves again
        page.wait_for_selector(
            f'#versions tr[data-version="{oldest}"] button[data-action="pin"]', timeout=TIMEOUT_MS
        )

        page.once("dialog", lambda d: d.accept())  # "Roll dash back to version …?"
        page.click(f'#versions tr[data-version="{oldest}"] button[data-action="rollback"]')
        page.wait_for_function(
            "(v) => document.querySelector('#toast').textContent.includes('back to version ' + v)",
            arg=oldest,
            timeout=TIMEOUT_MS,
        )
        after = client.versions("dash")
        assert max(int(v["version"]) for v in after["versions"]) > versions[-1]

        rolled_back_to = client.metrics("dash")["examples_seen"]
        for start in (200, 240, 280):  # learning resumes from the rolled-back state
            client.learn("dash", examples(start, 40))
            learned(client, "dash", rolled_back_to + start - 160)
        wait_text(page, "#stat-examples", str(rolled_back_to + 120))
        assert page.locator("#chart line.reset-mark").count() >= 1
        # Clicks start polls; they must not fork the 1 s polling loop into several.
        for _ in range(5):
            page.click('#model-list li[data-model="dash"]')
        page.wait_for_timeout(300)
        polls: list[str] = []
        page.on("request", lambda r: polls.append(r.url) if r.url.endswith("/models") else None)
        page.wait_for_timeout(3000)
        assert len(polls) <= 5, f"{len(polls)} polls of /models in 3 s: the loop forked"

        page.wait_for_timeout(1500)  # let a poll or two land before the picture
        page.screenshot(path=str(output_dir / "dashboard.png"), full_page=True)
        assert errors == []
        foreign = [
            u for u in requested if not u.startswith(live.url + "/") and not u.startswith("data:")
        ]
        assert foreign == [], foreign


def test_dashboard_asks_for_keys(settings: Any, browser: Any, output_dir: Path) -> None:
    from tests.live_service import live_service

    settings = settings.model_copy(update={"api_keys": "reader:predict;boss:admin"})
    with live_service(settings) as live, Client(live.url, api_key="boss") as client:
        client.create_model("locked", {"algorithm": "pa1", "bits": 8})
        client.learn("locked", examples(0, 30))
        learned(client, "locked", 30)

        page = browser.new_page(viewport={"width": 1280, "height": 800})
        page.goto(live.url + "/")
        page.wait_for_selector("#key-dialog[open]", timeout=TIMEOUT_MS)  # 401 on /models
        page.fill("#key-input", "reader")
        page.press("#key-input", "Enter")  # Enter must mean "use this key"
        wait_text(page, "#stat-examples", "30")

        version = int(client.versions("locked")["versions"][0]["version"])
        page.wait_for_selector(f'#versions tr[data-version="{version}"]', timeout=TIMEOUT_MS)
        page.click(f'#versions tr[data-version="{version}"] button[data-action="pin"]')
        page.wait_for_selector("#key-dialog[open]", timeout=TIMEOUT_MS)  # 403: admin needed
        assert "admin" in (page.text_content("#key-reason") or "")
        page.fill("#key-input", "boss")
        page.click('#key-dialog button[value="ok"]')
        page.wait_for_function(
            "() => document.querySelector('#toast').textContent.startsWith('Pinned locked')",
            timeout=TIMEOUT_MS,
        )
        assert client.versions("locked")["head"] == version
        page.screenshot(path=str(output_dir / "dashboard-keys.png"), full_page=True)


def test_dashboard_marks_drift(settings: Any, browser: Any, output_dir: Path) -> None:
    """A concept that flips half-way: the service's ADWIN flags it; the page shows the chip
    and a drift mark on the chart."""
    import random

    from tests.live_service import live_service

    rng = random.Random(0)
    w = [rng.gauss(0, 1) for _ in range(5)]

    def batch(n: int, sign: int) -> list[dict[str, Any]]:
        out = []
        for _ in range(n):
            x = [rng.gauss(0, 1) for _ in range(5)]
            y = sign if sum(a * b for a, b in zip(w, x, strict=True)) > 0 else -sign
            out.append({"features": {f"f{j}": v for j, v in enumerate(x)}, "label": y})
        return out

    settings = settings.model_copy(update={"history_every": 100})
    with live_service(settings) as live, Client(live.url) as client:
        client.create_model("drifty", {"algorithm": "averaged_perceptron", "bits": 8})
        for k in range(16):
            client.learn("drifty", batch(100, 1 if k < 10 else -1))
            learned(client, "drifty", 100 * (k + 1))
        assert client.metrics("drifty")["drift"]["detections"] >= 1

        page = browser.new_page(viewport={"width": 1280, "height": 900})
        page.goto(live.url + "/#drifty")
        page.wait_for_selector("#drift-chip:not(.hidden)", timeout=TIMEOUT_MS)
        assert "drift" in (page.text_content("#drift-chip") or "")
        page.wait_for_selector("#chart line.drift-mark", state="attached", timeout=TIMEOUT_MS)
        page.wait_for_timeout(500)
        page.screenshot(path=str(output_dir / "dashboard-drift.png"), full_page=True)


def test_dashboard_layout_loading_and_most_recent_model(
    settings: Any, browser: Any, output_dir: Path
) -> None:
    """``/`` opens the model that learned last; while it loads the page says so (never
    "Waiting for a model" beside a highlighted model); at 1400 and 800 px nothing scrolls
    sideways and the tile values stay in line, even where labels wrap."""
    from tests.live_service import live_service

    settings = settings.model_copy(update={"history_every": 20})
    with live_service(settings) as live, Client(live.url) as client:
        for name in ("a-older", "b-newer"):  # the most recent is not the first by name
            client.create_model(name, {"algorithm": "pa1", "bits": 8})
        for start in range(0, 120, 30):
            client.learn("a-older", examples(start, 30))
            learned(client, "a-older", start + 30)
        time.sleep(0.05)
        for start in (0, 20):  # two commits: two history points
            client.learn("b-newer", examples(start, 20))
            learned(client, "b-newer", start + 20)
        assert client.metrics("b-newer")["last_update"] > client.metrics("a-older")["last_update"]

        for width, name in ((1400, "b-newer"), (800, "a-older")):
            page = browser.new_page(viewport={"width": width, "height": 900})
            errors: list[str] = []
            page.on("pageerror", lambda e, errors=errors: errors.append(str(e)))
            # Record, on every frame from the first, any moment the page says "waiting for a
            # model" while a model is highlighted.
            page.add_init_script(
                """
                window.__contradictions = 0;
                const check = () => {
                  const empty = document.getElementById("empty");
                  const active = document.querySelector("#model-list li.active");
                  if (empty && active && !empty.classList.contains("hidden")) window.__contradictions++;
                  requestAnimationFrame(check);
                };
                requestAnimationFrame(check);
                """
            )
            # slow metrics answers, so the loading state lasts long enough to be seen
            page.route(
                "**/metrics",
                lambda route: (time.sleep(0.3), route.continue_()),
            )
            page.goto(live.url + ("/" if width == 1400 else "/#a-older"))
            page.wait_for_selector("#model-list li.active", timeout=TIMEOUT_MS)
            if width == 1400:
                # the most recently active model, not the first by name
                assert page.get_attribute("#model-list li.active", "data-model") == name
            loading = page.locator("#loading")
            if page.locator("#detail").is_hidden():
                assert loading.is_visible() and name in (loading.text_content() or "")
            wait_text(page, "#model-name", name)
            page.unroute("**/metrics")
            page.wait_for_selector(
                "#auc-chart path.series.auc", state="attached", timeout=TIMEOUT_MS
            )
            page.wait_for_timeout(1500)
            assert page.evaluate("window.__contradictions") == 0
            # no horizontal scroll
            overflow = page.evaluate(
                "() => document.documentElement.scrollWidth - document.documentElement.clientWidth"
            )
            assert overflow <= 0, f"{width}px: {overflow}px of horizontal scroll"
            # tile values in line, row by row (tiles in a row share their top)
            tiles = page.evaluate(
                """() => [...document.querySelectorAll('.tiles .tile')].map((t) => ({
                      top: Math.round(t.getBoundingClientRect().top),
                      value: t.querySelector('.value').getBoundingClientRect().top,
                      cut: t.querySelector('.value').scrollWidth > t.querySelector('.value').clientWidth,
                      label: t.querySelector('.label').getBoundingClientRect().height,
                  }))"""
            )
            rows: dict[int, list[float]] = {}
            for t in tiles:
                rows.setdefault(t["top"], []).append(t["value"])
            assert not any(t["cut"] for t in tiles), f"{width}px: a tile value is cut off"
            for values in rows.values():
                assert max(values) - min(values) < 1, f"{width}px: values out of line {values}"
            if width == 800:
                heights = [t["label"] for t in tiles]
                assert max(heights) > 1.5 * min(heights), "no label wraps at 800 px: test is moot"
            page.screenshot(path=str(output_dir / f"dashboard-{width}.png"), full_page=True)
            assert errors == []
            page.close()


def test_dashboard_shows_ensemble_members(settings: Any, browser: Any, output_dir: Path) -> None:
    """An ensemble's ``members`` (in its metrics answer) show as a table with the leading
    member marked; a model without members has no such card."""
    import json

    from tests.live_service import live_service

    members = [
        {"algorithm": "pa1", "params": {"C": 1.0}, "weight": 0.2, "examples_seen": 40,
         "mistakes": 9, "log_loss": 0.61},
        {"algorithm": "adagrad", "params": {"eta": 0.5}, "weight": 0.7, "examples_seen": 40,
         "mistakes": 4, "log_loss": 0.33},
        {"algorithm": "perceptron", "params": {}, "weight": 0.1, "examples_seen": 40,
         "mistakes": 12, "log_loss": 1.2},
    ]  # fmt: skip
    with live_service(settings) as live, Client(live.url) as client:
        client.create_model("ens", {"algorithm": "pa1", "bits": 8})
        client.learn("ens", examples(0, 40))
        learned(client, "ens", 40)
        page = browser.new_page(viewport={"width": 1400, "height": 900})
        page.goto(live.url + "/#ens")
        wait_text(page, "#stat-examples", "40")
        assert page.locator("#members-card").is_hidden()

        def add_members(route: Any) -> None:
            response = route.fetch()
            body = response.json()
            body["members"] = members
            route.fulfill(response=response, body=json.dumps(body))

        page.route("**/models/ens/metrics", add_members)
        page.wait_for_selector("#members-card:not(.hidden)", timeout=TIMEOUT_MS)
        rows = page.locator("#members tr")
        assert rows.count() == 3
        assert "adagrad (eta=0.5)" in (rows.nth(1).text_content() or "")
        assert page.locator('#members tr[data-member="1"] .badge.leading').count() == 1
        assert page.locator("#members .badge.leading").count() == 1
        page.screenshot(path=str(output_dir / "dashboard-members.png"), full_page=True)
