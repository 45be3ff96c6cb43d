"""/password: where a person whose password was reset (or anyone made on the admin page) sets a new one
with the current one. It lives outside the pages, whose login a reset password no longer passes: the
page login refuses it (403) until a new one is set here. Wrong passwords are throttled as the logins are."""

from __future__ import annotations

from pathlib import Path

import fastapi
from fastapi.responses import HTMLResponse, JSONResponse, Response

from app.errors import QuartetError
from app.people_admin import PeopleAdmin

FORM = Path(__file__).resolve().parent.parent.parent / "assets" / "password.html"


def add(api: fastapi.FastAPI, people: PeopleAdmin) -> None:
    @api.get("/password", include_in_schema=False)
    def form() -> Response:
        return HTMLResponse(FORM.read_text(encoding="utf-8"))

    @api.post("/password", include_in_schema=False)
    def change(
        request: fastapi.Request,
        name: str = fastapi.Form(""),
        password: str = fastapi.Form(""),
        new_password: str = fastapi.Form(""),
    ) -> Response:
        client = request.client.host if request.client else "?"
        try:
            said = people.change_own_password(name.strip(), password, new_password, client=client)
        except QuartetError as err:
            return JSONResponse({"ok": False, "detail": str(err)}, status_code=403 if err.kind == "denied" else 400)
        return JSONResponse({"ok": True, "detail": said})
