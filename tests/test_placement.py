"""Reading llama's placement log: real lines captured from a load across four loopback cards."""

from __future__ import annotations

from pathlib import Path

import pytest

from app.engine.events import EngineError
from app.engine.llama import placement

LOG = (Path(__file__).parent / "data" / "llama_load_rpc.log").read_text()
CARDS = {f"RPC{i}": f"127.0.0.1:{50052 + i}" for i in range(4)}


def test_layers_and_bytes_per_card() -> None:
    cards, host = placement.place(LOG, devices=CARDS, n_layers=18)
    assert host == ()
    assert [card.layers for card in cards] == [(0, 1, 2, 3, 4), (5, 6, 7, 8, 9), (10, 11, 12, 13, 14), (15, 16, 17, 18)]
    assert [card.endpoint for card in cards] == list(CARDS.values())
    assert cards[3].buffer_bytes == int(181.43 * 1024 * 1024)


def test_layers_on_the_host_cpu_are_refused() -> None:
    on_cpu = LOG.replace("layer  12 assigned to device RPC2", "layer  12 assigned to device CPU")
    with pytest.raises(EngineError, match="1 of 18 layers were placed on the host CPU"):
        placement.place(on_cpu, devices=CARDS, n_layers=18)


def test_a_card_llama_never_used_holds_nothing() -> None:
    three = {name: ep for name, ep in CARDS.items() if name != "RPC3"}
    with pytest.raises(EngineError, match="host CPU"):
        placement.place(LOG, devices=three, n_layers=18)


def test_a_log_without_placement_lines_cannot_be_trusted() -> None:
    with pytest.raises(EngineError, match="did not report"):
        placement.place("llama_model_loader: loaded meta data\n", devices=CARDS, n_layers=18)
