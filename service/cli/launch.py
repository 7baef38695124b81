"""The ``streamlearn`` entry point: ``evaluate`` starts without the CLI framework.

``streamlearn evaluate FILE ...`` is a batch job whose whole-process time is what a user
compares (with Vowpal Wabbit's ``vw -d FILE``, say), so its command line is read here with
argparse and the work starts without importing typer, rich, httpx or the server stack; the
first numba dispatch is made cheaper too (:func:`warm_numba`). Everything else — every other
command, ``--help``, and any ``evaluate`` command line this parser does not accept as it stands —
goes to the typer app in :mod:`service.cli.app`, which owns the help texts and the error messages
(so an invalid command line gets the same message either way). ``tests/test_cli.py`` keeps
the two option lists equal.

``python -m service.cli`` comes here too (service/cli/__main__.py).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import NoReturn


class _Declined(Exception):
    """argparse did not accept the command line: typer will say why."""


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        raise _Declined(message)


def evaluate_parser() -> argparse.ArgumentParser:
    """The options of ``streamlearn evaluate``, as in service/cli/app.py (help texts live there)."""
    p = _Parser(prog="streamlearn evaluate", add_help=False, allow_abbrev=False)
    p.add_argument("file", type=Path)
    p.add_argument("--algorithm", "-a")
    p.add_argument("--param", "-p", action="append")
    p.add_argument("--bits", type=int)
    p.add_argument("--hashing", action=argparse.BooleanOptionalAction, default=True)
    p.add_argument("--dim", type=int)
    p.add_argument("--classes")
    p.add_argument("--format", dest="fmt")
    p.add_argument("--order", type=Path)
    p.add_argument("--normalize", action=argparse.BooleanOptionalAction, default=False)
    p.add_argument("--transform")
    p.add_argument("--preset")
    p.add_argument("--text")
    p.add_argument("--auc", action=argparse.BooleanOptionalAction, default=True)
    p.add_argument("--chunk", type=int, default=10_000)
    p.add_argument("--json", dest="json_out", action="store_true")
    return p


def _parse_evaluate(argv: Sequence[str]) -> argparse.Namespace | None:
    """The options, or None when typer should take the command line (help, an error)."""
    if any(a in ("--help", "-h") for a in argv):
        return None
    try:
        ns = evaluate_parser().parse_args(list(argv))
    except _Declined:
        return None
    if not ns.file.is_file() or (ns.order is not None and not ns.order.is_file()):
        return None  # typer's message for a missing file
    return ns


def warm_numba() -> None:
    """Set up numba's CPU target (what the first compile or cache load does) with two optional
    packages hidden: ``scipy.linalg``, imported only to decide whether one NumPy helper may
    call BLAS, and ``cffi`` (with pycparser), for calling cffi functions from compiled code.
    No kernel of ours does either, and together they are about half of the first dispatch's
    cost (0.2–0.3 s CPU on a small machine). Both are importable again afterwards; only
    numba's view of them, in this process, is fixed. Any failure just leaves numba to set
    itself up as usual."""
    if "numba.np.arraymath" in sys.modules:
        return  # already set up
    hidden = [m for m in ("scipy.linalg.cython_blas", "cffi") if m not in sys.modules]
    for name in hidden:
        sys.modules[name] = None  # type: ignore[assignment]
    try:
        from numba.core.registry import cpu_target

        cpu_target.target_context.refresh()
    except Exception:  # an optimisation only: numba sets itself up as usual
        pass
    finally:
        for name in hidden:
            if sys.modules.get(name, 0) is None:
                del sys.modules[name]


def run_evaluate(ns: argparse.Namespace) -> int:
    """``streamlearn evaluate`` with parsed options: the report, or an error line and 2."""
    warm_numba()
    from service.cli.evaluate_command import command

    options = vars(ns)
    return command(options.pop("file"), **options)


def run_fast(argv: Sequence[str]) -> int | None:
    """Run ``evaluate`` here and return its exit status; None: typer should take ``argv``."""
    if argv[:1] == ["evaluate"]:
        ns = _parse_evaluate(argv[1:])
        if ns is not None:
            return run_evaluate(ns)
    return None


def main() -> None:
    """Console-script entry point: ``evaluate`` here, everything else through typer."""
    code = run_fast(sys.argv[1:])
    if code is not None:
        raise SystemExit(code)
    from service.cli.app import app

    app()


if __name__ == "__main__":
    main()
