"""How a request's tools reach the model: through its chat template when the template shows `tools`,
else as words at the head of the system message."""

from __future__ import annotations

from llama_cpp import llama_chat_format


def renders_tools(formatter: llama_chat_format.Jinja2ChatFormatter) -> bool:
    """Whether a chat template shows the `tools` it is given (Jinja templates of recent models do)."""
    probe = [
        {
            "type": "function",
            "function": {
                "name": "quartet_probe_tool",
                "description": "probe",
                "parameters": {"type": "object", "properties": {}},
            },
        }
    ]
    try:
        prompt = formatter(messages=[{"role": "user", "content": "hi"}], tools=probe).prompt  # type: ignore[arg-type,list-item]
    except Exception:  # a template that refuses tools (or this conversation) does not show them
        return False
    return "quartet_probe_tool" in prompt


def with_system(messages: list[dict[str, str]], text: str) -> list[dict[str, str]]:
    """`text` first in the system message (one is made when there is none)."""
    if messages and messages[0]["role"] == "system":
        return [{"role": "system", "content": f"{text}\n\n{messages[0]['content']}"}, *messages[1:]]
    return [{"role": "system", "content": text}, *messages]
