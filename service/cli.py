"""The ``streamlearn`` command line (typer).

Each command is a thin shell over a function elsewhere in the package, so the work can be
tested without a subprocess. Heavy imports happen inside the commands, to keep ``--help`` fast.
"""

from __future__ import annotations

import typer

app = typer.Typer(
    name="streamlearn",
    help="Streaming online learning as a service.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)


def main() -> None:
    """Console-script entry point."""
    app()


if __name__ == "__main__":
    main()
