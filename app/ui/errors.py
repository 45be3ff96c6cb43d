"""The one place where a Gradio handler's failure becomes what a person sees (the `/v1` routes have
their own, app/api/errors.py).

Handlers do not catch errors to reword them: they let a `QuartetError` (app/errors.py) rise, or raise
one for a refusal of their own (`Refused("Choose a document first.")`), and are wrapped in `explained`.
A `QuartetError` is shown with its message as it is, titled by its kind; anything else is a fault of
ours: the page says what failed and that the log has the details, the traceback goes to the log only.
`explained` is also where what a person (or a gradio_client caller) sends is made valid Unicode, once:
every string in the handler's arguments, a lone surrogate replaced (app/valid_text.py).
"""

from __future__ import annotations

import functools
import inspect
import logging
from collections.abc import Callable, Iterator
from typing import Any, TypeVar, cast

import gradio as gr

from app.errors import Kind, QuartetError
from app.valid_text import valid_values

log = logging.getLogger(__name__)
Handler = TypeVar("Handler", bound=Callable[..., Any])

TITLES: dict[Kind, str] = {
    "request": "Cannot do that",
    "not_found": "Not found",
    "denied": "Not allowed",
    "too_large": "Too large",
    "busy": "Busy: try again shortly",
    "unsupported": "Cannot read this file",
    "encrypted": "Cannot read this file",
    "no_text": "Cannot read this file",
    "corrupt": "Cannot read this file",
    "empty": "Cannot read this file",
    "context": "Too long for the model",
    "card": "A card failed",
    "timeout": "Took too long",
    "cancelled": "Stopped",
    "engine": "The engine is not ready",
    "disk_full": "The data disk is full",
    "internal": "Something went wrong",
}


def for_person(err: Exception) -> gr.Error:
    """`err` as Gradio shows it to a person (a toast on the page, the message of gradio_client's AppError)."""
    if isinstance(err, QuartetError):
        return gr.Error(err.message, title=TITLES[err.kind], print_exception=False)
    log.error("a handler failed unexpectedly", exc_info=err)
    return gr.Error(
        f"Something went wrong on our side ({type(err).__name__}: {err}); the app's log has the details.",
        title=TITLES["internal"],
        print_exception=False,
    )


def explained(handler: Handler) -> Handler:
    """`handler` (a function or a generator function, as Gradio calls it) with its failures shown to the
    person by `for_person`, called with its arguments' text made valid. Gradio reads the wrapper's
    signature and docstring as the handler's own."""
    if inspect.isgeneratorfunction(handler):

        @functools.wraps(handler)
        def streamed(*args: Any, **kwargs: Any) -> Iterator[Any]:
            try:
                yield from handler(*valid_values(args), **valid_values(kwargs))
            except gr.Error:
                raise
            except Exception as err:
                raise for_person(err) from err

        return cast(Handler, streamed)

    @functools.wraps(handler)
    def called(*args: Any, **kwargs: Any) -> Any:
        try:
            return handler(*valid_values(args), **valid_values(kwargs))
        except gr.Error:
            raise
        except Exception as err:
            raise for_person(err) from err

    return cast(Handler, called)


def refused(change: Callable[..., Any], *args: Any) -> bool:
    """Make `change(*args)`; a refusal (a `QuartetError`) is said in a warning and True returned, so that
    the caller can show what is stored again (a raised gr.Error leaves the refused text on the page)."""
    try:
        change(*args)
    except QuartetError as err:
        gr.Warning(err.message, title=TITLES[err.kind])
        return True
    return False
