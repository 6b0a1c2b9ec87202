"""The Compare tab's request handlers: run one request and render it to plain values
(`compare_view` -> `CompareView`), or to JSON for the API (`compare_api`)."""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from cir_core.engine import CompareResult, check_edit
from cir_core.methods import list_methods, method_label
from cir_core.errors import CIRError, InputError
from cir_core.backbone_id import is_world_backbone
from cir_core.search import DEFAULT_LAMBDA

from .common import fmt_ms, gallery_items, md_text
from .reference import resolve_reference

if TYPE_CHECKING:
    from cir_core.engine import Engine


@dataclass
class CompareView:
    """Everything the Compare tab shows after a request, as plain values."""

    status: str
    timings: str = ""
    columns: list[tuple[str, list]] = field(default_factory=list)  # (header markdown, items)
    progression_header: str = ""
    steps: list[tuple[str, list]] = field(default_factory=list)
    details: dict = field(default_factory=dict)
    error: str | None = None


def column_header(m: Any, scoring: str) -> str:
    if not m.ok:
        return f"**{md_text(m.label)}**\n\n<span class='col-err'>⚠ {md_text(m.error)}</span>"
    lam = f" · λ {m.lam:.2f}" if scoring == "chord" and m.lam is not None else ""
    return f"**{md_text(m.label)}**{lam}\n\ncompose {fmt_ms(m.compose_ms)} · search {fmt_ms(m.search_ms)}"


def empty_headers(names: list[str]) -> list[tuple[str, list]]:
    return [(f"**{method_label(n)}**\n\n&nbsp;", []) for n in names]


def compare_view(engine: Engine, ref_id: str | None, upload: str | None, edit: str | None, k: int = 8,
                 scoring: str = "cosine", own_lambda: bool = True, lam: float = DEFAULT_LAMBDA,
                 names: list[str] | None = None) -> CompareView:
    """Run one Compare request and render it to values; every user error becomes `status`."""
    names = list(names) if names is not None else engine.methods.default()
    scoring = "chord" if str(scoring).lower().startswith("chord") else "cosine"
    try:
        check_edit(edit)  # an empty edit is reported before an upload is encoded
        with engine.admit():  # busy: said at once, before an upload is encoded
            ref = resolve_reference(engine, ref_id, upload)
            res = engine.compare(ref, edit or "", k=int(k), scoring=scoring,
                                 lam=None if own_lambda else float(lam), methods=names)
    except CIRError as exc:
        return CompareView(status=f"⚠ {md_text(exc)}", columns=empty_headers(names), error=str(exc))
    t0 = time.perf_counter()
    columns = [(column_header(m, scoring), gallery_items(engine, m.hits) if m.ok else [])
               for m in res.methods]
    steps = []
    prog = res.progression
    if prog is not None:
        for s in prog.steps:
            span = "sentence 1" if s.index == 1 else f"sentences 1–{s.index}"
            steps.append((f"**Step {s.index}** · {span}\n\nadds “{md_text(s.sentence, 2000)}”",
                          gallery_items(engine, s.hits)))
    render_ms = (time.perf_counter() - t0) * 1000
    return CompareView(status=status_line(res, engine.backbone.id), timings=timings_line(res, render_ms),
                       columns=columns,
                       progression_header=progression_header(prog), steps=steps,
                       details=details(res, render_ms))


def status_line(res: CompareResult, backbone_id: str | None = None) -> str:
    ref = res.reference
    who = f" ({md_text(ref.character)})" if ref.character else ""
    n = len(res.sentences)
    head = f"Reference **{md_text(ref.label)}**{who} · {n} sentence{'s' * (n != 1)} · top-{res.k} by " \
           f"{'Chord' if res.scoring == 'chord' else 'cosine'}"
    if res.query_id:
        gt = f"This is world query **{md_text(res.query_id)}**: its ground-truth target is framed in green."
    elif ref.row is not None and res.reference.character:
        gt = "Free-text edit: no ground truth for it, so only identity marks are shown."
    else:
        gt = "Uploaded reference: no ground truth and no identity marks."
        if is_world_backbone(backbone_id):  # the shipped one: the world only
            gt += (" **This backbone knows only the generated world** (drawn scenes, not photos): on a photo "
                   "its results mean nothing. For real images start the app with a real backbone, e.g. "
                   "`--backbone ViT-B-32 --pretrained laion2b_s34b_b79k` or `CIR_BACKBONE=hf-hub:ORG/REPO` "
                   "(docs/APP.md).")
    bad = [m.label for m in res.methods if not m.ok]
    missing = f" Unavailable: {md_text(', '.join(bad))} (see their columns)." if bad else ""
    notes = "".join(f" ⚠ {md_text(n, 2000)}" for n in res.notes)
    return f"{head}. {gt}{missing}{notes}"


def timings_line(res: CompareResult, render_ms: float) -> str:
    t = res.timings
    return (f"Time: encode {fmt_ms(t['encode'])} · compose {fmt_ms(t['compose'])} · search "
            f"{fmt_ms(t['search'])} · thumbnails {fmt_ms(render_ms)} · "
            f"**total {fmt_ms(t['total'] + render_ms)}**")


def progression_header(prog: Any) -> str:
    if prog is None:
        return "### Progression\nNo method is available for the progression."
    title = (f"### {prog.label} progression" if prog.native
             else f"### Progression ({prog.label}, prefix re-composition)")
    return f"{title}\n<div class='small-note'>\n\n{prog.note}. One row per accumulated sentence.\n\n</div>"


def details(res: CompareResult, render_ms: float) -> dict:
    d = res.to_dict()
    d["timings"]["thumbnails"] = round(render_ms, 2)
    return d


def compare_api(engine: Engine, reference_id: str | None, edit: str | None, k: int = 8,
                scoring: str = "cosine", lam: float | None = None, upload: str | None = None,
                methods: str | None = None) -> dict:
    """The JSON API: `CompareResult.to_dict()`, or {"error": message} for a user error.
    `methods`: comma-separated registered names (default: the engine's columns and baseline)."""
    try:
        names = [m.strip() for m in str(methods or "").split(",") if m.strip()] or None
        unknown = [m for m in names or [] if m not in list_methods()]
        if unknown:
            raise InputError(f"unknown method {unknown[0]!r}; registered: {', '.join(list_methods())}")
        with engine.admit():  # busy: said at once, before an upload is encoded
            ref = resolve_reference(engine, reference_id, upload)
            return engine.compare(ref, edit or "", k=int(k), scoring=str(scoring).lower(), lam=lam,
                                  methods=names).to_dict()
    except CIRError as exc:
        return {"error": str(exc)}
