"""The client-side CLI commands (``replay``, ``demo``, ``models``, ``metrics``, ``versions``,
``rollback``): what they do, with a rich console, over :class:`service.client.Client`.

``service/cli/app.py`` only declares the options and calls these, so they can be tested with an
in-process client and a recording console, without a subprocess.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TaskProgressColumn,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)
from rich.table import Table

from service.cli.datasets import guess_format, read_order
from service.cli.evaluate_command import dropped_summary
from service.cli.replay import (
    apply_order,
    drop_unknown_keys,
    find_spambase,
    read_lines,
    replay,
    wait_learned,
)
from service.client import MAX_WAIT_S, Client, ClientError, Metrics

# Spambase has 57 numeric features whose scales differ by orders of magnitude (capitalTotal
# reaches the thousands). log1p tames the heavy tails and AdaGrad's per-feature step sizes
# absorb the rest: on the shuffled stream this makes 7.5 % progressive mistakes (346 of
# 4,601), against 11.7 % for AdaGrad on raw values and 31 % for the text spam preset's PA-I.
# 57 features need no more than 2**12 hashed buckets, which keeps each version small.
DEMO_MODEL = "spambase"
DEMO_SPEC: dict[str, Any] = {
    "algorithm": "adagrad",
    "transform": "log1p",
    "classes": ["ham", "spam"],
    "positive": "spam",
    "bits": 12,
}

METRIC_ROWS = (
    ("examples_seen", "examples seen"),
    ("mistakes", "mistakes"),
    ("updates", "updates"),
    ("mistake_rate", "mistake rate"),
    ("rolling_mistake_rate", "rolling mistake rate"),
    ("auc", "ROC AUC"),
    ("rolling_auc", "rolling ROC AUC (last 1,000)"),
    ("log_loss", "log loss"),
    ("rolling_log_loss", "rolling log loss (last 1,000)"),
    ("version", "version"),
    ("lag", "lag"),
    ("last_update", "last update"),
)


def fmt(key: str, value: Any) -> str:
    if value is None:
        return "–"
    if key.endswith("rate") and isinstance(value, int | float):
        return f"{100 * value:.2f} %"
    if key.endswith(("auc", "log_loss")) and isinstance(value, float):
        return f"{value:.4f}"
    if key in ("last_update", "time") and isinstance(value, int | float):
        return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(value))
    if isinstance(value, int) and not isinstance(value, bool):
        return f"{value:,}"
    if isinstance(value, Mapping) and "detections" in value:
        return f"{value['detections']} detection(s)" + (" — now" if value.get("detected") else "")
    return str(value)


def metrics_table(model: str, metrics: Mapping[str, Any]) -> Table:
    table = Table(title=f"model {model}", show_header=False, title_justify="left")
    table.add_column("metric", style="dim")
    table.add_column("value", justify="right")
    for key, label in METRIC_ROWS:
        if key in metrics:
            table.add_row(label, fmt(key, metrics[key]))
    if "drift" in metrics:
        table.add_row("drift", fmt("drift", metrics["drift"]))
    return table


def progress(console: Console) -> Progress:
    return Progress(
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TaskProgressColumn(),
        TextColumn("{task.fields[rate]:>10} ex/s"),
        TimeElapsedColumn(),
        TimeRemainingColumn(),
        console=console,
    )


def run_replay(
    client: Client,
    console: Console,
    path: Path,
    model: str,
    *,
    fmt_name: str | None = None,
    batch_size: int = 500,
    order: Path | None = None,
    rate: float = 0.0,
    wait: float = 60.0,
    limit: int | None = None,
) -> Metrics:
    """Post ``path`` to ``model`` with a progress bar; print and return the final metrics."""
    kind = fmt_name or guess_format(path)
    lines = read_lines(path, kind)
    if order is not None:
        if kind != "ndjson":
            raise ValueError("--order needs ids, which only NDJSON lines carry")
        lines = apply_order(lines, read_order(order), source=str(path))
    if limit is not None:
        lines = lines[:limit]
    dropped: dict[str, int] = {}
    if kind == "ndjson":
        lines, dropped = drop_unknown_keys(lines)
    client.get_model(model)  # fail early (404) before the bar starts
    with progress(console) as bar:
        task = bar.add_task(f"replay → {model}", total=len(lines), rate="–")
        start = time.perf_counter()

        def advance(n: int) -> None:
            done = bar.tasks[0].completed + n
            elapsed = max(time.perf_counter() - start, 1e-9)
            bar.update(task, advance=n, rate=f"{done / elapsed:,.0f}")

        result = replay(
            client, model, lines, fmt=kind, batch_size=batch_size, rate=rate, on_batch=advance,
            wait=min(wait, MAX_WAIT_S) if wait > 0 else None, start=start,
        )  # fmt: skip
        bar.update(task, rate=f"{result.rate:,.0f}")  # the bar ends on the summary's figure
    console.print(
        f"posted [bold]{result.posted:,}[/] examples in {result.requests:,} requests, "
        f"{result.seconds:.2f} s ({result.rate:,.0f} examples/s"
        + (f", {result.retries} retries after 429/503" if result.retries else "")
        + ")"
    )
    console.print(
        f"{result.new:,} new, {result.duplicates:,} already learned"
        + (" (their ids were accepted before: not learned again)" if result.duplicates else "")
    )
    if dropped:
        console.print(f"unknown keys dropped: {dropped_summary(dropped)}")
    if result.version is not None:
        console.print(f"learned: version {result.version:,} serves all of it")
        metrics = client.metrics(model)
    else:
        left = wait - MAX_WAIT_S if wait > MAX_WAIT_S else 0.0
        metrics = wait_learned(client, model, timeout=left) if left > 0 else client.metrics(model)
        if wait > 0 and metrics.get("lag") not in (0, None):
            console.print(f"[yellow]not all learned after {wait:g} s (lag {metrics['lag']:,})[/]")
    console.print(metrics_table(model, metrics))
    return metrics


def run_demo(
    client: Client,
    console: Console,
    *,
    data: Path | None = None,
    model: str = DEMO_MODEL,
    rate: float = 500.0,
    batch_size: int = 50,
    limit: int | None = None,
) -> Metrics:
    """Create the demo model and replay Spambase into it, shuffled, at a watchable pace."""
    stream, order = find_spambase(data)
    try:
        client.create_model(model, DEMO_SPEC)
    except ClientError as e:
        if e.code != "spec_conflict":
            raise
        console.print(f"[yellow]model {model!r} exists with another spec; replaying into it[/]")
    console.print(
        f"Replaying Spambase ({stream}) into model [bold]{model}[/]"
        + (f" at about {rate:,.0f} examples/s" if rate > 0 else "")
        + f" — watch it learn at {client.base_url}/#{model}"
    )
    return run_replay(
        client,
        console,
        stream,
        model,
        fmt_name="ndjson",
        batch_size=batch_size,
        order=order,
        rate=rate,
        limit=limit,
    )


def show_models(client: Client, console: Console) -> list[str]:
    listing = client.list_models()
    names = [m if isinstance(m, str) else m.get("name") for m in _list(listing, "models")]
    table = Table(title="models", title_justify="left")
    for col in ("model", "examples", "mistakes", "mistake rate", "version", "lag"):
        table.add_column(col, justify="left" if col == "model" else "right")
    for name in names:
        try:
            m = client.metrics(name)
        except ClientError as e:
            table.add_row(name, f"[red]{e.code}[/]", "", "", "", "")
            continue
        table.add_row(
            name,
            fmt("examples_seen", m.get("examples_seen")),
            fmt("mistakes", m.get("mistakes")),
            fmt("mistake_rate", m.get("mistake_rate")),
            fmt("version", m.get("version")),
            fmt("lag", m.get("lag")),
        )
    if names:
        console.print(table)
    else:
        console.print("no models yet — try [bold]streamlearn demo[/]")
    return names


def show_metrics(client: Client, console: Console, model: str) -> Metrics:
    metrics = client.metrics(model)
    console.print(metrics_table(model, metrics))
    return metrics


def show_versions(client: Client, console: Console, model: str) -> list[dict[str, Any]]:
    data = client.versions(model)
    versions = [v if isinstance(v, dict) else {"version": v} for v in _list(data, "versions")]
    head = data.get("head") if isinstance(data, dict) else None
    table = Table(title=f"versions of {model}", title_justify="left")
    for col in ("version", "published", "examples", "mistakes", "updates", ""):
        table.add_column(col, justify="right" if col else "left")
    for v in sorted(versions, key=lambda v: -int(v["version"])):
        flags = []
        if v.get("head") or v["version"] == head:
            flags.append("[green]serving[/]")
        if v.get("pinned"):
            flags.append("[yellow]pinned[/]")
        table.add_row(
            str(v["version"]),
            fmt("time", v.get("time")),
            fmt("examples_seen", v.get("examples_seen")),
            fmt("mistakes", v.get("mistakes")),
            fmt("updates", v.get("updates")),
            " ".join(flags),
        )
    console.print(table)
    return versions


def do_rollback(client: Client, console: Console, model: str, version: int) -> Any:
    out = client.rollback(model, version)
    head = out.get("head") if isinstance(out, dict) else None
    console.print(
        f"rolled [bold]{model}[/] back to version {version}"
        + (f": now serving version {head} (a copy of {version})" if head is not None else "")
    )
    return out


def do_pin(client: Client, console: Console, model: str, version: int) -> Any:
    out = client.pin(model, version)
    console.print(
        f"pinned [bold]{model}[/] to version {version}: predictions use it until "
        f"`streamlearn unpin {model}`; learning goes on"
    )
    return out


def do_unpin(client: Client, console: Console, model: str) -> Any:
    out = client.unpin(model)
    head = out.get("head") if isinstance(out, dict) else None
    console.print(
        f"unpinned [bold]{model}[/]: the head follows the newest version again"
        + (f" (now version {head})" if head is not None else "")
    )
    return out


def show_dead_letters(client: Client, console: Console, model: str, limit: int = 100) -> Any:
    data = client.dead_letters(model, limit=limit)
    rows = _list(data, "dead_letters")
    if not rows:
        console.print(f"no dead letters for [bold]{model}[/]")
        return rows
    table = Table(title=f"dead letters of {model} (newest first)", title_justify="left")
    for col in ("time", "stream entry", "bytes", "reason"):
        table.add_column(col, justify="right" if col == "bytes" else "left", overflow="fold")
    for d in rows:
        table.add_row(
            fmt("time", d.get("time", 0) / 1000.0 if d.get("time") else None),
            str(d.get("entry")),
            fmt("bytes", d.get("bytes")),
            str(d.get("reason")),
        )
    console.print(table)
    return rows


def _list(data: Any, key: str) -> list[Any]:
    if isinstance(data, list):
        return data
    if isinstance(data, dict) and isinstance(data.get(key), list):
        return list(data[key])
    return []


__all__ = [
    "DEMO_SPEC",
    "do_pin",
    "do_rollback",
    "do_unpin",
    "metrics_table",
    "run_demo",
    "run_replay",
    "show_dead_letters",
    "show_metrics",
    "show_models",
    "show_versions",
]
