"""Quartet's side of bench/peer.py: a worker process that loads the Engine over its four card agents once and
answers one JSON line of stdin at a time, timed from the caller's side of Engine.generate as bench/peer_server.py
times llama-server from its HTTP client's.

    {"asks": [ask]}         one answer through Engine.generate (the engine alone, as bench/engine.py drives it)
    {"asks": [ask, ...]}    several at once through the engine's batcher, one step for all (as its loop runs them)

An ask is {"messages": [{"role", "content"}], "max_tokens", "json_schema"?}; every answer is at temperature 0.
The KV the engine holds is kept between asks: a returning conversation and an agent's re-send find their prefix.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
RESULT = "RESULT "


def main(spec: dict[str, Any]) -> int:
    sys.path.insert(0, str(ROOT))
    from app.engine.engine_config import EngineConfig
    from app.engine.lifecycle import die_with_parent
    from app.engine.llama.engine import Engine

    die_with_parent()
    config = EngineConfig(
        model_path=Path(spec["model"]),
        model_name="peer bench",
        cards=tuple(spec["cards"]),
        n_ctx=spec["n_ctx"],
        n_batch=spec["n_batch"],
        n_ubatch=spec["n_ubatch"],
        n_threads=spec["threads"],
        parallel=spec["parallel"],
    )
    engine = Engine(config)
    info = engine.load()
    layers = {c.endpoint: len(c.layers) for c in info.cards}
    template = engine._formatter.template  # type: ignore[union-attr]  # the chat template the engine renders
    print(
        RESULT + json.dumps({"layers": layers, "host_layers": len(info.host_layers), "template": template}), flush=True
    )
    for line in sys.stdin:
        asks = json.loads(line)["asks"]
        answers = [one(engine, asks[0])] if len(asks) == 1 else together(engine, asks)
        print(RESULT + json.dumps(answers), flush=True)
    engine.close()
    return 0


def request(ask: dict[str, Any]) -> Any:
    from app.engine.events import GenerationRequest, Message

    return GenerationRequest(
        messages=tuple(Message(m["role"], m["content"]) for m in ask["messages"]),
        max_tokens=ask["max_tokens"],
        temperature=0.0,
        seed=0,
        json_schema=ask.get("json_schema"),
    )


def one(engine: Any, ask: dict[str, Any]) -> dict[str, Any]:
    """One answer alone: from the call to the first Token (TTFT), then to Done."""
    from app.engine.events import Done, Failed, Token

    text: list[str] = []
    t0 = time.monotonic()
    first = 0.0
    for event in engine.generate(request(ask), cancelled=lambda: False):
        if isinstance(event, Token) and event.text:
            first = first or time.monotonic()
            text.append(event.text)
        elif isinstance(event, Done):
            return answered(t0, first, "".join(text), event.stats)
        elif isinstance(event, Failed):
            raise RuntimeError(f"Quartet's engine failed: {event.message}")
    raise RuntimeError("Quartet's engine ended an answer without Done")


def together(engine: Any, asks: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Several answers at once in the engine's batcher (what its loop does with answers that arrive together)."""
    from app.engine.events import Done, Failed, Token

    batcher = engine.batcher
    t0 = time.monotonic()
    for job, ask in enumerate(asks):
        req = request(ask)
        batcher.add(job, req, engine.prepare(req), check_picked=engine.check_picked_token)
    first = [0.0] * len(asks)
    text: list[list[str]] = [[] for _ in asks]
    done: dict[int, dict[str, Any]] = {}
    while batcher.busy():
        for job, event in batcher.step():
            if isinstance(event, Token) and event.text:
                first[job] = first[job] or time.monotonic()
                text[job].append(event.text)
            elif isinstance(event, Done):
                done[job] = answered(t0, first[job], "".join(text[job]), event.stats)
            elif isinstance(event, Failed):
                raise RuntimeError(f"Quartet's engine failed: {event.message}")
    return [done[job] for job in range(len(asks))]


def answered(t0: float, first: float, text: str, stats: Any) -> dict[str, Any]:
    from peer_server import measured

    end = time.monotonic()
    return measured(
        t0=t0,
        first=first or end,
        end=end,
        generated=stats.generated_tokens,
        prompt_tokens=stats.prompt_tokens,
        text=text,
        engine_tps=round(stats.decode_tps, 2),
        drafted=stats.drafted_tokens,
        accepted=stats.accepted_tokens,
        cached=stats.cached_tokens,
    )


if __name__ == "__main__":
    sys.exit(main(json.loads(sys.argv[1])))
