"""``python -m shardstream_cli``: the ``shardstream`` command."""

from . import main

main()
