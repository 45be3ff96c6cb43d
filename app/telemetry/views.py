"""The appliance's status as the pages, /status, /cards, /metrics and /health see it: the engine's own
status (app/engine/status.py) with every card's view and the thermal thresholds. Frozen pydantic models,
built once per read by `Telemetry` and serialised as they are."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, Field

from app.engine.status import EngineStatus, Frozen

CardState = Literal["up", "busy", "down", "not-responding", "unknown"]


class CardView(Frozen):
    index: int
    endpoint: str
    state: CardState
    reason: str | None = None
    last_seen: float | None = None  # wall-clock seconds
    load_pct: float | None = None
    load_source: str | None = None  # "npu" or "process_cpu"
    temperature_c: float | None = None  # None: no sensor (or the card does not answer)
    thermal: Literal["ok", "warning", "critical"] | None = None
    mem_used_bytes: int | None = None
    mem_total_bytes: int | None = None
    layers: tuple[int, ...] = ()
    layer_bytes: int = 0  # weights llama placed on the card
    tokens_per_s: float = 0.0
    health: dict[str, Any] = Field(default_factory=dict)  # the card agent's last /health reading

    @property
    def failing(self) -> bool:
        return self.state in ("down", "not-responding")

    def reading(self) -> dict[str, Any]:
        """What the `cards` endpoint gives: everything but the raw health reading."""
        return self.model_dump(mode="json", exclude={"health"})


class Thermal(Frozen):
    warning_c: float
    critical_c: float
    hold: str | None = None  # why new answers wait (a card is too hot), if they do


class ApplianceStatus(EngineStatus):
    """The engine's status plus each card's view; serialised flat, as `/status` has always been."""

    cards: tuple[CardView, ...] = ()
    thermal: Thermal = Thermal(warning_c=0.0, critical_c=0.0)

    @classmethod
    def of(cls, engine: EngineStatus, cards: list[CardView], thermal: Thermal) -> ApplianceStatus:
        return cls.model_validate({**dict(engine), "cards": cards, "thermal": thermal})


class LoadRow(Frozen):
    """One card while a model loads: memory it gained against its share of the weights (None: no reading)."""

    card: int
    endpoint: str
    loaded_gib: float | None = None
    expected_gib: float | None = None  # its share of the weights
    pct: int | None = None  # 0–99 while it loads (the load's end says it is whole, not a memory reading)
    loaded_bytes: int | None = None
    expected_bytes: int | None = None  # the share, or what the card gained when that is more (its buffers)


class Health(BaseModel):
    """`GET /health`."""

    ok: bool = True
    engine: str  # the engine's state: ready, loading, recovering, failed…; "degraded": ready, a card not answering
    message: str

    @classmethod
    def of(cls, status: ApplianceStatus) -> Health:
        """Never "ready" while a card the model runs on is down or not responding (the engine may not have
        noticed yet: a card that hangs holds a step until the step timeout)."""
        on_cards = status.state == "ready" and status.model is not None and status.model.backend == "cards"
        stuck = [card for card in status.cards if card.state in ("down", "not-responding")] if on_cards else []
        if stuck:
            card = stuck[0]
            state = card.state.replace("-", " ")
            return cls(engine="degraded", message=f"card {card.index} ({card.endpoint}) is {state}: {card.reason}")
        return cls(engine=status.state, message=status.message)
