"""The settings in sections: a TOML file's tables, nested environment variables, the old flat names refused
with their new ones, a card endpoint checked in one place, and the knowledge section reaching the indexer."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from app.endpoint import Endpoint
from app.settings import Settings, SettingsInvalid, env_name, leaves, load
from app.settings_renamed import RENAMED
from tests.harness import PORT_OFFSET

SECTIONED = """
data_dir = "/srv/quartet"

[web]
port = 8080
api_keys = ["sk-one"]

[engine]
cards = ["10.0.0.2:50052", "10.0.0.3:50052"]
n_ctx = 8192
parallel = 2
kv_type = "q8_0"

[knowledge]
chunk_tokens = 120
watch = false

[extraction]
timeout_s = 60

[telemetry]
poll_s = 2.5

[local_cards]
threads = 3
"""


@pytest.fixture
def environ(monkeypatch: pytest.MonkeyPatch) -> pytest.MonkeyPatch:
    """The environment without any QUARTET_ variable of the machine's own."""
    for name in [n for n in os.environ if n.startswith("QUARTET_")]:
        monkeypatch.delenv(name)
    return monkeypatch


def test_a_toml_file_with_sections(tmp_path: Path, environ: pytest.MonkeyPatch) -> None:
    config = tmp_path / "quartet.toml"
    config.write_text(SECTIONED, encoding="utf-8")
    environ.setenv("QUARTET_CONFIG", str(config))
    s = load()
    assert s.data_dir == Path("/srv/quartet")
    assert (s.web.port, s.web.api_keys, s.web.host) == (8080, ["sk-one"], "127.0.0.1")
    assert s.engine.cards == ("10.0.0.2:50052", "10.0.0.3:50052")
    assert (s.engine.n_ctx, s.engine.parallel, s.engine.kv_type, s.engine.n_batch) == (8192, 2, "q8_0", 512)
    assert (s.knowledge.chunk_tokens, s.knowledge.watch, s.knowledge.chunk_overlap) == (120, False, 30)
    assert (s.extraction.timeout_s, s.telemetry.poll_s, s.local_cards.threads) == (60.0, 2.5, 3)
    environ.setenv("QUARTET_ENGINE__N_CTX", "2048")  # the environment wins over the file, key by key
    s = load()
    assert (s.engine.n_ctx, s.engine.parallel) == (2048, 2)


def test_nested_environment_variables(environ: pytest.MonkeyPatch) -> None:
    environ.setenv("QUARTET_ENGINE__PARALLEL", "3")
    environ.setenv("QUARTET_ENGINE__CARDS", json.dumps(["127.0.0.1:40000"]))
    environ.setenv("QUARTET_ENGINE__TENSOR_SPLIT", "[1, 3]")
    environ.setenv("QUARTET_WEB__USERS", json.dumps({"ada": "hash"}))
    environ.setenv("QUARTET_KNOWLEDGE__WATCH", "false")
    environ.setenv("QUARTET_LOCAL_CARDS__SYSFS_ROOT", "/boards/{card}")
    s = load()
    assert (s.engine.parallel, s.engine.cards, s.engine.tensor_split) == (3, ("127.0.0.1:40000",), (1.0, 3.0))
    assert (s.web.users, s.knowledge.watch, s.local_cards.sysfs_root) == (
        {"ada": "hash"},
        False,
        Path("/boards/{card}"),
    )
    assert env_name("engine.parallel") == "QUARTET_ENGINE__PARALLEL" and env_name("data_dir") == "QUARTET_DATA_DIR"


def test_the_old_flat_names_are_refused_with_their_new_ones(tmp_path: Path, environ: pytest.MonkeyPatch) -> None:
    environ.setenv("QUARTET_PARALLEL", "2")
    environ.setenv("QUARTET_CARD_POLL_S", "0.5")
    with pytest.raises(SettingsInvalid) as refused:
        load()
    assert "QUARTET_PARALLEL is now QUARTET_ENGINE__PARALLEL" in str(refused.value)
    assert "QUARTET_CARD_POLL_S is now QUARTET_TELEMETRY__POLL_S" in str(refused.value)
    environ.delenv("QUARTET_PARALLEL")
    environ.delenv("QUARTET_CARD_POLL_S")
    flat = tmp_path / "old.toml"
    flat.write_text('n_ctx = 8192\nkb_dir = "/srv/kb"\n', encoding="utf-8")
    environ.setenv("QUARTET_CONFIG", str(flat))
    with pytest.raises(SettingsInvalid, match=r"`n_ctx` is now `n_ctx` under \[engine\].*`kb_dir` is now `dir` under"):
        load()
    # every old name points at a setting that exists
    assert set(RENAMED.values()) <= dict(leaves()).keys()


def test_a_mistyped_or_missing_setting_is_named(tmp_path: Path, environ: pytest.MonkeyPatch) -> None:
    typo = tmp_path / "typo.toml"
    typo.write_text("[engine]\nn_ctxx = 8192\n", encoding="utf-8")
    environ.setenv("QUARTET_CONFIG", str(typo))
    with pytest.raises(SettingsInvalid, match=r"engine\.n_ctxx \(QUARTET_ENGINE__N_CTXX\)"):
        load()
    environ.setenv("QUARTET_CONFIG", str(tmp_path / "absent.toml"))
    with pytest.raises(SettingsInvalid, match=r"absent\.toml \(QUARTET_CONFIG\) does not exist"):
        load()
    environ.delenv("QUARTET_CONFIG")
    environ.setenv("QUARTET_ENGINE__N_CTX", "12")
    with pytest.raises(SettingsInvalid, match=r"engine\.n_ctx \(QUARTET_ENGINE__N_CTX\): Input should be greater"):
        load()


@pytest.mark.parametrize("text", ["10.0.0.2", "10.0.0.2:rpc", ":50052", "10.0.0.2:0", "10.0.0.2:70000", ""])
def test_a_bad_endpoint_is_refused_saying_what_one_looks_like(text: str) -> None:
    with pytest.raises(ValueError, match=r"is not host:port \(an address and a port from 1 to 65535, for example"):
        Endpoint.parse(text)


def test_an_endpoint_parses_once_and_knows_its_health_port() -> None:
    card = Endpoint.parse(" 10.10.0.2:50052 ")
    assert (card.host, card.port, str(card)) == ("10.10.0.2", 50052, "10.10.0.2:50052")
    assert card.health_url() == "http://10.10.0.2:51052/health" and card.health_port(500) == 50552
    assert Endpoint.parse("::1:50052") == Endpoint("::1", 50052)
    assert Settings(engine={"cards": [" 127.0.0.1:50052"]}).engine.cards == ("127.0.0.1:50052",)
    assert Settings(engine={"health_offset": 7}).health_url("127.0.0.1:50052") == "http://127.0.0.1:50059/health"


def test_bad_card_lists_are_refused_by_the_settings(environ: pytest.MonkeyPatch) -> None:
    environ.setenv("QUARTET_ENGINE__CARDS", '["10.0.0.2:50052", "10.0.0.3"]')
    with pytest.raises(SettingsInvalid, match=r"engine\.cards \(QUARTET_ENGINE__CARDS\): card endpoint '10\.0\.0\.3'"):
        load()
    with pytest.raises(ValueError, match=r"card endpoint 10\.0\.0\.2:1 is listed twice"):
        Settings(engine={"cards": ["10.0.0.2:1", "10.0.0.2:1"]})
    with pytest.raises(ValueError, match="at least one card endpoint is needed"):
        Settings(engine={"cards": []})


@pytest.mark.slow
def test_the_app_refuses_bad_settings_in_words_not_a_traceback(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("QUARTET_")}
    env |= {"QUARTET_DATA_DIR": str(tmp_path), "QUARTET_ENGINE__CARDS": '["10.0.0.2"]', "QUARTET_N_CTX": "9"}
    done = subprocess.run([sys.executable, "-m", "app"], env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 2
    assert "Quartet cannot start: these settings have new names" in done.stderr
    assert "QUARTET_N_CTX is now QUARTET_ENGINE__N_CTX" in done.stderr
    del env["QUARTET_N_CTX"]
    done = subprocess.run([sys.executable, "-m", "app"], env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert "engine.cards (QUARTET_ENGINE__CARDS): card endpoint '10.0.0.2' is not host:port" in done.stderr
    assert not (tmp_path / "quartet.db").exists(), "it refused before opening anything"


@pytest.mark.embedder  # the composition root loads the packaged MiniLM
def test_knowledge_settings_reach_the_indexer_and_the_search(tmp_path: Path) -> None:
    from app.__main__ import build_context

    knowledge = {"dir": tmp_path / "kb", "watch": False, "chunk_tokens": 40, "chunk_overlap": 0}
    settings = Settings(
        data_dir=tmp_path / "var",
        engine={"cards": [f"127.0.0.1:{30890 + PORT_OFFSET}"]},  # nobody listens: the engine is not started
        knowledge=knowledge | {"max_file_mb": 0.01, "sources": 2},
    )
    ctx = build_context(settings)
    notes = tmp_path / "fans.txt"  # about 1,300 word pieces: 7 passages of 200, many more of 40
    notes.write_text(
        " ".join(f"Card {i % 4} overheats when fan {i} stops, so replace fan {i} of card {i % 4}." for i in range(60)),
        encoding="utf-8",
    )
    large = tmp_path / "large.txt"
    large.write_text("A line about the cards and their fans.\n" * 400, encoding="utf-8")  # 15.6 KiB > 10 KiB
    ctx.knowledge.start()
    try:
        ctx.knowledge.ingest_paths([notes, large])
        assert ctx.knowledge.wait_idle(120)
        docs = {d.name: d for d in ctx.knowledge.documents()}
        assert docs["fans.txt"].status == "ok", docs["fans.txt"].error
        chunks = ctx.knowledge.document_chunks(docs["fans.txt"].id)
        assert len(chunks) >= 20 and max(c.tokens for c in chunks) <= 40, [c.tokens for c in chunks]
        assert docs["large.txt"].status == "error" and docs["large.txt"].chunk_count == 0
        assert len(ctx.answerer.sources("Which fan makes card 2 overheat?")) == 2
    finally:
        ctx.knowledge.stop()
