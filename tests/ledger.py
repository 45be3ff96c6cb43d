"""What each test asked of the shared appliance's engine: answers, tokens generated and read (issue 27).

The demo model costs ~60 ms of card CPU a token on this machine, so generated tokens are most of what a
test that chats costs; `make test` prints the tests that generated the most, from the app's own /metrics
counters read before and after each test that uses the shared appliance."""

from __future__ import annotations

import urllib.request
from dataclasses import dataclass, field

COUNTERS = {
    "quartet_engine_tokens_generated_total": "tokens",
    "quartet_engine_prompt_tokens_total": "prompt",
    "quartet_engine_cached_tokens_total": "cached",
    "quartet_engine_requests_total": "answers",
}


def engine_counters(url: str, key: str) -> dict[str, int]:
    """The engine's running totals from /metrics (answers, tokens generated and read); empty if unreachable."""
    request = urllib.request.Request(f"{url}/metrics", headers={"Authorization": f"Bearer {key}"})
    try:
        with urllib.request.urlopen(request, timeout=5) as response:  # loopback
            text = response.read().decode()
    except OSError:
        return {}
    found = {}
    for line in text.splitlines():
        name, _, value = line.partition(" ")
        if name in COUNTERS:
            found[COUNTERS[name]] = int(float(value))
    return found


@dataclass
class Ledger:
    """Per test: the engine's counters' growth while it ran (a restart of the app zeroes them: not counted)."""

    rows: dict[str, dict[str, int]] = field(default_factory=dict)

    def note(self, test: str, before: dict[str, int], after: dict[str, int]) -> None:
        grown = {k: after[k] - before[k] for k in COUNTERS.values() if k in before and k in after}
        if grown and all(v >= 0 for v in grown.values()) and any(grown.values()):
            self.rows[test] = grown

    def report(self, top: int = 15) -> list[str]:
        """The totals, then the `top` tests by tokens generated: generated, prompt tokens computed, answers."""
        if not self.rows:
            return []

        def total(key: str) -> int:
            return sum(r.get(key, 0) for r in self.rows.values())

        lines = [
            f"the shared appliance: {total('answers')} answers by {len(self.rows)} tests, {total('tokens')} tokens"
            f" generated, {total('prompt') - total('cached')} prompt tokens computed"
        ]
        ranked = sorted(self.rows.items(), key=lambda kv: kv[1].get("tokens", 0), reverse=True)[:top]
        for test, r in ranked:
            computed = r.get("prompt", 0) - r.get("cached", 0)
            answers = r.get("answers", 0)
            lines.append(f"{r.get('tokens', 0):>7} generated {computed:>7} computed {answers:>4} answers  {test}")
        return lines
