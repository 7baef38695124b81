"""The client side of streamlearn: the ``streamlearn`` command line and what it starts.

- :mod:`~service.cli.launch` — the console script; a valid ``evaluate`` command line runs
  from here without importing typer, rich, httpx or the server stack.
- :mod:`~service.cli.app` — the typer app: every command, its flags and help texts.
- :mod:`~service.cli.serve`, :mod:`~service.cli.embedded`, :mod:`~service.cli.datadir` —
  ``streamlearn serve``: API and worker in one process, on an embedded Redis by default.
- :mod:`~service.cli.commands`, :mod:`~service.cli.replay` — the commands that talk to a
  running service through :class:`service.client.Client`.
- :mod:`~service.cli.evaluate`, :mod:`~service.cli.svmlight`, :mod:`~service.cli.datasets` —
  offline progressive validation of a file, and the file readers it shares with ``replay``.

Nothing is imported here, so that ``streamlearn evaluate`` stays quick to start.
"""
