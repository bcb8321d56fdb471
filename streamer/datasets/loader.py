"""StatefulLoader: torchdata's StatefulDataLoader that refuses a bad state at ``load_state_dict``, at the
cost of loading each worker's state once more there, in the parent.

torchdata's loader only keeps a loaded state; its workers load it, so a state of another seed or worker
count is refused at the first batch, as a worker's traceback. This one asks the dataset first
(``StreamBase.check_state``), so the refusal is a ValueError where the state was loaded, before any worker
starts. torchdata is not a dependency of shardstream: only this loader needs it.
"""

from __future__ import annotations

from typing import Any

try:
    from torchdata.stateful_dataloader import StatefulDataLoader
except ImportError as exc:  # pragma: no cover - the tests install torchdata
    raise ImportError(
        "streamer.StatefulLoader is torchdata's StatefulDataLoader with a state check: pip install torchdata"
    ) from exc


class StatefulLoader(StatefulDataLoader):
    """A ``StatefulDataLoader`` whose ``load_state_dict`` refuses, there, a state its dataset would refuse.

    Takes exactly ``StatefulDataLoader``'s arguments (``dataset``, ``batch_size``, ``num_workers``,
    ``collate_fn``, ``snapshot_every_n_steps``, ...; see torchdata's documentation) and behaves the same,
    batch for batch and state for state. A dataset with a ``check_state(state, workers=...)``
    (``ShardDataset``, ``Mixture``) checks the state at load: another dataset, seed, shuffle or remainder,
    a damaged state, or one saved at another rank, world size or worker count is a ValueError naming the
    reason. Other datasets load as with ``StatefulDataLoader``.
    """

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        """Check ``state_dict``, then keep it for the next iteration as ``StatefulDataLoader`` does.

        ``state_dict``: what a ``StatefulDataLoader``'s (or this loader's) ``state_dict()`` returned, as
        saved; ``{}`` starts afresh. ValueError, before any worker starts, if the dataset refuses it.
        """
        check = getattr(self.dataset, "check_state", None)
        if state_dict and check is not None:
            check(state_dict, workers=self.num_workers)
        super().load_state_dict(state_dict)
