"""``shardstream pack plan|part|commit``: a pack in parts driven by any scheduler (a SLURM array, Spark).

``pack`` is a group whose default command is the pack itself, so ``shardstream pack SOURCE OUTDIR`` works
as it always did; only the words plan, part and commit in first place pick a step.
"""

from __future__ import annotations

import inspect
import os
import typing
from typing import Annotated, Any

import click
import typer
from typer.core import TyperGroup

from shardstream.errors import ShardstreamError

from .common import APP_SETTINGS, JsonFlag, echo_json, fail, shown_path
from .pack import apply_config, pack_command, pack_options, print_summary

DEFAULT = "run"
SLURM_TASK = "SLURM_ARRAY_TASK_ID"


def _usage_without_name(context_class: type[Any]) -> type[Any]:
    # Subclassed from the class in use: typer may carry its own copy of click.
    class DefaultContext(context_class):  # type: ignore[misc,valid-type]
        @property
        def command_path(self) -> str:
            return str(super().command_path).rstrip()

    DefaultContext.usage_without_name = True  # type: ignore[attr-defined]
    return DefaultContext


class PackGroup(TyperGroup):
    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        if not args or args[0] not in self.commands or args[0] == DEFAULT:
            args = [DEFAULT, *args]
        return super().parse_args(ctx, args)

    def resolve_command(
        self, ctx: click.Context, args: list[str]
    ) -> tuple[str | None, click.Command | None, list[str]]:
        name, command, rest = super().resolve_command(ctx, args)
        if name != DEFAULT or command is None:
            return name, command, rest
        # Its usage reads `shardstream pack [OPTIONS] SOURCE OUTDIR`, not `shardstream pack run ...`.
        if not getattr(command.context_class, "usage_without_name", False):
            command.context_class = _usage_without_name(command.context_class)
        return "", command, rest


OutdirArgument = Annotated[
    str, typer.Argument(help="The pack's OUTDIR (a folder or a URL), holding the plan and the parts.")
]
PartOption = Annotated[
    int | None,
    typer.Option("--part", help=f"Which part to pack (default: ${SLURM_TASK}, a SLURM array's task id)."),
]
WorkersOption = Annotated[int, typer.Option(help="Processes reading and transcoding within the part.")]

_PLAN_SKIPS = ("engine", "ray_address", "resume", "workers", "quiet")


def plan_command(ctx: typer.Context, **params: Any) -> None:
    """Plan a pack in parts: cut SOURCE into parts of --partition-rows records (in OUTDIR/.shardstream-parts).

    Then run `shardstream pack part OUTDIR --part N` for N in 0..parts-1 (anywhere, in any order, again
    after a crash: a finished part is skipped, a partial one continues), and `shardstream pack commit OUTDIR`
    once all are done. Prints the number of parts.

    Example: shardstream pack plan data/ /nfs/shards --partition-rows 100000
    """
    from packer.cluster import make_plan
    from packer.cluster.engines import clear_parts_outputs
    from packer.cluster.plan import DEFAULT_PARTITION_ROWS, PLAN_REL
    from packer.cluster.store import open_store

    values = apply_config(ctx, params.get("config"), dict(ctx.params))
    values.update({"workers": 1, "resume": False, "engine": None, "ray_address": None, "quiet": True})
    try:
        options = pack_options(values)
        store = open_store(values["outdir"])
        if store.exists(PLAN_REL) and not options.overwrite:
            raise fail(f"{store.shown} already holds a plan; pass --overwrite to plan again (its parts go)")
        if options.overwrite:
            clear_parts_outputs(store, options.prefix)
        plan = make_plan(values["source"], options, values["partition_rows"] or DEFAULT_PARTITION_ROWS)
        plan.save(store)
    except ValueError as exc:
        raise fail(str(exc), 2) from exc
    except ShardstreamError as exc:
        raise fail(str(exc)) from exc
    where = shown_path(store.shown)
    doc = {"plan": f"{where}/{PLAN_REL}", "parts": len(plan.slices), "source": shown_path(plan.source)}
    if params.get("as_json"):
        echo_json(doc)
    else:
        typer.echo(f"planned {doc['parts']} parts of {plan.partition_rows} records: {doc['plan']}")
        last = doc["parts"] - 1
        typer.echo(f"next: shardstream pack part {where} --part N  (N = 0..{last}), then commit")


def _plan_signature() -> None:
    """``plan`` takes pack's options (they fix the bytes), less those about running it."""
    hints = typing.get_type_hints(pack_command, include_extras=True)
    params = [
        p.replace(annotation=hints.get(p.name, p.annotation))
        for p in inspect.signature(pack_command).parameters.values()
        if p.name not in _PLAN_SKIPS
    ]
    plan_command.__signature__ = inspect.Signature(params)  # type: ignore[attr-defined]
    plan_command.__annotations__ = {p.name: p.annotation for p in params}


_plan_signature()


def part_command(
    outdir: OutdirArgument, part: PartOption = None, workers: WorkersOption = 1, as_json: JsonFlag = False
) -> None:
    """Pack one part of a planned pack (see `shardstream pack plan --help`); safe to run again.

    Example: sbatch --array=0-127 --wrap 'shardstream pack part /nfs/shards'
    """
    from packer.cluster import run_part

    if part is None:
        task = os.environ.get(SLURM_TASK)
        if task is None or not task.isdigit():
            raise fail(f"pass --part N (or run it as a SLURM array task, which sets ${SLURM_TASK})", 2)
        part = int(task)
    try:
        result = run_part(outdir, part, workers=workers)
    except ShardstreamError as exc:
        raise fail(str(exc)) from exc
    doc = {"part": part, "shards": len(result.shards), "samples": result.samples, "rejected": result.rejected}
    if as_json:
        echo_json(doc)
    else:
        typer.echo(f"part {part}: {result.samples} samples in {len(result.shards)} shards")


def commit_command(outdir: OutdirArgument, as_json: JsonFlag = False) -> None:
    """Commit a planned pack once every part is done: shards renamed, rejects, index; safe to run again."""
    from packer.cluster import commit

    try:
        summary = commit(outdir)
    except ShardstreamError as exc:
        raise fail(str(exc)) from exc
    print_summary(summary, as_json)


def pack_app() -> typer.Typer:
    about = "Pack raw files or a manifest into shards (plan, part, commit: in parts)."
    app = typer.Typer(cls=PackGroup, help=about, **APP_SETTINGS)
    app.command(DEFAULT, hidden=True)(pack_command)
    app.command("plan")(plan_command)
    app.command("part")(part_command)
    app.command("commit")(commit_command)
    return app
