"""The card agent: runs on each card, serving ggml's RPC server and a small health endpoint.

    python -m launcher.card_agent --card 0 --listen 127.0.0.1:50052     (flags and settings: agent_settings.py)

The RPC protocol has no authentication: whoever reaches the port can read and write the card's
memory. So the agent binds loopback or an address the operator names with --allow-address (the
appliance's internal link), and refuses anything else, 0.0.0.0 included.
"""

from __future__ import annotations

import ipaddress
import json
import logging
import os
import signal
import socket
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from types import FrameType
from typing import Any

from app.engine import lifecycle
from app.engine.llama import ggml
from app.telemetry import sysfs
from launcher import tensor_cache
from launcher.agent_settings import AgentSettings, from_command_line

log = logging.getLogger("quartet.card")


class AddressRefused(ValueError):
    pass


def check_address(host: str, allowed: list[str]) -> str:
    """The address to bind for `host`; AddressRefused unless it is loopback or explicitly allowed.
    `localhost` becomes 127.0.0.1: the RPC server takes addresses, not names."""
    if host in allowed:
        return host
    if host == "localhost":
        return "127.0.0.1"
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        raise AddressRefused(f"{host!r} is not an IP address; give the card's address as digits") from None
    if address.is_loopback:
        return host
    raise AddressRefused(
        f"refusing to serve RPC on {host}: llama.cpp's RPC protocol has no authentication, so anyone "
        "who reaches this port controls the card. Bind to loopback, or to the appliance's internal "
        f"link with --allow-address {host} if that is what {host} is."
    )


class ProcessLoad:
    """CPU use of this process since the last reading, as % of the threads the card was given."""

    def __init__(self, threads: int) -> None:
        self.threads = threads
        self._last = (time.monotonic(), _cpu_seconds())
        self.pct = 0.0
        self._lock = threading.Lock()

    def sample(self) -> float:
        with self._lock:
            now, cpu = time.monotonic(), _cpu_seconds()
            wall = now - self._last[0]
            if wall >= 0.2:
                self.pct = max(0.0, min(100.0, 100.0 * (cpu - self._last[1]) / wall / self.threads))
                self._last = (now, cpu)
            return round(self.pct, 1)


def _cpu_seconds() -> float:
    times = os.times()
    return times.user + times.system


def _rss_bytes() -> int:
    try:
        pages = int(Path("/proc/self/statm").read_text().split()[1])
    except (OSError, IndexError, ValueError):
        return 0
    return pages * os.sysconf("SC_PAGE_SIZE")


class Agent:
    def __init__(self, *, card: int, endpoint: str, threads: int, sysfs_root: Path) -> None:
        self.card = card
        self.endpoint = endpoint
        self.sysfs_root = sysfs_root
        self.started = time.monotonic()
        self.load = ProcessLoad(threads)
        self.threads = threads

    def health(self) -> dict[str, Any]:
        # This agent serves the host CPU as a card: its memory is the machine's, and what the
        # card holds is what this process holds.
        _free, total = ggml.cpu_memory()
        rss = _rss_bytes()
        npu = sysfs.npu_load_pct(self.sysfs_root)
        return {
            "card": self.card,
            "rpc_endpoint": self.endpoint,
            "load_pct": npu if npu is not None else self.load.sample(),
            "load_source": "npu" if npu is not None else "process_cpu",
            "temperature_c": sysfs.temperature_c(self.sysfs_root),
            "thermal_zones": sysfs.thermal_zones(self.sysfs_root),
            "mem_used_bytes": rss,
            "mem_total_bytes": total,
            "threads": self.threads,
            "pid": os.getpid(),
            "uptime_s": round(time.monotonic() - self.started, 1),
        }


def _handler(agent: Agent) -> type[BaseHTTPRequestHandler]:
    class Health(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            if self.path.split("?")[0] != "/health":
                self.send_error(404, "only /health is served here")
                return
            body = json.dumps(agent.health()).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: Any) -> None:
            pass

    return Health


def _wait_listening(host: str, port: int, timeout: float, rpc: threading.Thread) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and rpc.is_alive():
        try:
            with socket.create_connection((host, port), timeout=0.5):
                return True
        except OSError:
            time.sleep(0.1)
    return False


def _port_taken(host: str, port: int) -> str | None:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind((host, port))
        except OSError as err:
            return err.strerror or str(err)
    return None


def _exit_when_done(rpc: threading.Thread, card: int) -> None:
    rpc.join()
    print(f"card {card}: the RPC server stopped; exiting", file=sys.stderr, flush=True)
    os._exit(1)


def serve(args: AgentSettings) -> int:
    listen = args.endpoint
    try:
        host = check_address(listen.host, args.allow_address)
    except AddressRefused as err:
        print(f"card {args.card}: {err}", file=sys.stderr)
        return 2
    port = listen.port
    endpoint = f"{host}:{port}"  # localhost given: the address it stands for
    busy = _port_taken(host, port)
    if busy:
        print(f"card {args.card}: could not listen on {args.listen}: {busy}", file=sys.stderr)
        return 1
    cache = args.cache_dir / f"card{args.card}" if args.cache_dir else None
    if cache:
        cache.mkdir(parents=True, exist_ok=True)
        dropped = tensor_cache.drop_suspects(cache)  # before the RPC server may read one back
        if dropped:
            print(f"card {args.card}: dropped {len(dropped)} cached tensor(s) written as it last stopped", flush=True)
        tensor_cache.keep_marking(cache)
    rpc = threading.Thread(
        target=ggml.serve_rpc,
        args=(endpoint,),
        kwargs={"cache_dir": cache, "threads": args.threads},
        name="rpc",
        daemon=True,
    )
    rpc.start()
    threading.Thread(target=_exit_when_done, args=(rpc, args.card), name="rpc-watch", daemon=True).start()
    if not _wait_listening(host, port, 30.0, rpc):
        print(f"card {args.card}: the RPC server could not listen on {endpoint} (port in use?)", file=sys.stderr)
        return 1
    agent = Agent(card=args.card, endpoint=endpoint, threads=args.threads, sysfs_root=args.sysfs_root)
    health_port = args.health
    try:
        httpd = ThreadingHTTPServer((host, health_port), _handler(agent))
    except OSError as err:
        print(f"card {args.card}: could not serve health on {host}:{health_port}: {err.strerror}", file=sys.stderr)
        return 1

    def stop(signum: int, _frame: FrameType | None) -> None:
        threading.Thread(target=httpd.shutdown, daemon=True).start()

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    print(f"card {args.card}: RPC on {args.listen}, health on http://{host}:{health_port}/health", flush=True)
    httpd.serve_forever(poll_interval=0.2)
    httpd.server_close()
    print(f"card {args.card}: stopped", flush=True)
    sys.stdout.flush()
    os._exit(0)  # the RPC server blocks in C for the life of the process; nothing to join


def main(argv: list[str] | None = None) -> int:
    args = from_command_line(argv)
    if args.die_with_parent:
        lifecycle.die_with_parent(signal.SIGTERM)
    return serve(args)


if __name__ == "__main__":
    sys.exit(main())
