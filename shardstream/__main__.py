"""``python -m shardstream``: the ``shardstream`` command."""

from .cli import main

main()
