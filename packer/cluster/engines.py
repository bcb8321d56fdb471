"""``pack`` in parts, start to end: plan (or the plan already there), the parts not done, then the commit."""

from __future__ import annotations

import os
import time
from pathlib import Path

from shardstream.errors import PackError
from shardstream.format import INDEX_NAME

from ..options import PackOptions
from ..pack import ProgressHook, clear_outputs, existing_outputs
from ..summary import PackSummary, summary_from_index
from .commit import commit
from .part import PartResult, part_done, run_part
from .plan import Plan, make_plan, parts_dir, remove_parts

ENGINES = ("local", "ray")


def _changed(before: dict[str, object], after: dict[str, object]) -> str:
    keys = sorted(k for k in set(before) | set(after) if before.get(k) != after.get(k))
    return ", ".join(f"{k}: {before.get(k)!r} -> {after.get(k)!r}" for k in keys)


def _prepare(source: str, out: Path, options: PackOptions, rows: int) -> Plan | None:
    """The plan to run, or None when OUTDIR already holds this finished pack."""
    out.mkdir(parents=True, exist_ok=True)
    if not parts_dir(out).exists():
        remove_parts(out)  # the leftovers of a commit stopped while deleting
    if options.overwrite:
        clear_outputs(out, options.prefix)
    wanted = make_plan(source, options, rows, cut=False).output_options
    if parts_dir(out).exists():
        if not options.resume:
            raise PackError(
                f"{out} holds an unfinished pack in parts ({parts_dir(out).name}); pass --resume to continue "
                "it, --overwrite to start over"
            )
        plan = Plan.load(out)
        changed = _changed(plan.output_options, wanted)
        if changed:
            raise PackError(
                f"cannot --resume with different options ({changed}); rerun with the original options or "
                "start over with --overwrite"
            )
        return plan
    if options.resume and (out / INDEX_NAME).exists():
        from shardstream.format import DatasetIndex

        if DatasetIndex.load(out / INDEX_NAME).options != wanted:
            raise PackError(f"{out}: holds a finished pack made with other options; use --overwrite")
        return None
    existing = existing_outputs(out)
    if existing:
        shown = ", ".join(p.name for p in existing[:3]) + (" ..." if len(existing) > 3 else "")
        raise PackError(
            f"{out} already holds shards or an index ({shown}); pass --overwrite to replace it, or choose an "
            "empty OUTDIR"
        )
    plan = make_plan(source, options, rows)
    plan.save(out)
    return plan


def pack_in_parts(
    source: str | os.PathLike[str],
    outdir: str | os.PathLike[str],
    options: PackOptions,
    *,
    partition_rows: int,
    engine: str = "local",
    ray_address: str | None = None,
    hook: ProgressHook | None = None,
) -> PackSummary:
    """Pack SOURCE in parts of ``partition_rows`` records: the same bytes on any engine and any number of
    workers; ``--resume`` skips finished parts and continues partial ones from their journals."""
    if engine not in ENGINES:
        raise ValueError(f"engine must be one of {ENGINES}, not {engine!r}")
    started = time.monotonic()
    out = Path(outdir).resolve()
    if not os.path.exists(source):
        raise PackError(f"{source}: no such directory or manifest file")
    plan = _prepare(os.fspath(source), out, options, partition_rows)
    if plan is None:
        return summary_from_index(out, started)
    hook = hook or ProgressHook()
    done = [part_done(out, n) for n in range(len(plan.slices))]
    todo = [n for n, result in enumerate(done) if result is None]
    resumed = sum(len(result.shards) for result in done if result is not None)
    if engine == "local":
        for number in todo:
            run_part(out, number, workers=options.workers, hook=hook)
    else:
        from .onray import run_on_ray

        def finished(result: PartResult) -> None:
            hook.part(result.samples, result.payload_bytes, len(result.shards))

        run_on_ray(out, todo, address=ray_address, in_flight=options.workers, on_done=finished)
    summary = commit(out, resumed_from_shard=resumed)
    summary.seconds = round(time.monotonic() - started, 3)
    return summary
