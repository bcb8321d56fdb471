"""ShardDataset's resumption: its state as plain data, a state loaded and checked, and where the chain
starts from it (the same topology's exact continuation, or an elastic restore's deal, by samples or by
cost under a token budget). A mixin: ShardDataset's chain, shards and options are its own."""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from typing import Any

from ..budget.plan import SlotPlan
from ..budget.setup import budget_held, budget_identity, budget_original, budget_restored, check_budget_state
from ..elastic.deal import Plan, deal
from ..elastic.restore import check_identity, dataset_digest, elastic_pending
from .base import Place, check_place
from .saved import check_chain_state, saved_fields, saved_plan
from .shardchain import plan_segments


class ShardResume:
    """``state_dict``/``load_state_dict`` and the resume point of ``ShardDataset`` (which mixes it in)."""

    _pending: dict[str, Any] | None
    _plan: Plan | None
    _restored: SlotPlan | None
    _digest: str | None

    def state_dict(self) -> dict[str, Any]:
        """Where this dataset stands, as plain data (for ``torch.save``, JSON, a StatefulDataLoader).

        Schema: ``epoch`` (int); ``place`` (``[rank, world, worker, workers]`` of the chain in use, or None
        before one started); ``node`` (the chain's state, outermost node first, each inner node's state
        under ``"source"``: stand-ins ``{"owed", "last"}``, the decoding ``Mapper`` only ``"source"``, the
        shuffle buffer ``{"buffer": [[shard, index], ...], "rng"}``, the reader ``{"segment", "done"}``;
        None before a chain started); ``plan`` (the deal an elastic
        restore gave this place, or None); and the identity a state must share to load: ``dataset`` (a
        digest of the shards and counts), ``seed``, ``shuffle``, ``remainder``, and with ``batch_tokens``,
        ``budget`` (its options; the batcher's state ``{"pool", "batches", "cost_left", "samples_left",
        "arrival", "last"}`` outermost in ``node``). Loaded but not yet read,
        the loaded state is returned as it was (an elastic one with ``left``: what the epoch has left).
        """
        if self._pending is not None:  # loaded, not yet iterated: a checkpoint now must not lose it
            pending = {k: v.to_state() if isinstance(v, Plan) else v for k, v in self._pending.items()}
            return {**copy.deepcopy(pending), **self._identity()}
        plan = self._plan.to_state() if self._plan is not None else None
        return {**self._position(), "plan": plan, **self._identity()}

    def _position(self) -> dict[str, Any]:
        if self._chain is None:
            return {"epoch": self.epoch, "place": None, "node": None}
        chain, epoch, place = self._chain
        return {"epoch": epoch, "place": list(place), "node": chain.get_state()}

    def load_state_dict(self, state: Mapping[str, Any] | Sequence[Mapping[str, Any]]) -> None:
        """Continue, on the next iteration, where the run that saved ``state`` stood.

        ``state``: this rank's own state (or its DataLoader worker's), to continue identically on the same
        world size and workers; or the list of every old rank's states (``ShardDataset`` or
        ``StatefulDataLoader`` states, in rank order), to continue the epoch on any world size and
        workers, every sample still once (``streamer/elastic/restore.py``). Checked here, before any sample is
        read: identity, every key's type and range, the chain's state as this place's chain would have saved
        it (``saved.py``); a ValueError names the bad key.
        """
        check_budget_state(state, self.budget)
        if isinstance(state, Sequence):
            budgeted = {"original": budget_original(self), "held": budget_held} if self.budget else {}
            self._pending = elastic_pending(state, identity=self._identity(), shards=self.shards, **budgeted)
            return
        own = saved_fields(state, "ShardDataset")
        check_identity(own, self._identity())
        plan = saved_plan(own["plan"], "plan", self.shards) if own.get("plan") is not None else None
        if "left" in own:
            saved_plan(own["left"], "left", self.shards)
        if own.get("node"):  # the chain its place and epoch build checks its saved state
            place: Place = tuple(int(v) for v in own["place"])  # type: ignore[assignment]
            chain = self._build(place, int(own["epoch"]), plan, reads=False)
            check_chain_state(chain, own["node"], self.shards, resampled=self.placement.resampled)
        self._pending = own

    def _identity(self) -> dict[str, Any]:
        if self._digest is None:
            self._digest = dataset_digest(self.shards)
        p = self.placement
        budget = budget_identity(self.budget)
        return {
            "dataset": self._digest,
            "seed": p.seed,
            "shuffle": p.shuffle,
            "remainder": p.remainder,
            **budget,
        }

    def _start(self, pending: dict[str, Any] | None, place: Place) -> tuple[int, Any]:
        epoch, node_state, self._plan = self._resume_point(pending, place)
        return epoch, node_state

    def _resume_point(
        self, pending: dict[str, Any] | None, place: Place
    ) -> tuple[int, dict[str, Any] | None, Plan | None]:
        """The epoch to read, the chain's state to start from and the plan dealt by an elastic restore."""
        if not pending:
            return self.epoch, None, None
        if "left" in pending:  # an elastic restore: this place's deal of what the epoch has left
            rank, world, worker, workers = place
            left = pending["left"] if isinstance(pending["left"], Plan) else Plan.from_state(pending["left"])
            if self.budget is not None:  # dealt by cost, to a target every new worker meets
                self._restored = budget_restored(self, place, int(pending["epoch"]), left)
                return int(pending["epoch"]), None, self._restored.dealt
            plan = deal(
                left,
                rank=rank,
                world=world,
                worker=worker,
                workers=workers,
                remainder=self.placement.remainder,
            )
            return int(pending["epoch"]), None, plan
        plan = Plan.from_state(pending["plan"]) if pending.get("plan") is not None else None
        if pending.get("node") is None:
            return int(pending["epoch"]), None, plan
        check_place(pending["place"], place)
        return int(pending["epoch"]), pending["node"], plan

    def _budget_resumed(self, plan: Plan, epoch: int) -> SlotPlan:
        """A budgeted chain that reads an elastic restore's deal: the slot planned when the restore was
        loaded, or, resuming a state saved since, the deal's segments (its target is in the state)."""
        restored, self._restored = self._restored, None
        if restored is not None and restored.dealt == plan:
            return restored
        return SlotPlan(list(plan_segments(self, plan, epoch)), 1, dealt=plan)
