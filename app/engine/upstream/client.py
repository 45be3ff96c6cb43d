"""Talking to an OpenAI-compatible server: its models, what it can do (probed once, when it is connected),
and streamed answers as parsed chunks.

Only `GET /models` and streaming `POST /chat/completions` are required (all the boards' vendor server
offers); `/completions`, JSON-schema `response_format`, a tokenizer route and usage with cached tokens are
used where a probe shows them. The key goes in the Authorization header and nowhere else: errors and logs
name the URL only.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Literal

import httpx

from app.engine.upstream.stream import Hangup, Stream, UpstreamError, deadline, delta_text, message

SchemaStyle = Literal["json_schema", "json_object", ""]  # how the upstream takes a schema ("": it does not)
_PROBE_SCHEMA = {
    "type": "object",
    "properties": {"q": {"type": "string", "enum": ["quartet"]}},
    "required": ["q"],
    "additionalProperties": False,
}
_PROBE_TEXT = 1024  # characters of a probe's answer read at most (the one it asks for has 15)
_TOKENIZERS = (("tokenize", "content"), ("tokenize", "prompt"), ("extras/tokenize", "input"))  # llama-server, vLLM,
# llama-cpp-python's server: (route below the server's root, the field that holds the text)


@dataclass(frozen=True)
class Probed:
    """What a probe found the upstream to offer."""

    model: str
    n_ctx: int | None  # the context it reports (llama-server's /props, vLLM's max_model_len), if any
    schema_style: SchemaStyle
    completions: bool
    tokenizer: tuple[str, str] | None  # (route, field) of a tokenize route
    usage_in_stream: bool  # it takes stream_options.include_usage


class UpstreamClient:
    def __init__(self, url: str, *, key: str, timeout_s: float) -> None:
        self.url = url.rstrip("/")
        self.root = self.url.removesuffix("/v1")
        self._timeout_s = timeout_s
        headers = {"Authorization": f"Bearer {key}"} if key else {}
        timeout = httpx.Timeout(timeout_s, connect=min(5.0, timeout_s))
        self._http = httpx.Client(headers=headers, timeout=timeout)
        # each stream on a connection of its own, closed with it: a Hangup sees its socket being made
        self._streams = httpx.Client(
            headers={**headers, "Accept-Encoding": "identity"},
            timeout=timeout,
            limits=httpx.Limits(max_keepalive_connections=0),
        )

    def close(self) -> None:
        self._http.close()
        self._streams.close()

    def name(self) -> str:
        return f"the upstream at {self.url}"

    def models(self) -> list[dict[str, Any]]:
        data = self._json("GET", f"{self.url}/models")
        listed = data.get("data") if isinstance(data, dict) else None
        if not isinstance(listed, list) or not listed:
            raise UpstreamError(f"{self.name()} lists no models at /models")
        return [m for m in listed if isinstance(m, dict) and isinstance(m.get("id"), str)]

    def probe(self, wanted: str) -> Probed:
        models = self.models()
        ids = [m["id"] for m in models]
        model = wanted or ids[0]
        if model not in ids:
            raise UpstreamError(f"{self.name()} does not serve the model {model!r} (it lists {', '.join(ids)})")
        entry = models[ids.index(model)]
        style, usage = self._schema_probe(model)
        return Probed(
            model=model,
            n_ctx=_context_of(entry) or self._props_context(),
            schema_style=style,
            completions=self._ok("POST", f"{self.url}/completions", {"model": model, "prompt": "Hi", "max_tokens": 1}),
            tokenizer=next((t for t in _TOKENIZERS if self._tokenize(t, "probe") is not None), None),
            usage_in_stream=usage,
        )

    def count(self, tokenizer: tuple[str, str], text: str) -> int:
        found = self._tokenize(tokenizer, text)
        if found is None:
            raise UpstreamError(f"{self.name()} did not count tokens at /{tokenizer[0]}")
        return found

    @contextmanager
    def stream(self, route: str, body: dict[str, Any], hangup: Hangup | None = None) -> Iterator[Stream]:
        """A streamed answer's chunks; `hangup` ends the request from another thread, at once."""
        hangup = hangup or Hangup()
        url = f"{self.url}/{route}"
        try:
            with self._streams.stream("POST", url, json=body, extensions={"trace": hangup.trace}) as response:
                try:
                    yield self._opened(response)
                finally:
                    hangup.release()  # before httpx closes the socket
        except httpx.HTTPError as err:
            raise UpstreamError(f"{self.name()} {_failure(err)}") from None
        finally:
            hangup.release()

    def _opened(self, response: httpx.Response) -> Stream:
        """The stream of an answer's response, read as it comes (bytes, never more than a line's bound held)."""
        if response.status_code >= 400:
            said = _said(_head(response.iter_raw()), response.reason_phrase)
            raise UpstreamError(f"{self.name()} answered {response.status_code}: {said}")
        encoding = response.headers.get("Content-Encoding", "identity")
        if encoding != "identity":  # unpacked, one piece could be any size
            raise UpstreamError(f"{self.name()} sent its stream compressed ({encoding}), though asked not to")
        return Stream(response.iter_raw(), self.name())

    # -- probes ------------------------------------------------------------------------------------

    def _schema_probe(self, model: str) -> tuple[SchemaStyle, bool]:
        """Which schema style the upstream *honours* (its answer must be the one the schema allows: a server
        that ignores `response_format` answers something else), and whether it streams usage."""
        styles: dict[SchemaStyle, dict[str, Any]] = {
            "json_schema": {"type": "json_schema", "json_schema": {"name": "probe", "schema": _PROBE_SCHEMA}},
            "json_object": {"type": "json_object", "schema": _PROBE_SCHEMA},
        }
        usage = False
        for style, response_format in styles.items():
            body = {
                "model": model,
                "messages": [{"role": "user", "content": "Answer with a JSON object."}],
                "max_tokens": 24,
                "temperature": 0,
                "response_format": response_format,
            }
            text, usage = self._short_answer(body)
            if _parsed(text) == {"q": "quartet"}:
                return style, usage
        return "", usage

    def _short_answer(self, body: dict[str, Any]) -> tuple[str, bool]:
        """A short streamed answer's text, and whether usage came with it (asked for; else asked without)."""
        for with_usage in (True, False):
            asked = {**body, "stream": True, **({"stream_options": {"include_usage": True}} if with_usage else {})}
            hangup = Hangup()  # a probe is bounded as an answer is: in time and in text
            try:
                with (
                    deadline(hangup, self._timeout_s, "late"),
                    self.stream("chat/completions", asked, hangup) as chunks,
                ):
                    text, usage = "", False
                    for chunk in chunks:
                        usage = usage or isinstance(chunk.get("usage"), dict)
                        text += delta_text(chunk)
                        if len(text) > _PROBE_TEXT:
                            break
                    if hangup.reason is None:
                        return text, usage
            except UpstreamError:
                continue
        return "", False

    def _props_context(self) -> int | None:
        try:
            props = self._json("GET", f"{self.root}/props")
        except UpstreamError:
            return None
        settings = props.get("default_generation_settings") if isinstance(props, dict) else None
        n_ctx = settings.get("n_ctx") if isinstance(settings, dict) else None
        return n_ctx if isinstance(n_ctx, int) and n_ctx > 0 else None

    def _tokenize(self, tokenizer: tuple[str, str], text: str) -> int | None:
        route, field = tokenizer
        try:
            data = self._json("POST", f"{self.root}/{route}", {field: text})
        except UpstreamError:
            return None
        tokens = data.get("tokens") if isinstance(data, dict) else None
        return len(tokens) if isinstance(tokens, list) else None

    def _ok(self, method: str, url: str, body: dict[str, Any]) -> bool:
        try:
            self._json(method, url, body)
        except UpstreamError:
            return False
        return True

    def _json(self, method: str, url: str, body: dict[str, Any] | None = None) -> Any:
        try:
            response = self._http.request(method, url, json=body)
        except httpx.HTTPError as err:
            raise UpstreamError(f"{self.name()} {_failure(err)}") from None
        if response.status_code >= 400:
            said = _said(response.content, response.reason_phrase)
            raise UpstreamError(f"{self.name()} answered {response.status_code} to {url}: {said}")
        try:
            return response.json()
        except ValueError:
            raise UpstreamError(f"{self.name()} answered {url} with something that is not JSON") from None


def _context_of(entry: dict[str, Any]) -> int | None:
    for value in (entry.get("max_model_len"), (entry.get("meta") or {}).get("n_ctx")):
        if isinstance(value, int) and value > 0:
            return value
    return None


def _parsed(text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError:
        return None


def _failure(err: httpx.HTTPError) -> str:
    if isinstance(err, httpx.TimeoutException):
        return "did not answer in time"
    if isinstance(err, httpx.ConnectError):
        return "refused the connection (is it running?)"
    return f"broke off the answer ({type(err).__name__})"


def _head(pieces: Iterator[bytes], limit: int = 65536) -> bytes:
    """The start of a body (an error's: what it says is in its first lines), never more than `limit` bytes."""
    head = b""
    for piece in pieces:
        head += piece
        if len(head) >= limit:
            break
    return head[:limit]


def _said(body: bytes, reason: str) -> str:
    try:
        said = json.loads(body)
    except ValueError:
        return body[:200].decode("utf-8", "replace") or reason
    return message(said.get("error", said) if isinstance(said, dict) else said)
