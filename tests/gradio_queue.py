"""Gradio's queue protocol spoken by hand, as any client on the LAN can: join with an fn_index, read
the event stream. Used to reach steps that have no API name (private ones included)."""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable
from typing import Any

import httpx

from tests.harness import CLIENT_ID

# Components whose value is a file (FileData): what a client can send a server path through.
FILE_COMPONENTS = {
    "file",
    "uploadbutton",
    "image",
    "audio",
    "video",
    "gallery",
    "model3d",
    "multimodaltextbox",
    "simpleimage",
    "imageeditor",
    "imageslider",
    "annotatedimage",
    "filexplorer",
}


def page_config(base_url: str) -> dict[str, Any]:
    response = httpx.get(base_url.rstrip("/") + "/config", timeout=10)
    response.raise_for_status()
    config: dict[str, Any] = response.json()
    return config


def file_inputs(config: dict[str, Any]) -> list[tuple[int, list[int], dict[int, dict[str, Any]]]]:
    """Every step that takes a file: (fn_index, its input ids, the file components among them by id)."""
    components = {c["id"]: c for c in config["components"]}
    found = []
    for dep in config["dependencies"]:
        files = {i: components[i] for i in dep["inputs"] if components[i]["type"] in FILE_COMPONENTS}
        if files:
            found.append((dep["id"], list(dep["inputs"]), files))
    return found


def file_value(path: str, component: dict[str, Any]) -> Any:
    data = {"path": path, "orig_name": path.rsplit("/", 1)[-1], "meta": {"_type": "gradio.FileData"}}
    return [data] if component.get("props", {}).get("file_count") in ("multiple", "directory") else data


def named_step(config: dict[str, Any], api_name: str) -> int:
    """The fn_index of the step with this API name (a named endpoint)."""
    found = [dep["id"] for dep in config["dependencies"] if dep.get("api_name") == api_name]
    assert len(found) == 1, f"steps named {api_name!r}: {found}"
    return int(found[0])


def call(
    base_url: str, fn_index: int, data: list[Any], *, timeout: float = 30.0, until: Callable[[Any], bool] | None = None
) -> dict[str, Any]:
    """Run one step through the queue; the final message (`success`, `output`) of its event stream. With
    `until`, a streaming step's first `process_generating` message whose output data (the value, or after
    the first one its diff) `until` accepts instead, and the step is then cancelled as a page's Stop does
    (an end before that still comes as `process_completed`)."""
    session = uuid.uuid4().hex[:11]
    base = base_url.rstrip("/") + "/gradio_api"
    with httpx.Client(timeout=timeout) as http:
        payload = {"data": data, "fn_index": fn_index, "session_hash": session, "event_data": None, "trigger_id": None}
        joined = http.post(  # JSON with \\u escapes: any text a client may send, lone surrogates too
            base + "/queue/join",
            content=json.dumps(payload),
            headers={"Content-Type": "application/json", "X-Quartet-Client": CLIENT_ID},
        )
        if joined.status_code != 200:
            return {"success": False, "status_code": joined.status_code, "output": joined.text}
        with http.stream("GET", base + "/queue/data", params={"session_hash": session}) as events:
            for line in events.iter_lines():
                if not line.startswith("data:"):
                    continue
                message = json.loads(line[5:])
                generating = message.get("msg") == "process_generating"
                if until is not None and generating and until(message["output"]["data"]):
                    cancel = {"session_hash": session, "fn_index": fn_index, "event_id": message["event_id"]}
                    http.post(base + "/cancel", json=cancel)
                    return {"success": True, **message}
                if message.get("msg") == "process_completed":
                    return dict(message)
    raise AssertionError(f"step {fn_index} never completed")
