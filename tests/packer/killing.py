"""A pack killed with SIGKILL at a planned point, in a child process: what the resume tests start from.

``pack_killed(source, out, options, shards=S, samples=N)`` packs ``source`` into ``out`` with
``PackOptions(**options)`` and kills itself at the N-th sample it reads once S shards are published
(``rejects=R`` instead: at the R-th reject after them); the child ends by SIGKILL or the call fails.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

_KILLER = textwrap.dedent(
    """
    import json, os, signal, sys
    from packer import PackOptions, ProgressHook, pack

    source, out, options = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
    shards, samples, rejects = map(int, sys.argv[4:7])

    class Kill(ProgressHook):
        published = seen = refused = 0

        def shard(self, count):
            self.published = count

        def sample(self, nbytes):
            self.seen += self.published >= shards
            if samples and self.seen >= samples:
                os.kill(os.getpid(), signal.SIGKILL)

        def reject(self, reject):
            self.refused += self.published >= shards
            if rejects and self.refused >= rejects:
                os.kill(os.getpid(), signal.SIGKILL)

    pack(source, out, PackOptions(**options), hook=Kill())
    raise SystemExit("the pack finished before the planned kill")
    """
)


def pack_killed(
    source: Path,
    out: Path,
    options: dict[str, Any],
    *,
    shards: int,
    samples: int = 0,
    rejects: int = 0,
    timeout: float = 120,
) -> None:
    """Pack, killed as the module says; AssertionError (with the child's stderr) when it was not."""
    if not samples and not rejects:
        raise ValueError("give samples or rejects: where the pack is killed")
    args = [str(source), str(out), json.dumps(options), str(shards), str(samples), str(rejects)]
    done = subprocess.run(
        [sys.executable, "-c", _KILLER, *args], capture_output=True, text=True, timeout=timeout
    )
    assert done.returncode == -signal.SIGKILL, done.stderr
