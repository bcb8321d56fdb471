"""``python -m shardstream.cli``: the ``shardstream`` command."""

from . import main

main()
