"""``streamlearn evaluate`` as a command: its options in, the report printed out.

:mod:`service.cli.launch` (argparse, the quick start) and the typer app both hand the raw
option values to :func:`command`, which builds :func:`~service.cli.evaluate.evaluate_file`'s
options, runs it with a progress bar on long files and prints a table (or one JSON object as
stdout's last line). rich is imported only for the bar, the table and an error line.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import orjson

from service.cli.datasets import open_binary
from service.cli.evaluate import EvaluationError, Report, evaluate_file
from service.errors import StreamlearnError

PROGRESS_MIN_BYTES = 8 << 20
"""Files at least this large get a progress bar on stderr."""


def dropped_summary(dropped: Mapping[str, int]) -> str:
    """``{"source": 3, "x": 1}`` → ``"source (3 lines), x (1 line)"``."""
    return ", ".join(f"{k} ({n:,} line{'s' if n != 1 else ''})" for k, n in dropped.items())


def parse_params(items: Sequence[str]) -> dict[str, Any]:
    """``["C=0.5", "projection=true"]`` → ``{"C": "0.5", ...}``: strings, which
    :func:`build_spec` reads as the values they spell (and the spec validates)."""
    out: dict[str, Any] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise EvaluationError(f"--param must be KEY=VALUE, got {item!r}")
        out[key.strip()] = value.strip()
    return out


def run_command(
    path: Path,
    *,
    json_out: bool,
    progress: bool = True,
    **options: Any,
) -> Report:
    """Evaluate and print: a table (or one JSON object as stdout's last line). rich is
    imported only for the progress bar and the table (``--json`` without a bar: never)."""
    show = progress and path.stat().st_size >= PROGRESS_MIN_BYTES
    if show:
        from rich.console import Console
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TimeRemainingColumn

        err = Console(stderr=True)
        total = count_examples(path, options.get("fmt"))
        with Progress(
            "[progress.description]{task.description}",
            BarColumn(),
            MofNCompleteColumn(),
            TimeRemainingColumn(),
            console=err,
            transient=True,
        ) as bar:
            task = bar.add_task("learning", total=total)
            report = evaluate_file(path, progress=lambda k: bar.advance(task, k), **options)
    else:
        report = evaluate_file(path, **options)
    if json_out:
        print(orjson.dumps(report.to_dict()).decode())
        return report
    from rich.console import Console
    from rich.table import Table

    table = Table(title=f"progressive validation of {path.name}", show_header=False)
    params = ", ".join(f"{k}={v}" for k, v in report.params.items())
    rows: list[tuple[str, str]] = [
        ("algorithm", f"{report.algorithm}({params})"),
        ("classes · dim", f"{report.n_classes} · {report.dim}"),
        ("examples", f"{report.examples:,}"),
        ("mistakes", f"{report.mistakes:,}"),
        ("updates", f"{report.updates:,}"),
        ("mistake rate", f"{report.mistake_rate:.4%}"),
    ]
    if report.auc is not None:
        rows.append(
            ("ROC AUC", f"{report.auc:.4f}  ((1−ROCA)% = {report.one_minus_auc_percent:.3f})")
        )
    if report.rolling_auc is not None:
        rows.append((f"rolling AUC (last {report.window:,})", f"{report.rolling_auc:.4f}"))
    if report.log_loss is not None and report.rolling_log_loss is not None:
        rows.append(("log loss", f"{report.log_loss:.4f}"))
        rows.append(
            (f"rolling log loss (last {report.window:,})", f"{report.rolling_log_loss:.4f}")
        )
    for number, m in enumerate(report.members or []):
        rows.append((
            f"member {number}: {m['algorithm']}",
            f"weight {m['weight']:.4f} · mistakes {m['mistakes']:,} · "
            f"log loss {m['mean_log_loss']:.4f}/example",
        ))  # fmt: skip
    rows += [
        ("seconds (whole run)", f"{report.seconds:.3f}"),
        ("learn seconds", f"{report.learn_seconds:.4f}"),
        ("examples/s (whole run)", f"{report.examples_per_s:,.0f}"),
    ]
    if report.dropped_keys:
        rows.append(("unknown keys dropped", dropped_summary(report.dropped_keys)))
    for k, v in rows:
        table.add_row(k, v)
    Console().print(table)
    return report


def parse_classes(text: str | None) -> list[Any] | None:
    """``"ham,spam"`` → ``["ham", "spam"]``; integers stay integers (``"-1,1"`` → ``[-1, 1]``)."""
    if text is None:
        return None
    names = [c.strip() for c in text.split(",")]
    try:
        return [int(c) for c in names]
    except ValueError:
        return names


def count_examples(path: Path, fmt: str | None) -> int:
    """A cheap count of the examples in a file (non-blank lines), for a progress bar total."""
    count = 0
    with open_binary(path) as fh:
        while block := fh.read(1 << 24):
            count += block.count(b"\n")
    return count


def command(
    file: Path,
    *,
    algorithm: str | None,
    param: Sequence[str] | None,
    bits: int | None,
    hashing: bool,
    dim: int | None,
    classes: str | None,
    fmt: str | None,
    order: Path | None,
    normalize: bool,
    transform: str | None,
    preset: str | None,
    text: str | None,
    auc: bool,
    chunk: int,
    json_out: bool,
) -> int:
    """``streamlearn evaluate`` from its option values as parsed: 0 with the report printed,
    or 2 with a red error line on stderr."""
    try:
        options: dict[str, Any] = {
            "fmt": fmt,
            "algorithm": algorithm,
            "params": parse_params(param or []),
            "bits": bits,
            "hashing": hashing,
            "dim": dim,
            "classes": parse_classes(classes),
            "normalize": normalize,
            "preset": preset,
            "order": order,
            "auc": auc,
            "chunk": chunk,
        }
        if transform is not None:
            options["transform"] = transform
        if text is not None:
            options["text"] = json.loads(text)
        run_command(file, json_out=json_out, progress=sys.stderr.isatty(), **options)
    except (StreamlearnError, ValueError, OSError) as e:
        from rich.console import Console

        Console(stderr=True).print(f"[red]error[/] {getattr(e, 'message', None) or e}")
        return 2
    return 0
