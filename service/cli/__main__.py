"""``python -m service.cli ARGS``: the same as the ``streamlearn`` console script."""

from service.cli.launch import main

main()
