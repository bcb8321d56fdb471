"""``pack`` in parts, start to end: plan (or the plan already there), the parts not done, then the commit."""

from __future__ import annotations

import contextlib
import os
import time

from shardstream.errors import PackError, redact_url
from shardstream.format import INDEX_NAME, OFFSETS_SUFFIX, REJECTS_NAME, SHARD_SUFFIX, DatasetIndex
from shardstream.format.constants import COLUMNS_NAME
from shardstream.io.urls import is_remote
from shardstream.parallel import process_pool

from ..options import PackOptions
from ..outdir import clear_outputs, existing_outputs
from ..progress import ProgressHook
from ..summary import PackSummary
from .commit import commit, committed
from .part import PartResult, part_done, run_part
from .plan import PARTS_DIR_NAME, PLAN_REL, Plan, make_plan, remove_parts
from .store import Store, open_store

ENGINES = ("local", "ray")


def _changed(before: dict[str, object], after: dict[str, object]) -> str:
    keys = sorted(k for k in set(before) | set(after) if before.get(k) != after.get(k))
    return ", ".join(f"{k}: {before.get(k)!r} -> {after.get(k)!r}" for k in keys)


def clear_parts_outputs(store: Store, prefix: str) -> None:
    """``--overwrite``: this dataset's files in OUTDIR go (other prefixes' shards stay)."""
    if not store.remote:
        store.local("").mkdir(parents=True, exist_ok=True)
        clear_outputs(store.local(""), prefix)
        return
    remove_parts(store)
    for name in store.names():
        ours = name.startswith(f"{prefix}-") and name.endswith((SHARD_SUFFIX, OFFSETS_SUFFIX))
        if ours or name in (INDEX_NAME, COLUMNS_NAME, REJECTS_NAME):
            store.delete(name)


def _existing(store: Store) -> list[str]:
    if not store.remote:
        return [p.name for p in existing_outputs(store.local(""))]
    return [n for n in store.names() if n in (INDEX_NAME, PARTS_DIR_NAME) or n.endswith(SHARD_SUFFIX)]


def _prepare(source: str, store: Store, options: PackOptions, rows: int) -> Plan | None:
    """The plan to run, or None when OUTDIR already holds this finished pack."""
    if options.overwrite:
        clear_parts_outputs(store, options.prefix)
    if not store.remote:
        store.local("").mkdir(parents=True, exist_ok=True)
    wanted = make_plan(source, options, rows, cut=False).output_options
    if store.exists(PLAN_REL):
        if not options.resume:
            raise PackError(
                f"{store.shown} holds an unfinished pack in parts ({PARTS_DIR_NAME}); pass --resume to "
                "continue it, --overwrite to start over"
            )
        plan = Plan.load(store)
        changed = _changed(plan.output_options, wanted)
        if changed:
            raise PackError(
                f"cannot --resume with different options ({changed}); rerun with the original options or "
                "start over with --overwrite"
            )
        return plan
    if committed(store):
        remove_parts(store)  # the leftovers of a commit stopped while deleting
        if options.resume:
            data = store.read(INDEX_NAME) or b""
            if DatasetIndex.from_json(data.decode("utf-8"), source=store.shown).options != wanted:
                raise PackError(f"{store.shown}: holds a finished pack with other options; use --overwrite")
            return None
    existing = _existing(store)
    if existing:
        shown = ", ".join(existing[:3]) + (" ..." if len(existing) > 3 else "")
        raise PackError(
            f"{store.shown} already holds shards or an index ({shown}); pass --overwrite to replace it, or "
            "choose an empty OUTDIR"
        )
    plan = make_plan(source, options, rows)
    plan.save(store)
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
    """Pack SOURCE in parts of ``partition_rows`` records into OUTDIR (a folder, or an fsspec URL such as
    s3://bucket/shards): the same bytes on any engine and any number of workers; ``--resume`` skips
    finished parts and continues partial ones from their journals."""
    if engine not in ENGINES:
        raise ValueError(f"engine must be one of {ENGINES}, not {engine!r}")
    if not isinstance(source, (str, os.PathLike)):
        raise ValueError(
            f"source must be a path for a pack in parts (each part reads its own slice of it), not a "
            f"{type(source).__name__}; Python records pack with packer.pack, or write them to Parquet first"
        )
    started = time.monotonic()
    store = open_store(outdir)
    if is_remote(os.fspath(source)):
        raise PackError(
            f"{redact_url(os.fspath(source))}: SOURCE must be a local folder or manifest (its records may "
            "name media by URL, and --media-root may be one); copy the manifest here first"
        )
    if not os.path.exists(source):
        raise PackError(f"{source}: no such directory or manifest file")
    plan = _prepare(os.fspath(source), store, options, partition_rows)
    if plan is None:
        return commit(store)
    hook = hook or ProgressHook()
    done = [part_done(store, n) for n in range(len(plan.slices))]
    todo = [n for n, result in enumerate(done) if result is None]
    resumed = sum(len(result.shards) for result in done if result is not None)
    hook.total(sum(piece.count for piece in plan.slices))  # the plan counted them: no second pass
    if len(todo) < len(done):
        hook.resumed(sum(piece.count for n, piece in enumerate(plan.slices) if done[n] is not None))
    where = store.url if store.remote else str(store.root)  # type: ignore[union-attr]
    if engine == "local":
        # One loader pool for every part: its workers' start-up (imports) is paid once, not per part.
        with contextlib.ExitStack() as stack:
            pool = stack.enter_context(process_pool(options.workers)) if options.workers > 1 else None
            for number in todo:
                run_part(where, number, workers=options.workers, hook=hook, pool=pool)
    else:
        from .onray import run_on_ray

        def finished(result: PartResult) -> None:
            hook.part(result.samples, result.payload_bytes, len(result.shards), sum(result.rejected.values()))

        run_on_ray(
            where, todo, address=ray_address, in_flight=options.workers, on_done=finished, note=hook.note
        )
    summary = commit(store, resumed_from_shard=resumed)
    summary.seconds = round(time.monotonic() - started, 3)
    return summary
