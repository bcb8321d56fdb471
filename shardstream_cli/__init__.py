"""The ``shardstream`` command: one typer app, one module per command group, each loading only what it runs.

pack (``cli/pack.py``; its plan, part and commit steps in ``cli/packparts.py``), index (``cli/index.py``),
columns (``cli/columns.py``), info, stats and verify (``cli/inspect.py``), ls and cat (``cli/look.py``),
stream (``cli/stream.py``), demo (``demo/command.py``). The packer and the streamer are imported inside
the commands that use them, so ``shardstream --help``, ``info`` or ``ls`` never pay for torch.
"""

from __future__ import annotations

import typer

from . import columns, index, inspect, look, packparts, stream, subset
from .common import APP_SETTINGS, CommandList
from .demo import command as demo

__all__ = ["app", "main"]

app = typer.Typer(
    name="shardstream",
    cls=CommandList,
    help="Pack multimodal data into WebDataset-style tar shards and stream them into PyTorch.",
    no_args_is_help=True,
    **APP_SETTINGS,
)
app.add_typer(packparts.pack_app(), name="pack")
app.command("index")(index.index_command)
app.command("columns")(columns.columns_command)
app.command("info")(inspect.info_command)
app.command("stats")(inspect.stats_command)
app.command("ls")(look.ls_command)
app.command("cat")(look.cat_command)
app.command("verify")(inspect.verify_command)
app.command("stream")(stream.stream_command)
app.command("subset")(subset.subset_command)
app.command("demo")(demo.demo_command)


def main() -> None:
    app()
