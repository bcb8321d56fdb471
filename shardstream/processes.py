"""Pool workers that leave with their parent: a watchdog thread polls it, so a kill -9 strands nothing."""

from __future__ import annotations

import os
import threading
import time


def alive(pid: int) -> bool:
    """Whether ``pid`` runs: a zombie (killed, not yet reaped by its own parent) counts as dead, since a
    caller waiting on our shared output pipes would never reap it while we hold them open."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        with open(f"/proc/{pid}/stat", "rb") as handle:
            state = handle.read().rsplit(b")", 1)[1].split()[0]
    except (OSError, IndexError):
        return True  # no /proc (macOS): the signal test is all there is
    return state not in (b"Z", b"X")


def exit_with_parent(parent: int) -> None:
    """Pool initializer: leave when ``parent`` dies, even by kill -9, instead of lingering forever."""

    def watch() -> None:
        while alive(parent):
            time.sleep(1.0)  # a watchdog's poll, not an error handler's retry
        os._exit(1)

    threading.Thread(target=watch, name="shardstream-parent-watch", daemon=True).start()
