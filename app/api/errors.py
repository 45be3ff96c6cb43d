"""The one place where an error becomes what a `/v1` caller sees: an HTTP status from its kind and
OpenAI's error body, `{"error": {"message", "type", "param", "code"}}` (the Gradio side has its own,
app/ui/errors.py).

Routes raise a `QuartetError` (app/errors.py), or `ApiError` when the request field to blame or an
OpenAI error code is worth naming; `install` registers the handler that turns either into the response.
A streamed answer that fails after its first chunk cannot change its status: it sends `body(err)` as
its last event instead.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import fastapi
from fastapi.exception_handlers import http_exception_handler
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.routing import BaseRoute, Match, Mount

from app.errors import Kind, QuartetError

# OpenAI's statuses: 400 a request that cannot run as sent (a context too long among them), 401 a bad
# key, 404 no such model, 503 busy or the engine not ready, 500 a card down (named in the message), 503 an
# upstream down (see `status`), 507 no room left on the data disk.
STATUS: dict[Kind, int] = {
    "request": 400,
    "context": 400,
    "denied": 401,
    "not_found": 404,
    "too_large": 413,
    "unsupported": 422,
    "encrypted": 422,
    "no_text": 422,
    "corrupt": 422,
    "empty": 422,
    "busy": 503,
    "engine": 503,
    "cancelled": 503,
    "timeout": 504,
    "card": 500,
    "disk_full": 507,
    "internal": 500,
}
CODES: dict[Kind, str] = {
    "context": "context_length_exceeded",
    "busy": "busy",
    "card": "card_down",
    "engine": "engine_unavailable",
    "timeout": "timeout",
    "disk_full": "disk_full",
}
UPSTREAM_DOWN = "upstream_unavailable"  # the code of a `card` failure whose card is the upstream (a URL)

RETRY_AFTER_S = "2"  # seconds, sent with a 503 busy


class ApiError(QuartetError):
    """A `/v1` refusal that names the request field to blame (`param`) or an OpenAI error `code`."""

    def __init__(self, message: str, *, kind: Kind = "request", code: str | None = None, param: str | None = None):
        super().__init__(message, kind=kind)
        self.code, self.param = code, param


def status(err: QuartetError) -> int:
    return 503 if upstream_down(err) else STATUS.get(err.kind, 500)


def upstream_down(err: QuartetError) -> bool:
    """A `card` failure of the upstream engine (`engine.backend = upstream`): its card is the upstream's URL,
    where a card of the cluster is `host:port`. Not a fault of this appliance: 503, as for an engine away."""
    return err.kind == "card" and "://" in (err.card or "")


def body(err: QuartetError) -> dict[str, Any]:
    """OpenAI's error body for `err`."""
    param = err.param if isinstance(err, ApiError) else None
    code = err.code if isinstance(err, ApiError) else None
    return {
        "error": {
            "message": err.message,
            "type": "invalid_request_error" if status(err) < 500 else "server_error",
            "param": param or ("messages" if err.kind == "context" else None),
            "code": code or (UPSTREAM_DOWN if upstream_down(err) else CODES.get(err.kind)),
        }
    }


def install(api: fastapi.FastAPI) -> None:
    """Answer every `QuartetError` a route raises, and every request body that does not validate, in
    OpenAI's shape."""

    @api.exception_handler(QuartetError)
    def refused(_request: fastapi.Request, err: QuartetError) -> JSONResponse:
        busy = err.kind == "busy"  # the SDKs wait this long before their retry, rather than at once
        return JSONResponse(
            body(err), status_code=status(err), headers={"Retry-After": RETRY_AFTER_S} if busy else None
        )

    @api.exception_handler(RequestValidationError)
    def invalid(_request: fastapi.Request, err: RequestValidationError) -> JSONResponse:
        return refused(_request, validation_error(err.errors()))

    @api.exception_handler(StarletteHTTPException)
    async def http_error(request: fastapi.Request, err: StarletteHTTPException) -> Response:
        """Under /v1, FastAPI's own refusals in OpenAI's shape (an unknown route or method, a body it could not
        parse); elsewhere FastAPI's own answer."""
        if not request.url.path.startswith("/v1/"):
            return await http_exception_handler(request, err)
        message = str(err.detail)
        if err.status_code == 404:
            message = f"there is no route {request.url.path} here: see GET /v1/models and docs/api.md"
        elif err.status_code == 405:
            message = f"{request.method} is not allowed on {request.url.path}"
        elif err.status_code == 400 and "parsing the body" in message:  # not UTF-8, or JSON nested too deep
            message = "the request body is not valid JSON: it must be UTF-8, and nested at most a few hundred levels"
        kind = "invalid_request_error" if err.status_code < 500 else "server_error"
        error = {"message": message, "type": kind, "param": None, "code": None}
        return JSONResponse({"error": error}, status_code=err.status_code, headers=err.headers)


_METHODS = ["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"]


def close_prefix(api: fastapi.FastAPI, prefix: str = "/v1") -> None:
    """Every request under `prefix` that no route took ends here, as a 404 (no such route) or a 405 (a route
    that takes other methods) in OpenAI's shape. Add it after the prefix's routes and before the pages: Gradio
    is mounted at `/`, and would otherwise answer it with its own `{"detail": "Not Found"}`."""

    def unrouted(request: fastapi.Request) -> None:
        allowed = [method for method in _METHODS if _taken(api, own, {**request.scope, "method": method})]
        if allowed:
            raise StarletteHTTPException(405, headers={"Allow": ", ".join(allowed)})
        raise StarletteHTTPException(404)

    api.add_api_route(prefix + "/{rest:path}", unrouted, methods=_METHODS, include_in_schema=False)
    own = api.router.routes[-1]


def _taken(api: fastapi.FastAPI, own: BaseRoute, scope: dict[str, Any]) -> bool:
    """Whether a route other than `own` takes a request of this path and method (asked of the routes
    themselves: FastAPI keeps an included router's routes inside it); a mounted app (the pages at `/`)
    takes every path, so it is not asked."""
    routes = [r for r in api.router.routes if r is not own and not isinstance(r, Mount)]
    return any(route.matches(scope)[0] == Match.FULL for route in routes)


# pydantic names the member of a union it tried (`input.str`, `prompt.list[str]`): not a field of the request.
_TYPE_NAMES = {"str", "int", "float", "bool", "dict", "list", "none"}


def validation_error(problems: Sequence[Any]) -> ApiError:
    """A request body that does not validate, in words, blaming the request's field (never `1` or `input.str`)."""
    first = problems[0] if problems else {}
    if first.get("type") == "json_invalid":
        return ApiError(f"the request body is not valid JSON ({first.get('ctx', {}).get('error', 'syntax error')})")
    path = [p for p in first.get("loc", ())[1:] if isinstance(p, int) or not _is_type_name(str(p))]
    where = "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in path).lstrip(".")
    message = f"{where}: {first.get('msg', 'invalid request')}" if where else "invalid request body"
    field = next((str(p) for p in path if not isinstance(p, int)), None)
    return ApiError(message, param=field)


def _is_type_name(part: str) -> bool:
    return part.lower() in _TYPE_NAMES or "[" in part or part.startswith(("function-", "json-or-python"))
