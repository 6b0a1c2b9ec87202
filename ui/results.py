"""The Compare tab's request handlers: run one request and render it to plain values
(`compare_view` -> `CompareView`), or to JSON for the API (`compare_api`)."""
from __future__ import annotations

import csv
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from cir_core.backbone_id import is_world_backbone
from cir_core.engine import Admitted, CompareRequest, CompareResult, admit
from cir_core.errors import CIRError
from cir_core.fileio import csv_cell
from cir_core.methods import method_label
from cir_core.search import DEFAULT_LAMBDA

from .common import fmt_ms, gallery_items, md_text
from .tempfiles import TEMP
from .why import map_html

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
    # what a click on a result needs, per gallery ("col-<method>", "step-<i>"): one dict per hit
    picks: dict[str, list[dict]] = field(default_factory=dict)
    csv: str | None = None  # the top-k of every method (and step) as a CSV file
    edit: str = ""  # the edit the request used (cut to the limit), as typed
    map_html: str = ""  # the neighbourhood map (`ui.why.map_html`)


SHOWN_APART_MS = 10.0  # a wait or a build shorter than this is not worth a word in the header


def column_header(m: Any, scoring: str) -> str:
    """The method's name (and λ), its own compose and search time, and apart from them what it
    waited for other requests and spent in one-time builds, when that is worth a word."""
    if not m.ok:
        return f"**{md_text(m.label)}**\n\n<span class='col-err'>⚠ {md_text(m.error)}</span>"
    lam = f" · λ {m.lam:.2f}" if scoring == "chord" and m.lam is not None else ""
    return f"**{md_text(m.label)}**{lam}\n\ncompose {fmt_ms(m.compose_ms)} · search {fmt_ms(m.search_ms)}" + \
        "".join(f" · {what} {fmt_ms(ms)}" for what, ms in (("waited", m.wait_ms), ("first use", m.build_ms))
                if ms >= SHOWN_APART_MS)


def empty_headers(names: list[str]) -> list[tuple[str, list]]:
    return [(f"**{method_label(n)}**\n\n&nbsp;", []) for n in names]


def compare_view(engine: Engine, ref_id: str | None, upload: str | None, edit: str | None, k: Any = 8,
                 scoring: Any = "cosine", own_lambda: bool = True, lam: Any = DEFAULT_LAMBDA,
                 names: list[str] | None = None, notes: list[str] | None = None,
                 csv_dir: str | Path | None = None) -> CompareView:
    """One Compare request from the tab's values, admitted (`cir_core.engine.admit`: the one place
    its k, λ, scoring, edit and methods are decided), run and rendered; every user error becomes
    `status`. `notes`: the caller's own, shown with admission's."""
    req = CompareRequest(reference_id=ref_id, upload=upload, edit=edit or "", k=k, scoring=scoring,
                         lam=None if own_lambda else lam, methods=names)
    try:
        admitted = admit(req)
    except CIRError as exc:
        shown = list(names) if names is not None else engine.methods.default()
        return CompareView(status=f"⚠ {md_text(exc)}", columns=empty_headers(shown), error=str(exc))
    return render_compare(engine, admitted, notes, csv_dir)


def render_compare(engine: Engine, req: Admitted, notes: list[str] | None = None,
                   csv_dir: str | Path | None = None) -> CompareView:
    """Run an admitted request and render it to values. The top-k is written as a CSV under
    `csv_dir` (default: `ui.tempfiles.TEMP`'s folder, swept two minutes after)."""
    names = list(req.methods) if req.methods is not None else engine.methods.default()
    try:
        res = engine.run(req)
    except CIRError as exc:
        return CompareView(status=f"⚠ {md_text(exc)}", columns=empty_headers(names), error=str(exc))
    res.notes[:0] = notes or []
    scoring = res.scoring
    t0 = time.perf_counter()
    columns = [(column_header(m, scoring), gallery_items(engine, m.hits) if m.ok else [])
               for m in res.methods]
    picks = {f"col-{m.name}": [_pick(m.label, h, res.scoring) for h in m.hits] for m in res.methods}
    steps = []
    prog = res.progression
    if prog is not None:
        before: list = []
        for s in prog.steps:
            span = "sentence 1" if s.index == 1 else f"sentences 1–{s.index}"
            steps.append((f"**Step {s.index}** · {span}\n\nadds “{md_text(s.sentence, 2000)}”",
                          gallery_items(engine, s.hits, moved=moves(before, s.hits) if s.index > 1 else None)))
            picks[f"step-{s.index}"] = [_pick(f"{prog.label} step {s.index}", h, res.scoring) for h in s.hits]
            before = s.hits
    ids = {h.row: h.item_id for m in res.methods for h in m.hits}
    if res.reference.row is not None:
        ids[res.reference.row] = res.reference.item_id or ""
    for r in res.target_rows:
        ids.setdefault(r, engine.item_id(r))
    why_map = map_html(res.map, {m.name: m.label for m in res.methods} |
                       ({prog.method: prog.label} if prog is not None else {}), ids)
    render_ms = (time.perf_counter() - t0) * 1000
    out = Path(csv_dir) if csv_dir else TEMP.root  # its sweeper removes the files 2 min on
    follows = engine.query_character(res.reference, res.edit) if res.query_id else None
    return CompareView(status=status_line(res, engine.backbone.id, engine.domain, follows),
                       timings=timings_line(res, render_ms),
                       columns=columns,
                       progression_header=progression_header(prog), steps=steps,
                       details=details(res, render_ms), picks=picks, edit=req.edit,
                       csv=str(write_topk_csv(res, out / csv_name())), map_html=why_map)


def moves(before: list, hits: list) -> list[str]:
    """How each hit moved since the previous progression step: '▲2' (two places up), '▼1', '='
    (same place) or 'new' (not in the previous step's top-k)."""
    was = {h.row: h.rank for h in before}
    out = []
    for h in hits:
        d = was[h.row] - h.rank if h.row in was else None
        out.append("new" if d is None else "=" if d == 0 else f"▲{d}" if d > 0 else f"▼{-d}")
    return out


def _pick(label: str, hit: Any, scoring: str = "cosine") -> dict:
    why = asdict(hit.why) if getattr(hit, "why", None) is not None else None
    return {"label": label, "rank": hit.rank, "row": hit.row, "item_id": hit.item_id, "score": hit.score,
            "is_target": hit.is_target, "character": hit.character, "same_character": hit.same_character,
            "why": why, "scoring": scoring}


def csv_name() -> str:
    """'cir-topk-20261202-001122-3f9a1c.csv': a time to sort by, a random tail so that two requests
    in one second (or two app processes) never share a file."""
    import secrets

    return f"cir-topk-{time.strftime('%Y%m%d-%H%M%S')}-{secrets.token_hex(3)}.csv"


CSV_FIELDS = ["method", "label", "step", "rank", "item_id", "score", "is_target", "character",
              "same_character", "reference", "edit", "scoring"]
CSV_TEXT = frozenset({"label", "item_id", "character", "reference", "edit"})  # text from users or manifests


def write_topk_csv(res: CompareResult, path: Path) -> Path:
    """Every method's top-k (then the progression's, with `step`) as CSV rows, one per result."""
    ref = res.reference.item_id or res.reference.label
    common = {"reference": ref, "edit": res.edit, "scoring": res.scoring}
    rows = [{"method": m.name, "label": m.label, "step": "", **_csv_hit(h), **common}
            for m in res.methods for h in m.hits]
    prog = res.progression
    for s in prog.steps if prog is not None else []:
        rows += [{"method": prog.method, "label": f"{prog.label} progression", "step": s.index, **_csv_hit(h),
                  **common} for h in s.hits]

    # A new file that Gradio copies once the event returns: no reader can see it half-written,
    # and it needs no fsync (fileio.atomic_write's cost on every Compare).
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", newline="", encoding="utf-8") as f:
        w = csv.DictWriter(f, fieldnames=CSV_FIELDS, lineterminator="\r\n")
        w.writeheader()
        # the edit is the user's text and ids come from a user's manifest: none runs as a formula
        # (numbers are left as they are: a negative score is not one)
        w.writerows({k: csv_cell(v) if k in CSV_TEXT else v for k, v in r.items()} for r in rows)
    return path


def _csv_hit(h: Any) -> dict:
    flag = lambda v: "" if v is None else int(bool(v))  # noqa: E731 (unknown stays empty)
    return {"rank": h.rank, "item_id": h.item_id, "score": f"{h.score:.6f}", "is_target": flag(h.is_target),
            "character": h.character or "", "same_character": flag(h.same_character)}


def status_line(res: CompareResult, backbone_id: str | None = None, domain: str = "world",
                follows: str | None = None) -> str:
    """The request in one paragraph: the reference, the edit's length, k and scoring; whether it
    is a benchmark query (`domain`: "world" or "films"; a film query `follows` one actor) whose
    ground truth is framed; what is unavailable; the notes."""
    ref = res.reference
    who = f" ({md_text(ref.character)})" if ref.character else ""
    n = len(res.sentences)
    head = f"Reference **{md_text(ref.label)}**{who} · {n} sentence{'s' * (n != 1)} · top-{res.k} by " \
           f"{'Chord' if res.scoring == 'chord' else 'cosine'}"
    if res.query_id and domain == "films":
        about = f", about **{md_text(follows)}**" if follows else ""
        gt = (f"This is film query **{md_text(res.query_id)}**{about}: every keyframe that answers it is "
              "framed in green" + (f", and a blue dot marks the keyframes where {md_text(follows)} appears."
                                   if follows else "."))
    elif res.query_id:
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
    """Each stage's own time, then apart from them the time spent waiting behind other requests
    and in one-time builds (a method's first load, CIReVL's caption bank), then the total."""
    t = res.timings
    apart = "".join(f" · {what} {fmt_ms(t.get(key, 0.0))}" for key, what in
                    (("wait", "waiting for other requests"), ("build", "one-time builds"))
                    if t.get(key, 0.0) >= SHOWN_APART_MS)
    return (f"Time: encode {fmt_ms(t['encode'])} · compose {fmt_ms(t['compose'])} · search "
            f"{fmt_ms(t['search'])} · thumbnails {fmt_ms(render_ms)}{apart} · "
            f"**total {fmt_ms(t['total'] + render_ms)}**")


def progression_header(prog: Any) -> str:
    if prog is None:
        return "### Progression\nNo method is available for the progression."
    title = (f"### {prog.label} progression" if prog.native
             else f"### Progression ({prog.label}, prefix re-composition)")
    return (f"{title}\n<div class='small-note'>\n\n{prog.note}. One row per accumulated sentence; under each "
            "result from step 2 on, how it moved since the step before: ▲2 / ▼1 places up / down, = same "
            "place, new: not in that step's top-k.\n\n</div>")


def details(res: CompareResult, render_ms: float) -> dict:
    d = res.to_dict()
    d["timings"]["thumbnails"] = round(render_ms, 2)
    return d


def compare_api(engine: Engine, reference_id: Any, edit: Any, k: Any = 8, scoring: Any = "cosine",
                lam: Any = None, upload: str | None = None, methods: Any = None) -> dict:
    """The JSON API: the request admitted (`cir_core.engine.admit`) and run, `CompareResult.to_dict()`
    — its `notes` say what admission changed (a k or λ out of range, an edit cut) — or
    {"error": message} for a user error. `methods`: comma-separated registered names (default:
    the engine's columns and baseline)."""
    try:
        res = engine.run(admit(CompareRequest(reference_id=reference_id, upload=upload, edit=edit or "", k=k,
                                              scoring=scoring, lam=lam, methods=methods)))
    except CIRError as exc:
        return {"error": str(exc)}
    return res.to_dict()
