"""The Compare tab's result preview: a clicked result at full size over the page, with its
method, rank, score, id and caption, and "Use as the reference" (which runs the Compare again
on it). `compare.build` lays it out (`preview_box`) and wires it to the result galleries
(`wire_preview`)."""
from __future__ import annotations

from types import SimpleNamespace
from typing import TYPE_CHECKING, Any

import gradio as gr

from cir_core.errors import CIRError

from .common import EngineHolder, dict_in, event_index, float_in, int_in, list_in, md_text, warn
from .permalink import LINK_JS
from .reference import reference_view
from .why import why_text

if TYPE_CHECKING:
    from cir_core.engine import Engine

PREVIEW_SIZE = 640  # pixels of the full-size preview (world items render crisp at any size)
# Esc closes the result preview (wherever the focus is); `launch_kwargs` adds it to the page head.
PREVIEW_KEYS_JS = """
<script>
document.addEventListener('keydown', (e) => {
  if (e.key !== 'Escape') return;
  const box = document.getElementById('result-preview');
  const close = document.querySelector('#result-preview-close');
  if (box && close && box.checkVisibility()) { e.preventDefault(); close.click(); }
});
</script>
"""


def preview_box(c: SimpleNamespace) -> None:
    """A clicked result at full size, over the page, with its details and "use as reference"."""
    with gr.Column(visible=False, elem_id="result-preview") as c.lightbox:
        c.lb_info = gr.Markdown("", elem_id="result-preview-info")
        c.lb_image = gr.Image(show_label=False, interactive=False, buttons=["download"], height=PREVIEW_SIZE,
                              elem_id="result-preview-image")
        with gr.Row():
            c.lb_use = gr.Button("Use as the reference", variant="primary", elem_id="result-preview-use")
            c.lb_close = gr.Button("Close  [Esc]", elem_id="result-preview-close")
    c.lb_pick = gr.State({})


def wire_preview(holder: EngineHolder, c: SimpleNamespace, keys: list[str], galleries: list) -> None:
    """A click on any result (`galleries`, whose hits are `c.picks[key]`) opens it at full size;
    "Use as the reference" makes it the query's reference (the edit stays); Close or Esc hides it."""

    def opener(key: str):
        def on_select(picks: Any, evt: gr.SelectData):
            hits = list_in(dict_in(picks).get(key), 100)
            i = event_index(evt)
            pick = dict_in(hits[i]) if 0 <= i < len(hits) else {}
            row = pick.get("row")
            try:
                if isinstance(row, bool) or not isinstance(row, int):
                    raise CIRError("That result is no longer shown; run Compare again.")
                engine = holder.get()
                img = engine.image(row, PREVIEW_SIZE)
            except (CIRError, IndexError) as exc:
                warn(str(exc))
                return gr.update(visible=True), f"⚠ {md_text(exc)}", None, {}
            return gr.update(visible=True), preview_info(engine, pick), img, pick
        return on_select

    for key, gal in zip(keys, galleries):
        gal.select(opener(key), [c.picks], [c.lightbox, c.lb_info, c.lb_image, c.lb_pick], api_visibility="private")

    def on_use(pick: Any):
        item = dict_in(pick).get("item_id")
        try:
            if not isinstance(item, str):
                raise CIRError("No result is open; click one first.")
            img, info = reference_view(holder.get(), item)
        except CIRError as exc:
            warn(str(exc))
            return gr.skip(), gr.skip(), f"⚠ {md_text(exc)}", gr.skip(), gr.update(visible=False)
        return item, img, info, None, gr.update(visible=False)

    # the new reference's results at once: the status, columns, permalink and CSV never belong
    # to the reference it replaced
    c.lb_use.click(on_use, [c.lb_pick], [c.ref_id, c.preview, c.ref_info, c.upload, c.lightbox],
                   api_visibility="private").then(
                       None, None, None, js="() => document.getElementById('ref-id')?.scrollIntoView({block: 'center'})",
                       api_visibility="private").then(**c.compare_run).then(
                           None, [c.permalink], [c.permalink], js=LINK_JS, api_visibility="private")
    c.lb_close.click(lambda: gr.update(visible=False), None, [c.lightbox], api_visibility="private", queue=False)


def preview_info(engine: Engine, pick: dict) -> str:
    """The preview's heading: method, rank, score, id, marks, character, why it ranks there
    (its score terms and its ranks under cosine and Chord), caption."""
    parts = [f"**{md_text(pick.get('label'))}** · #{int_in(pick.get('rank'), 0, 0, 10**6)} · score "
             f"{float_in(pick.get('score'), 0.0, -1e9, 1e9):.3f} · `{md_text(pick.get('item_id'))}`"]
    if pick.get("is_target"):
        parts.append("✓ the ground-truth target")
    who = pick.get("character")
    if isinstance(who, str) and who:
        parts.append(f"character **{md_text(who)}**" + (" (same as the reference)" if pick.get("same_character") else ""))
    cap = engine.caption(int(pick["row"]))
    why = why_text(pick.get("why"), str(pick.get("scoring") or "cosine"))
    return " · ".join(parts) + (f"\n\n{why}" if why else "") + \
        (f"\n\n<small>{md_text(cap, 1000)}</small>" if cap else "")
