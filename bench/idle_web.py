"""CPU of an idle web server with three Gradio pages: Gradio's own idle polling ÷ the app's (app/server.py).

    .venv/bin/python bench/idle_web.py [--seconds 30]

Starts two servers side by side on loopback, each mounting three small Gradio pages with a queue as the app
mounts its chat, kiosk and admin pages: one with Gradio's queue as it comes (it looks for work every 1 ms),
one calmed as the app calms it (`app.server._calm_queue`). Nobody calls them. Prints each one's CPU seconds
over the same window and their ratio.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

SERVER = """
import sys
import fastapi, gradio as gr, uvicorn
sys.path.insert(0, {root!r})
from app.server import _calm_queue
api = fastapi.FastAPI()
for path in ("/chat", "/kiosk", "/admin"):
    with gr.Blocks() as page:
        box = gr.Textbox()
        box.submit(lambda text: text, box, box)
    page.queue(default_concurrency_limit=1)
    gr.mount_gradio_app(api, page, path=path, ssr_mode=False)
    if {calm}:
        _calm_queue(page)
uvicorn.run(api, host="127.0.0.1", port={port}, log_level="warning")
"""


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seconds", type=float, default=30.0)
    parser.add_argument("--first-port", type=int, default=30900)
    args = parser.parse_args()
    servers = {}
    for offset, calm in enumerate((False, True)):
        port = args.first_port + offset
        code = SERVER.format(root=str(ROOT), calm=calm, port=port)
        servers[calm] = (subprocess.Popen([sys.executable, "-c", code]), port)
    try:
        for proc, port in servers.values():
            deadline = time.monotonic() + 120
            while True:
                try:
                    urllib.request.urlopen(f"http://127.0.0.1:{port}/kiosk/", timeout=2)  # loopback
                    break
                except urllib.error.HTTPError:
                    break  # it answers
                except OSError:
                    if time.monotonic() > deadline or proc.poll() is not None:
                        raise RuntimeError(f"the server on {port} did not start") from None
                    time.sleep(0.5)
        time.sleep(3)  # start-up settled
        before = {calm: cpu_seconds(proc.pid) for calm, (proc, _) in servers.items()}
        time.sleep(args.seconds)
        used = {calm: cpu_seconds(proc.pid) - before[calm] for calm, (proc, _) in servers.items()}
    finally:
        for proc, _ in servers.values():
            proc.terminate()
            proc.wait(timeout=30)
    print(f"idle {args.seconds:.0f} s, three pages each, side by side")
    print(f"  Gradio as it comes: {used[False]:.2f} CPU s ({used[False] / args.seconds:.3f} of a core)")
    print(f"  calmed (the app):   {used[True]:.2f} CPU s ({used[True] / args.seconds:.3f} of a core)")
    print(f"  ratio calmed / as it comes: {used[True] / max(used[False], 1e-9):.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
