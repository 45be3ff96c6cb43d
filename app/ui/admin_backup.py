"""The admin page's backups and logs: download a backup, restore one (checked, applied at the next
start), and read or download the app's and the card agents' recent logs. Every step goes through the
admin service, which checks the session's token. A backup is offered as a link that this admin session
fetches once (app/downloads.py), never through Gradio's file cache."""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

import gradio as gr

from app import backup
from app.admin import AdminService
from app.errors import Refused
from app.ui import display
from app.ui.callers import acted_from
from app.ui.errors import explained

_DOWNLOAD_BYTES = 16 << 20  # a downloaded log: its last 16 MiB


def add(admin: AdminService, token: gr.State) -> None:
    """The backups and logs accordions, inside the admin page's Blocks."""
    quiet: dict[str, Any] = {"api_visibility": "private", "show_progress": "hidden"}
    with gr.Accordion("Backups", open=False):
        gr.Markdown(
            "A backup holds the database (copied consistently while the app runs), the documents and the "
            "settings made on this page, with the people and API keys made here as hashes only (never a password "
            "or a key as typed or shown). " + backup.RESTART
        )
        with gr.Row():
            take = gr.Button("Download a backup", elem_id="take-backup")
            taken = gr.HTML("", elem_id="backup-file")  # a link for this admin session, fetched once
        with gr.Row():
            upload = gr.File(label="Backup to restore (.tar.gz)", type="filepath", elem_id="restore-file")
            restore = gr.Button("Check and restore at the next start", elem_id="restore-backup")
        restored = gr.Markdown(elem_id="restore-result")
    with gr.Accordion("Logs", open=False):
        with gr.Row():
            which = gr.Dropdown(label="Log", choices=[], elem_id="log-choice")
            show = gr.Button("Show the recent log", elem_id="show-log")
        text = gr.Textbox(lines=20, max_lines=40, interactive=False, label="Recent lines", elem_id="log-text")
        saved = gr.File(label="Download", interactive=False, elem_id="log-file")

    @explained
    def on_take(key: str | None, request: gr.Request) -> str:
        return display.download_link(admin.backup(key, who=acted_from(request)))

    @explained
    def on_restore(key: str | None, archive: str | None, request: gr.Request) -> str:
        admin.check(key)
        if not archive:
            raise Refused("Choose a backup archive (.tar.gz) first.")
        return admin.restore(key, Path(archive), who=acted_from(request))

    @explained
    def on_show(key: str | None, name: str | None) -> tuple[Any, ...]:
        found = admin.logs(key)
        chosen = name if name in found else next(iter(found), None)
        if chosen is None:
            return gr.update(choices=[]), "No log yet.", None
        whole = admin.logs(key, _DOWNLOAD_BYTES)[chosen]
        with tempfile.NamedTemporaryFile(
            "w", encoding="utf-8", prefix=f"quartet-{chosen.replace(' ', '')}-", suffix=".log", delete=False
        ) as out:
            out.write(whole)
        return gr.update(choices=list(found), value=chosen), found[chosen], out.name

    take.click(on_take, token, taken, **quiet)
    restore.click(on_restore, [token, upload], restored, **quiet)
    show.click(on_show, [token, which], [which, text, saved], **quiet)
