"""The widgets of an API key made on a page, for the admin's keys and a person's own alike: the new key,
shown once with a copy button, and the row that revokes one."""

from __future__ import annotations

import gradio as gr


def shown_once_and_revoke(new_id: str, choice_id: str, revoke_id: str) -> tuple[gr.Textbox, gr.Dropdown, gr.Button]:
    secret = gr.Textbox(
        label="The new key: copy it now, it is not shown again", interactive=False, buttons=["copy"], elem_id=new_id
    )
    with gr.Row():
        which = gr.Dropdown(choices=[], label="Key to revoke", elem_id=choice_id)
        revoke = gr.Button("Revoke key", variant="stop", elem_id=revoke_id)
    return secret, which, revoke
