"""Stop strings in a token stream: text is passed on except what may still become a stop string."""

from __future__ import annotations


class StopScanner:
    """Streams text while holding back anything that could be the start of a stop string."""

    def __init__(self, stops: list[str]) -> None:
        self.stops = [s for s in stops if s]
        self.held = ""

    def feed(self, piece: str) -> tuple[str, bool]:
        self.held += piece
        for stop in self.stops:
            at = self.held.find(stop)
            if at >= 0:
                out, self.held = self.held[:at], ""
                return out, True
        keep = max((_overlap(self.held, s) for s in self.stops), default=0)
        out = self.held[: len(self.held) - keep]
        self.held = self.held[len(self.held) - keep :]
        return out, False

    def flush(self) -> str:
        out, self.held = self.held, ""
        return out


def _overlap(text: str, stop: str) -> int:
    for size in range(min(len(text), len(stop) - 1), 0, -1):
        if stop.startswith(text[-size:]):
            return size
    return 0
