"""A Ray head on this machine that lives exactly as long as the pack that started it, even after kill -9.

``ray.init()`` leaves Ray's agent processes running when its driver is killed; this head runs in its own
session, and ends it whole (every process Ray started in it) when the pack's end of its stdin closes.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

from shardstream.errors import PackError

_GRACE_SECONDS = 3.0
_STOP_SECONDS = _GRACE_SECONDS + 10.0  # the head's own grace, then a margin before we kill its session
AUTH_MODE = "RAY_AUTH_MODE"
AUTH_TOKEN = "RAY_AUTH_TOKEN"
AUTH_TOKEN_PATH = "RAY_AUTH_TOKEN_PATH"


def _ensure_token() -> None:
    """Give our own head a token of its own when the user has none: `ray start` refuses token mode
    without one, and writing ~/.ray/auth_token would outlive the pack (the variable dies with it)."""
    if os.environ.get(AUTH_TOKEN) or os.environ.get(AUTH_TOKEN_PATH):
        return
    if (Path.home() / ".ray" / "auth_token").exists():
        return
    os.environ[AUTH_TOKEN] = secrets.token_hex(32)


class LocalHead:
    """A ``ray start --head`` in a session of its own, ended by ``stop()`` (or by this process's death).

    ``stop()`` waits for the whole session to end, up to the head's grace period plus a margin, then kills
    it: a pack pays up to the grace (3 s; Ray's raylet and GCS rarely end sooner on TERM) at its end so that
    no Ray process outlives it.
    """

    def __init__(self, process: subprocess.Popen[bytes], address: str) -> None:
        self.process = process
        self.address = address

    @classmethod
    def start(cls, cpus: int) -> LocalHead:
        os.environ.setdefault(AUTH_MODE, "token")  # Ray's default for a new cluster, said out loud
        if os.environ[AUTH_MODE] == "token":
            _ensure_token()
        process = subprocess.Popen(
            [sys.executable, "-m", "packer.cluster.rayhead", str(cpus)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            start_new_session=True,
        )
        assert process.stdout is not None
        line = process.stdout.readline().decode("utf-8", "replace").strip()
        if not line.startswith("address "):
            process.wait()
            process.stdout.close()
            if process.stdin is not None:
                process.stdin.close()
            raise PackError(f"could not start a local Ray head: {line or 'it exited'}")
        return cls(process, line.split(" ", 1)[1])

    def stop(self) -> None:
        """End the head's session and wait until all of it is gone; kill it if it overstays its grace."""
        process = self.process
        if process.stdin is not None and not process.stdin.closed:
            process.stdin.close()  # the head's signal to end its session
        try:
            process.wait(timeout=_STOP_SECONDS)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGKILL)  # it leads its session's one process group
            process.wait()
        finally:
            if process.stdout is not None:
                process.stdout.close()


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def main(cpus: int) -> None:
    signal.signal(signal.SIGTERM, signal.SIG_IGN)  # the session-wide TERM below is for Ray's processes
    port = _free_port()
    ray = Path(sys.executable).with_name("ray")
    command = [
        *(str(ray), "start", "--head", f"--port={port}", f"--num-cpus={cpus}"),
        *("--node-ip-address=127.0.0.1", "--include-dashboard=false", "--disable-usage-stats"),
    ]
    started = subprocess.run(command, capture_output=True, text=True, check=False)
    if started.returncode != 0:
        tail = (started.stderr or started.stdout).strip().splitlines()[-1:] or ["no output"]
        print(f"error: `ray start` exited with {started.returncode}: {tail[0]}", flush=True)
        os.killpg(0, signal.SIGKILL)
    print(f"address 127.0.0.1:{port}", flush=True)
    sys.stdin.buffer.read()  # until the pack closes it, or dies and the kernel does
    os.killpg(0, signal.SIGTERM)
    deadline = time.monotonic() + _GRACE_SECONDS  # Ray's processes end themselves on TERM
    while time.monotonic() < deadline and _others_in_session() != []:
        time.sleep(0.05)
    # What is left after the grace: by pid too, since a Ray process may have a process group of its own.
    for pid in _others_in_session() or ():
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signal.SIGKILL)
    os.killpg(0, signal.SIGKILL)  # and this process


def live_sessions() -> dict[int, int] | None:
    """pid -> session id of every live (not zombie) process, from /proc (None where /proc is not)."""
    proc = Path("/proc")
    if not proc.is_dir():
        return None
    found = {}
    for stat in proc.glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if fields[0] != "Z":
            found[int(stat.parent.name)] = int(fields[3])
    return found


def _others_in_session() -> list[int] | None:
    """The live processes other than this one in this session (None where /proc is not: cannot tell)."""
    me, session, live = os.getpid(), os.getsid(0), live_sessions()
    if live is None:
        return None
    return [pid for pid, of in live.items() if of == session and pid != me]


if __name__ == "__main__":
    main(int(sys.argv[1]))
