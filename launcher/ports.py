"""Before the launcher starts anything: is each port it needs free, and if not, what holds it.

A port someone listens on is taken: the launcher exits at once naming the port and the process (a second
`make run`, another program). A port held only by TIME_WAIT — a connection that just closed — frees itself
within a minute, and ggml's RPC server binds without SO_REUSEADDR, so the launcher waits for it, saying why.
Read from /proc/net/tcp{,6} and /proc/<pid>/fd (Linux); elsewhere, a bind test alone.
"""

from __future__ import annotations

import os
import socket
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

_LISTEN, _TIME_WAIT = "0A", "06"
_WAIT_S = 90.0  # TIME_WAIT lasts 60 s on Linux


class PortTaken(RuntimeError):
    """A port the launcher needs is held by a listening process (named when it can be found)."""


@dataclass(frozen=True)
class Holder:
    state: str  # "listening" or "time-wait"
    pid: int | None = None
    command: str = ""

    def __str__(self) -> str:
        if self.pid is None:
            return "another process (not visible to this user)" if self.state == "listening" else "TIME_WAIT"
        return f"process {self.pid} ({self.command})"


def holders(port: int, *, proc: Path = Path("/proc")) -> list[Holder]:
    """Who holds TCP `port` on this machine: listeners (with their process where visible) and TIME_WAITs."""
    found: list[Holder] = []
    for table in ("tcp", "tcp6"):
        try:
            lines = (proc / "net" / table).read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            fields = line.split()
            local, state, inode = fields[1], fields[3], fields[9]
            if int(local.rsplit(":", 1)[1], 16) != port:
                continue
            if state == _LISTEN:
                found.append(_listener(inode, proc))
            elif state == _TIME_WAIT:
                found.append(Holder("time-wait"))
    return found


def _listener(inode: str, proc: Path) -> Holder:
    wanted = f"socket:[{inode}]"
    for pid_dir in proc.iterdir():
        if not pid_dir.name.isdigit():
            continue
        try:
            if any(os.readlink(fd) == wanted for fd in (pid_dir / "fd").iterdir()):
                command = (pid_dir / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace").strip()
                return Holder("listening", int(pid_dir.name), command[:200])
        except OSError:
            continue
    return Holder("listening")


def bindable(host: str, port: int) -> bool:
    """Whether `host:port` can be bound now as the RPC server will bind it (no SO_REUSEADDR)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as sock:
        try:
            sock.bind((host, port))
        except OSError:
            return False
    return True


def wait_free(
    ports: dict[tuple[str, int], str],
    *,
    say: Callable[[str], None] = print,
    wait_s: float = _WAIT_S,
    proc: Path = Path("/proc"),
) -> None:
    """Return once every port is bindable; raise PortTaken at once for one a process listens on, or when a
    TIME_WAIT outlasts `wait_s`. `ports` maps (host, port) to what needs it ("card agent 0's RPC port")."""
    deadline = time.monotonic() + wait_s
    told: set[int] = set()
    for (host, port), what in ports.items():
        while not bindable(host, port):
            held = holders(port, proc=proc)
            listening = [h for h in held if h.state == "listening"]
            if listening:
                raise PortTaken(f"port {port} ({what}) is taken by {listening[0]}: stop it, or move Quartet's ports")
            if time.monotonic() > deadline:
                raise PortTaken(f"port {port} ({what}) did not come free within {wait_s:.0f} s ({held or 'unknown'})")
            if port not in told:
                told.add(port)
                say(f"launcher: waiting for port {port} ({what}): a connection that just closed holds it (TIME_WAIT)")
            time.sleep(0.5)
