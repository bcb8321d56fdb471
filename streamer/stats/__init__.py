"""Where the loader's time goes: statistics cheap enough to leave on, a verdict, a stall watchdog, exports.

- ``sampler.py``: the thread per process that reads the reading thread's clocks and writes its row;
  ``clocks.py``: those clocks over one iteration, by stage.
- ``timers.py``: the decoding clock (per thread, split by kind of member).
- ``table.py``: the rows in shared memory, one per process, read by ``ds.stats()``.
- ``watchdog.py``: a process handing out nothing for N seconds named, with its shard, offset and stack.
- ``watch.py``: the trainer's view, ``for batch in watch(loader):``: exposed data wait, p50/p99.
- ``verdict.py``: the numbers read into one plain verdict (decode-bound, io-bound, hand-off-bound, ...).
- ``options.py``: ``MonitorOptions`` (``monitor=`` of ShardDataset and Mixture).
- ``export.py``: JSON lines, TensorBoard scalars and ``export()``; ``prometheus.py``: the endpoint;
  ``ticker.py``: what they share (the snapshot flattened, the ticking thread).
"""

from .options import MonitorOptions
from .verdict import verdict
from .watch import Watch, watch

__all__ = ["MonitorOptions", "Watch", "verdict", "watch"]
