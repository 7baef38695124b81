"""The ``streamlearn`` command line (typer).

Each command is a thin shell over a function elsewhere in the package, so the work can be
tested without a subprocess. Heavy imports happen inside the commands, to keep ``--help`` fast.
A valid ``evaluate`` command line does not come here: :mod:`service.cli.launch` (the console
script, and ``python -m service.cli``) runs it without typer or rich.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any

import typer

app = typer.Typer(
    name="streamlearn",
    help="Streaming online learning as a service.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode="markdown",
)


# --- serve / replay / demo / models / metrics / versions / rollback (service/cli/serve.py, ------
# --- service/cli/commands.py) -------------------------------------------------------------------

UrlOpt = Annotated[
    str, typer.Option("--url", envvar="STREAMLEARN_URL", help="Base URL of a running service.")
]
KeyOpt = Annotated[
    str | None,
    typer.Option(
        "--api-key", envvar="STREAMLEARN_API_KEY", help="API key, if the service has keys."
    ),
]
ModelArg = Annotated[str, typer.Argument(help="Model name.")]
DEFAULT_SERVICE_URL = "http://127.0.0.1:8000"
DEFAULT_HOST, DEFAULT_PORT = "127.0.0.1", 8000  # Settings' defaults (a test keeps them equal)
HostOpt = Annotated[
    str,
    typer.Option(
        envvar="STREAMLEARN_HOST", help="Interface to listen on (0.0.0.0: every interface)."
    ),
]


def _client_call(
    url: str, api_key: str | None, fn: Callable[..., Any], *args: Any, **kw: Any
) -> Any:
    """Run ``fn(client, console, ...)``; a server or file error becomes a red line and exit 1."""
    from rich.console import Console
    from rich.markup import escape

    from service.client import Client, ClientError

    console = Console()
    try:
        with Client(url, api_key=api_key) as client:
            return fn(client, console, *args, **kw)
    except ClientError as e:
        err = Console(stderr=True)
        err.print(f"[red]error[/] {escape(str(e))}", highlight=False)
        for note in getattr(e, "__notes__", []):
            err.print(note, markup=False, highlight=False)
        raise typer.Exit(1) from e
    except (ValueError, OSError) as e:
        Console(stderr=True).print(f"[red]error[/] {escape(str(e))}", highlight=False)
        raise typer.Exit(2) from e


@app.command()
def serve(
    host: HostOpt = DEFAULT_HOST,
    port: Annotated[
        int, typer.Option(envvar="STREAMLEARN_PORT", help="Port (0 = any free port).")
    ] = DEFAULT_PORT,
    redis_url: Annotated[
        str | None, typer.Option(help="Redis URL; unset means an embedded Redis.")
    ] = None,
    data_dir: Annotated[
        str | None, typer.Option(help="Where the embedded Redis keeps its data.")
    ] = None,
    embedded: Annotated[
        str, typer.Option(help="Embedded Redis kind: auto, redis-server or fakeredis.")
    ] = "auto",
    log_level: Annotated[str, typer.Option(help="uvicorn log level.")] = "warning",
) -> None:
    """Run the API and a worker in one process (the quickest start).

    With no STREAMLEARN_REDIS_URL it starts an embedded Redis: a private redis-server with an
    append-only file in --data-dir when one is installed, else an in-memory fakeredis.

    Example:  streamlearn serve --port 8000
    """
    from service.cli.serve import serve as run_serve
    from service.settings import Settings

    if embedded not in ("auto", "redis-server", "fakeredis"):
        raise typer.BadParameter(f"must be auto, redis-server or fakeredis, got {embedded!r}")
    settings = Settings.from_flags(host=host, port=port, redis_url=redis_url, data_dir=data_dir)
    kind = None if embedded == "auto" else embedded
    raise typer.Exit(run_serve(settings, embedded=kind, log_level=log_level))  # type: ignore[arg-type]


@app.command()
def worker(
    burst: Annotated[bool, typer.Option(help="Return when every model is caught up.")] = False,
    redis_url: Annotated[
        str | None, typer.Option(help="redis://, rediss://, unix:// or memory:// URL.")
    ] = None,
    cluster: Annotated[bool | None, typer.Option(help="Talk to a Redis Cluster.")] = None,
    key_prefix: Annotated[str | None, typer.Option(help="Prefix of every key.")] = None,
    worker_id: Annotated[str | None, typer.Option(help="This worker's id.")] = None,
    log_level: Annotated[
        str, typer.Option(envvar="STREAMLEARN_LOG_LEVEL", help="Logging level.")
    ] = "INFO",
) -> None:
    """Run one learning worker (``python -m workers`` with the same options).

    Settings come from STREAMLEARN_* variables with these flags on top. First SIGTERM:
    commit what is in hand, release the leases, exit 0; a second one exits at once.

    Example:  STREAMLEARN_REDIS_URL=redis://127.0.0.1:6379/0 streamlearn worker
    """
    from service.settings import Settings
    from workers.start import run

    settings = Settings.from_flags(
        redis_url=redis_url, redis_cluster=cluster, key_prefix=key_prefix, worker_id=worker_id
    )
    raise typer.Exit(run(settings, burst=burst, log_level=log_level))


@app.command()
def api(
    host: HostOpt = DEFAULT_HOST,
    port: Annotated[int, typer.Option(envvar="STREAMLEARN_PORT", help="Port to listen on.")] = (
        DEFAULT_PORT
    ),
    workers: Annotated[int, typer.Option(min=1, help="API processes behind the one port.")] = 1,
    redis_url: Annotated[
        str | None, typer.Option(help="redis://, rediss:// (TLS), unix:// or memory:// URL.")
    ] = None,
    key_prefix: Annotated[str | None, typer.Option(help="Prefix of every key.")] = None,
    log_level: Annotated[str, typer.Option(help="uvicorn log level.")] = "info",
) -> None:
    """Run the HTTP API alone (uvicorn), for scale-out beside `streamlearn worker`.

    Settings come from STREAMLEARN_* variables with these flags on top; API keys from
    STREAMLEARN_API_KEYS ('key:learn,predict;adminkey:admin'), open with a warning if unset.

    Example:  STREAMLEARN_REDIS_URL=redis://127.0.0.1:6379/0 streamlearn api --workers 4
    """
    from service.api.server import run
    from service.settings import Settings

    settings = Settings.from_flags(host=host, port=port, redis_url=redis_url, key_prefix=key_prefix)
    run(settings, workers=workers, log_level=log_level)


@app.command()
def replay(
    file: Annotated[
        Path,
        typer.Argument(
            exists=True, dir_okay=False, help="NDJSON or svmlight file (.gz, .bz2, .xz too)."
        ),
    ],
    model: Annotated[str, typer.Option("--model", "-m", help="Model to post to.")],
    url: UrlOpt = DEFAULT_SERVICE_URL,
    api_key: KeyOpt = None,
    batch_size: Annotated[int, typer.Option(min=1, help="Examples per request.")] = 500,
    format: Annotated[
        str | None, typer.Option("--format", help="ndjson or svmlight (default: by extension).")
    ] = None,
    order: Annotated[
        Path | None,
        typer.Option(
            exists=True, dir_okay=False, help="File of ids, one a line: post in this order."
        ),
    ] = None,
    rate: Annotated[float, typer.Option(min=0, help="Pace in examples/s (0 = full speed).")] = 0.0,
    wait: Annotated[
        float,
        typer.Option(
            min=0,
            help="Seconds to wait until everything posted is learned and served (the last "
            "request waits up to 30 s for the version that covers it; 0 = do not wait).",
        ),
    ] = 60.0,
) -> None:
    """Post a file of examples to a running service, with a progress bar and final metrics.

    Keys an example does not have (a file's own metadata) are dropped from NDJSON lines, and
    counted; meta is kept.

    Example:  streamlearn replay stream.jsonl --model spam --order order.txt --batch-size 1000
    """
    from service.cli.commands import run_replay

    if format not in (None, "ndjson", "svmlight"):
        raise typer.BadParameter(f"--format must be ndjson or svmlight, got {format!r}")
    _client_call(
        url, api_key, run_replay, file, model,
        fmt_name=format, batch_size=batch_size, order=order, rate=rate, wait=wait,
    )  # fmt: skip


@app.command()
def demo(
    url: UrlOpt = DEFAULT_SERVICE_URL,
    api_key: KeyOpt = None,
    data: Annotated[
        Path | None,
        typer.Option(
            help="A directory holding Spambase (stream.jsonl or spambase.jsonl.gz); "
            "default: the copy shipped with streamlearn."
        ),
    ] = None,
    model: Annotated[str, typer.Option(help="Name of the demo model.")] = "spambase",
    rate: Annotated[
        float, typer.Option(min=0, help="Pace in examples/s (0 = full speed).")
    ] = 500.0,
    limit: Annotated[
        int | None, typer.Option(min=1, help="Post only the first N examples.")
    ] = None,
) -> None:
    """Create a model and replay Spambase into it (shuffled) so the dashboard has a show.

    Example:  streamlearn serve &  streamlearn demo  # then open http://127.0.0.1:8000/
    """
    from service.cli.commands import run_demo

    _client_call(url, api_key, run_demo, data=data, model=model, rate=rate, limit=limit)


@app.command()
def models(url: UrlOpt = DEFAULT_SERVICE_URL, api_key: KeyOpt = None) -> None:
    """List the models of a running service with their counters.

    Example:  streamlearn models --url http://127.0.0.1:8000
    """
    from service.cli.commands import show_models

    _client_call(url, api_key, show_models)


@app.command()
def metrics(
    model: ModelArg,
    url: UrlOpt = DEFAULT_SERVICE_URL,
    api_key: KeyOpt = None,
    json: Annotated[bool, typer.Option("--json", help="Print JSON for machines.")] = False,
) -> None:
    """Show a model's metrics: examples seen, mistakes, updates, rates, version, lag.

    Example:  streamlearn metrics spam --json
    """
    from service.cli.commands import show_metrics

    if json:
        import orjson

        out = _client_call(url, api_key, lambda client, _console: client.metrics(model))
        typer.echo(orjson.dumps(out, option=orjson.OPT_INDENT_2).decode())
        return
    _client_call(url, api_key, show_metrics, model)


@app.command()
def versions(
    model: ModelArg,
    url: UrlOpt = DEFAULT_SERVICE_URL,
    api_key: KeyOpt = None,
) -> None:
    """List a model's published versions (newest first; which one serves, which are pinned).

    Example:  streamlearn versions spam
    """
    from service.cli.commands import show_versions

    _client_call(url, api_key, show_versions, model)


@app.command()
def rollback(
    model: ModelArg,
    version: Annotated[int, typer.Argument(min=1, help="Version to return to.")],
    url: UrlOpt = DEFAULT_SERVICE_URL,
    api_key: KeyOpt = None,
) -> None:
    """Roll a model back to a version: a new version equal to it, the learner reset to it.

    Needs an admin key when the service has keys.

    Example:  streamlearn rollback spam 3 --api-key $ADMIN_KEY
    """
    from service.cli.commands import do_rollback

    _client_call(url, api_key, do_rollback, model, version)


@app.command()
def pin(
    model: ModelArg,
    version: Annotated[int, typer.Argument(min=1, help="Version to hold the head at.")],
    url: UrlOpt = DEFAULT_SERVICE_URL,
    api_key: KeyOpt = None,
) -> None:
    """Pin a model's served head to a version: predictions use it until unpinned, while
    learning goes on. Needs an admin key when the service has keys.

    Example:  streamlearn pin spam 3
    """
    from service.cli.commands import do_pin

    _client_call(url, api_key, do_pin, model, version)


@app.command()
def unpin(
    model: ModelArg,
    url: UrlOpt = DEFAULT_SERVICE_URL,
    api_key: KeyOpt = None,
) -> None:
    """Release a pin: the served head follows the newest version again.

    Example:  streamlearn unpin spam
    """
    from service.cli.commands import do_unpin

    _client_call(url, api_key, do_unpin, model)


@app.command("dead-letters")
def dead_letters(
    model: ModelArg,
    url: UrlOpt = DEFAULT_SERVICE_URL,
    api_key: KeyOpt = None,
    limit: Annotated[int, typer.Option(min=1, max=10_000, help="Show the newest N.")] = 100,
) -> None:
    """Show the stream entries a worker could not learn (dead letters), and why.

    Example:  streamlearn dead-letters spam --limit 20
    """
    from service.cli.commands import show_dead_letters

    _client_call(url, api_key, show_dead_letters, model, limit)


@app.command()
def evaluate(
    file: Annotated[
        Path,
        typer.Argument(
            help="NDJSON or svmlight file (.gz, .bz2, .xz too).", exists=True, dir_okay=False
        ),
    ],
    algorithm: Annotated[
        str | None, typer.Option("--algorithm", "-a", help="Algorithm name (see the registry).")
    ] = None,
    param: Annotated[
        list[str] | None, typer.Option("--param", "-p", help="Hyper-parameter K=V (repeatable).")
    ] = None,
    bits: Annotated[
        int | None, typer.Option(help="Hash into 2**BITS buckets (default 18).")
    ] = None,
    hashing: Annotated[
        bool,
        typer.Option("--hashing/--no-hashing", help="--no-hashing: names are indices < --dim."),
    ] = True,
    dim: Annotated[int | None, typer.Option(help="Dimension without hashing.")] = None,
    classes: Annotated[
        str | None, typer.Option(help="NEG,POS (the second is positive) or A,B,C for multi-class.")
    ] = None,
    fmt: Annotated[
        str | None, typer.Option("--format", help="ndjson or svmlight (default: from the suffix).")
    ] = None,
    order: Annotated[
        Path | None, typer.Option(help="File of ids, one a line: learn in that order (NDJSON).")
    ] = None,
    normalize: Annotated[bool, typer.Option(help="Scale each example to unit L2 norm.")] = False,
    transform: Annotated[
        str | None,
        typer.Option(help="Value transform of named features: none or log1p (preset's if unset)."),
    ] = None,
    preset: Annotated[str | None, typer.Option(help="A named preset, e.g. spam.")] = None,
    text: Annotated[
        str | None, typer.Option(help="Text options as JSON, e.g. '{\"char_ngrams\": [4, 4]}'.")
    ] = None,
    auc: Annotated[
        bool,
        typer.Option(help="Progressive ROC AUC and log loss, overall and rolling (binary models)."),
    ] = True,
    chunk: Annotated[int, typer.Option(help="Examples per learn call.")] = 10_000,
    json_out: Annotated[
        bool, typer.Option("--json", help="Print one JSON object as stdout's last line.")
    ] = False,
) -> None:
    """Progressive validation of a file: predict each example, then learn it, in order.

    Prints examples, mistakes, updates, mistake rate, ROC AUC (binary) and throughput. Keys
    an example does not have (a file's own metadata) are dropped, and counted.

    Example:  streamlearn evaluate mail.jsonl.gz --algorithm pa1 --classes ham,spam
    """
    from service.cli.evaluate_command import command

    raise typer.Exit(
        command(
            file, algorithm=algorithm, param=param, bits=bits, hashing=hashing, dim=dim,
            classes=classes, fmt=fmt, order=order, normalize=normalize, transform=transform,
            preset=preset, text=text, auc=auc, chunk=chunk, json_out=json_out,
        )
    )  # fmt: skip
