"""The catalog's fit check on a GGUF header made here and on the demo model: each card's real share of
the weights from the tensor table (the output matrix on the last card), `parallel` × the context's KV
cache of its layers, and a refusal that names the card and the numbers."""

from __future__ import annotations

import dataclasses
import re
import struct
from pathlib import Path

import pytest

from app.engine.engine_config import EngineConfig
from app.engine.events import EngineError
from app.engine.llama import card_fit, catalog, gguf_header, placement
from app.settings import DEMO_MODEL

MIB = 2**20
# Four boards on the appliance's internal link, each with memory of its own (cards at one address share it)
CARDS = tuple(f"10.10.0.{2 + i}:50052" for i in range(4))
LAYER_MIB, OUTPUT_MIB = 64, 256  # F16: 4096 × 8192 per layer, 4096 × 32768 output
N_VOCAB = 32000


def _string(text: str) -> bytes:
    data = text.encode()
    return struct.pack("<Q", len(data)) + data


def make_gguf(path: Path, *, layers: int = 8, tied: bool = False) -> Path:
    """A GGUF (v3) whose header says what a llama model of `layers` F16 layers holds; its data is a
    sparse hole of the right size, so the file is whole without taking the disk."""
    fields = [("general.architecture", 8, _string("llama"))]
    fields += [
        (f"llama.{key}", 4, struct.pack("<I", value))
        for key, value in [
            ("block_count", layers),
            ("embedding_length", 4096),
            ("attention.head_count", 32),
            ("attention.head_count_kv", 8),
            ("attention.key_length", 128),
            ("context_length", 8192),
        ]
    ]
    tokens = struct.pack("<IQ", 8, N_VOCAB) + b"".join(_string(f"t{i}") for i in range(N_VOCAB))
    fields.append(("tokenizer.ggml.tokens", 9, tokens))
    tensors = [("token_embd.weight", (4096, N_VOCAB))]
    tensors += [(f"blk.{i}.ffn.weight", (4096, 8192)) for i in range(layers)]
    tensors += [] if tied else [("output.weight", (4096, OUTPUT_MIB * MIB // 8192))]
    header = b"GGUF" + struct.pack("<IQQ", 3, len(tensors), len(fields))
    header += b"".join(_string(key) + struct.pack("<I", kind) + value for key, kind, value in fields)
    offset = 0
    for name, dims in tensors:
        header += _string(name) + struct.pack(f"<I{len(dims)}QIQ", len(dims), *dims, 1, offset)
        offset += dims[0] * dims[1] * 2
    with path.open("wb") as f:
        f.write(header)
        f.truncate(-(-len(header) // 32) * 32 + offset)
    return path


def config(path: Path, **changes: object) -> EngineConfig:
    """The made model's configuration, at 4,096 tokens unless `changes` say otherwise (the numbers below
    are for that context, whatever the shipped default)."""
    given: dict[str, object] = {"n_ctx": 4096, "cards": CARDS} | changes
    return EngineConfig(model_path=path, model_name="made", **given)  # type: ignore[arg-type]


def free(mib: int) -> dict[str, card_fit.CardMemory]:
    return {card: card_fit.CardMemory(total=mib * MIB, used=0) for card in CARDS}


def test_each_card_gets_its_layers_and_the_last_the_output_matrix(tmp_path: Path) -> None:
    model = make_gguf(tmp_path / "made.gguf")
    # 8 layers + the output layer = 9 units over 4 equal shares: layers 0-2, 3-4, 5-6, 7 (+ output)
    weights = card_fit.weights_per_card(model, 4)
    assert [w // MIB for w in weights] == [3 * LAYER_MIB, 2 * LAYER_MIB, 2 * LAYER_MIB, LAYER_MIB + OUTPUT_MIB]
    tied = card_fit.weights_per_card(make_gguf(tmp_path / "tied.gguf", tied=True), 4)
    assert tied[3] == LAYER_MIB * MIB + 4096 * N_VOCAB * 2  # no output matrix: the embeddings' copy


def test_kv_cache_is_per_layer_and_per_slot(tmp_path: Path) -> None:
    model = make_gguf(tmp_path / "made.gguf")
    kv_layer = 2 * 4096 * 8 * 128 * 2  # K and V, 4096 tokens, 8 KV heads of 128, f16: 16 MiB
    _, one = card_fit.needs(config(model, parallel=1, n_ctx=4096))
    _, four = card_fit.needs(config(model, parallel=4, n_ctx=4096))
    assert [n.kv for n in one] == [3 * kv_layer, 2 * kv_layer, 2 * kv_layer, kv_layer]
    assert [n.kv for n in four] == [4 * n.kv for n in one]
    assert four[3].buffers - four[0].buffers == N_VOCAB * 512 * 4  # the output layer's logits


def test_the_output_matrix_is_counted_where_an_even_spread_would_pass(tmp_path: Path) -> None:
    model = make_gguf(tmp_path / "made.gguf")
    info, need = card_fit.needs(config(model, parallel=1))
    even = (info.weights_bytes - 4096 * N_VOCAB * 2 + sum(n.kv for n in need)) / 4 + need[3].buffers
    assert even < 400 * MIB < need[3].total  # 350 MiB spread evenly, 462 MiB really on the last card
    fit = card_fit.fit(config(model, parallel=1), free(400))
    assert len(fit.short) == 1 and fit.short[0].startswith(f"card 3 ({CARDS[3]}) needs 0.46 GiB but has 0.39 GiB")
    with pytest.raises(EngineError, match=r"does not fit: card 3 .*\(weights 0\.31 GiB"):
        fit.check()


def test_a_parallel_that_does_not_fit_is_refused_naming_the_card_and_the_numbers(tmp_path: Path) -> None:
    model = make_gguf(tmp_path / "made.gguf")
    card_fit.fit(config(model, parallel=4), free(1024)).check()
    refused = card_fit.fit(config(model, parallel=20), free(1024))
    assert refused.short and refused.short[0].startswith(f"card 0 ({CARDS[0]}) needs 1.42 GiB but has 1.00 GiB")
    assert "KV cache 0.94 GiB for 20 × 4096 tokens" in refused.problem
    with pytest.raises(EngineError, match="does not fit"):
        refused.check()


def test_memory_the_loaded_model_holds_counts_as_free_for_the_next_load(tmp_path: Path) -> None:
    model = make_gguf(tmp_path / "made.gguf")
    loaded = config(model, parallel=4)
    held = card_fit.held(loaded, {card: w for card, w in zip(CARDS, card_fit.weights_per_card(model, 4), strict=True)})
    _, need = card_fit.needs(loaded)
    assert list(held.values()) == [n.total for n in need]
    busy = {card: card_fit.CardMemory(total=1024 * MIB, used=1000 * MIB, held=held[card]) for card in CARDS}
    card_fit.fit(loaded, busy).check()  # a reload of what is loaded fits where it fits now
    with pytest.raises(EngineError, match="does not fit"):
        card_fit.fit(loaded, {card: card_fit.CardMemory(total=1024 * MIB, used=1000 * MIB) for card in CARDS}).check()


def test_the_demo_models_shares_are_what_llama_placed() -> None:
    """Against llama's own load log of the demo model over four cards (tests/data/llama_load_rpc.log)."""
    log = (Path(__file__).parent / "data" / "llama_load_rpc.log").read_text()
    placed = list(placement.buffers_by_endpoint(log).values())
    _, need = card_fit.needs(EngineConfig(model_path=DEMO_MODEL, model_name="demo", cards=CARDS))
    assert [n.weights for n in need] == pytest.approx(placed, abs=0.01 * MIB)
    assert need[3].weights > 9 * need[0].weights  # the tied output matrix (262k tokens) on the last card


def test_a_kv_type_that_does_not_exist_is_refused(tmp_path: Path) -> None:
    with pytest.raises(EngineError, match="KV cache type 'q3' is not one of"):
        card_fit.needs(config(make_gguf(tmp_path / "made.gguf"), kv_type="q3"))


def test_the_kv_cache_counted_is_what_llama_allocated_on_each_card() -> None:
    """Against llama's log of the demo model loaded with parallel 4 × n_ctx 2048 over four cards
    (tests/data/llama_kv_rpc.log): one unified cache of 8,192 cells, sliding-window layers full size too."""
    log = (Path(__file__).parent / "data" / "llama_kv_rpc.log").read_text()
    allocated: dict[str, float] = {}
    for endpoint, mib in re.findall(r"\[([^\]]+)\] KV buffer size =\s+([\d.]+) MiB", log):
        allocated[endpoint] = allocated.get(endpoint, 0.0) + float(mib) * MIB
    assert "using full-size SWA cache" in log and len(allocated) == 4
    cards = tuple(sorted(allocated))
    demo = EngineConfig(model_path=DEMO_MODEL, model_name="demo", cards=cards, parallel=4, n_ctx=2048, swa_full=True)
    _, need = card_fit.needs(demo)
    assert [n.kv for n in need] == [allocated[card] for card in cards]  # 40, 40, 40 and 24 MiB


def test_windowed_sliding_layers_are_counted_as_llama_allocated_them() -> None:
    """Against llama's log of the same load with `swa_full` off (tests/data/llama_kv_rpc_windowed.log): the
    sliding-window layers (15 of the demo's 18) hold 512 × 4 + 512 cells, the full ones 8,192."""
    log = (Path(__file__).parent / "data" / "llama_kv_rpc_windowed.log").read_text()
    allocated: dict[str, float] = {}
    for endpoint, mib in re.findall(r"\[([^\]]+)\] KV buffer size =\s+([\d.]+) MiB", log):
        allocated[endpoint] = allocated.get(endpoint, 0.0) + float(mib) * MIB
    assert "using full-size SWA cache" not in log and "SWA KV cache, size = 2560 cells" in log
    cards = tuple(sorted(allocated))
    demo = EngineConfig(model_path=DEMO_MODEL, model_name="demo", cards=cards, parallel=4, n_ctx=2048)
    info, need = card_fit.needs(demo)
    assert (info.n_swa, len(info.swa_layers), card_fit.kv_cells(info, demo)) == (512, 15, (8192, 2560))
    assert [n.kv for n in need] == [allocated[card] for card in cards]
    full = card_fit.needs(dataclasses.replace(demo, swa_full=True))[1]
    assert sum(n.kv for n in need) < sum(n.kv for n in full) / 2


def test_cards_at_one_address_share_its_memory(tmp_path: Path) -> None:
    """Four card agents on one machine (the demo's loopback cards) each report the machine's memory: each
    card fitting is not enough, their sum must fit it too."""
    model = make_gguf(tmp_path / "made.gguf")
    loopback = tuple(f"127.0.0.1:{30252 + i}" for i in range(4))
    wanted = config(model, parallel=4, cards=loopback)
    _, need = card_fit.needs(wanted)
    each = max(n.total for n in need)
    machine = {card: card_fit.CardMemory(total=2 * each, used=0) for card in loopback}
    refused = card_fit.fit(wanted, machine)
    assert len(refused.short) == 1, refused.short
    assert refused.short[0].startswith(
        f"cards 0, 1, 2, 3 share the memory of 127.0.0.1 and need {sum(n.total for n in need) / 2**30:.2f} GiB together"
    )
    roomy = {card: card_fit.CardMemory(total=sum(n.total for n in need) + MIB, used=0) for card in loopback}
    card_fit.fit(wanted, roomy).check()
    # what the loaded model holds there now is given back once per card
    held = {
        card: card_fit.CardMemory(total=2 * each, used=2 * each, held=n.total)
        for card, n in zip(loopback, need, strict=True)
    }
    card_fit.fit(wanted, held).check()


def test_a_gguf_entry_on_a_box_with_no_cards_is_refused_naming_the_missing_cards(tmp_path: Path) -> None:
    """An upstream box lists no cards: the admin page's catalog failed to open on the demo's row (a
    ValueError from the config, not the entry's problem)."""
    upstream = EngineConfig(backend="upstream", upstream_url="http://127.0.0.1:28081/v1", model_name="up", cards=())
    entry = catalog.CatalogEntry(id="demo", name="Demo", path=tmp_path / "demo.gguf", n_ctx=2048)
    with pytest.raises(EngineError, match="none are listed") as refused:
        catalog.config_for(entry, upstream, models_dir=tmp_path)
    assert refused.value.kind == "request"


def test_a_header_is_read_once_while_its_file_stays_the_same(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The admin's catalog reads every entry's header at each listing: an unchanged file is parsed once, and a
    file rewritten in place (other size or mtime) is parsed again, never answered from the old one."""
    parsed: list[Path] = []
    real = gguf_header._read

    def counted(path: Path) -> gguf_header.Header:
        parsed.append(path)
        return real(path)

    monkeypatch.setattr(gguf_header, "_read", counted)
    model = make_gguf(tmp_path / "made.gguf", layers=8)
    first = catalog.inspect_gguf(model)
    assert catalog.inspect_gguf(model) == first
    assert card_fit.weights_per_card(model, 4)
    assert parsed == [model]
    make_gguf(model, layers=4)
    assert catalog.inspect_gguf(model).n_layers == 4 != first.n_layers
    assert parsed == [model, model]
