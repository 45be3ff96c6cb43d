"""What is whose: a conversation and an extraction run belong to whoever started them, a document may be
deleted by whoever uploaded it (or the admin); another client of the named endpoints sees none of it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from gradio_client import handle_file
from gradio_client.exceptions import AppError

from tests.gradio_api import Client
from tests.harness import Appliance, api_client, wait_until

FIRST, SECOND = "ownership-test-first-client", "ownership-test-second-client"


def test_another_client_cannot_list_read_or_continue_a_conversation(appliance: Appliance) -> None:
    first, second = api_client(appliance.url, client_id=FIRST), api_client(appliance.url, client_id=SECOND)
    _answer, cid, _ = first.predict("A private note about the 2027 budget.", "", "", 4, api_name="/chat")
    assert cid in [c["id"] for c in first.predict("", api_name="/conversations")]
    tokenless = Client(appliance.url, verbose=False)  # no token: this Client's own session, nobody else's
    for other in (second, tokenless):
        assert cid not in [c["id"] for c in other.predict("", api_name="/conversations")]
        assert cid not in [c["id"] for c in other.predict("2027 budget", api_name="/conversations")]
        with pytest.raises(AppError, match=f"There is no conversation {cid}"):
            other.predict(cid, api_name="/history")
        with pytest.raises(AppError, match=f"There is no conversation {cid}"):
            other.predict("Go on with it.", cid, "", 4, api_name="/chat")
    again = api_client(appliance.url, client_id=FIRST)  # the token is the identity: a new Client keeps it
    assert [m["role"] for m in again.predict(cid, api_name="/history")] == ["user", "assistant"]


def test_a_short_client_token_is_refused(appliance: Appliance) -> None:
    with pytest.raises(AppError, match="at least 16 characters"):
        api_client(appliance.url, client_id="short").predict("", api_name="/conversations")


NUMBER_ONLY = json.dumps(
    {
        "type": "object",
        "properties": {"invoice_number": {"type": "string", "maxLength": 12}},
        "required": ["invoice_number"],
        "additionalProperties": False,
    }
)


def test_another_client_cannot_read_a_run_or_delete_a_document(appliance: Appliance, tmp_path: Path) -> None:
    first, second = api_client(appliance.url, client_id=FIRST), api_client(appliance.url, client_id=SECOND)
    doc = tmp_path / "ownership-invoice-5120.txt"
    doc.write_text("INVOICE\nInvoice number: INV-5120\nTotal: 12.00 EUR\n", encoding="utf-8")
    first.predict([handle_file(str(doc))], api_name="/ingest")
    found = wait_until(
        lambda: (
            next((d for d in first.predict(api_name="/documents") if d["name"] == doc.name), None)
            if any(d["name"] == doc.name and d["status"] == "ok" for d in first.predict(api_name="/documents"))
            else None
        ),
        timeout=120,
        every=0.5,
    )
    # One short field, not the invoice template: the subject is whose run it is, not what the model reads (the
    # template's answer was ~380 tokens, the suite's fifth-longest answer).
    run_id = first.predict([doc.name], "", "", NUMBER_ONLY, api_name="/extraction_run")
    assert first.predict(run_id, api_name="/extraction_results")["status"] in ("queued", "running", "done")
    for other in (second, Client(appliance.url, verbose=False)):
        with pytest.raises(AppError, match=f"there is no extraction run {run_id}"):
            other.predict(run_id, api_name="/extraction_results")
        with pytest.raises(AppError, match="not uploaded by you"):
            other.predict(found["id"], api_name="/delete_document")
    assert [d["name"] for d in second.predict(api_name="/documents") if d["id"] == found["id"]] == [doc.name]
    wait_until(lambda: first.predict(run_id, api_name="/extraction_results")["status"] in ("done", "error"), 300, 1.0)
    assert first.predict(found["id"], api_name="/delete_document") is True
