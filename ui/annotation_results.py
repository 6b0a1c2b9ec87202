"""The Results tab: per-method identity / edit rates from the annotation DB, with bootstrap
intervals over queries, agreement, a bar chart, and the signed-in annotator's own export.

Signed-in users only. Rates and agreement are aggregates; the per-annotator gold accuracy is
shown for the viewer alone, and the export holds only the viewer's judgments (the full export is
the operator's `python -m db.export`).
"""
from __future__ import annotations

import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import gradio as gr

from db.export import export_rows, write_csv, write_jsonl
from db.report import compute_report, report_figure

from .annotate import NO_SIGN_IN, ServiceHolder, user_of

N_BOOT = 1000


@dataclass
class ResultsView:
    summary: str
    figure: Any = None
    files: list[str] = field(default_factory=list)
    sets: list[str] = field(default_factory=list)
    chosen: str | None = None


def _ci(c: dict) -> str:
    if c.get("mean") is None:
        return "n/a"
    return f"{c['mean']:.2f} [{c['lo']:.2f}, {c['hi']:.2f}]"


def _diff(c: dict | None) -> str:
    if not c or c.get("diff") is None:
        return "n/a"
    return f"{c['diff']:+.2f} [{c['lo']:+.2f}, {c['hi']:+.2f}] · P>0 {c['frac_positive']:.2f} · n={c['n']}"


def summary_markdown(rep: dict, user: str) -> str:
    """The report as markdown tables (the terminal version is `db.report.format_report`)."""
    j, k = rep["judgments"], rep["k"]
    out = [f"**{rep['query_set']}** · {rep['n_queries']} queries · {j['annotators']} annotators · "
           f"{j['answered']} answers, {j['skipped']} skips · {j['tasks_answered']} / {j['tasks']} pairs judged",
           "", f"| method · scoring | queries @1 / @{k} | identity @1 | identity @{k} | edit @1 | edit @{k} |",
           "|---|---|---|---|---|---|"]
    for m in rep["methods"]:
        cov = m["coverage"]
        out.append(f"| {m['method']} · {m['scoring']} | {cov['at_1']} / {cov['at_k']} | "
                   f"{_ci(m['at_1']['identity'])} | {_ci(m['at_k']['identity'])} | "
                   f"{_ci(m['at_1']['edit'])} | {_ci(m['at_k']['edit'])} |")
    pairs = [c for c in rep["comparisons"] if c["depth"] == "at_k"
             and c["a"].split("/")[1] == c["b"].split("/")[1]]  # same scoring, methods compared
    if pairs:
        out += ["", f"**Pairwise @{k}** (mean per-query difference a − b, paired bootstrap 95 % CI, "
                "share of resamples > 0, shared queries)", "",
                "| a − b | identity | edit |", "|---|---|---|"]
        by_pair: dict[tuple[str, str], dict[str, dict]] = {}
        for c in pairs:
            by_pair.setdefault((c["a"], c["b"]), {})[c["metric"]] = c
        for (a, b), m in by_pair.items():
            cells = [_diff(m.get(x)) for x in ("identity", "edit")]
            out.append(f"| {a.replace('/', ' · ')} − {b.replace('/', ' · ')} | {cells[0]} | {cells[1]} |")
    out += ["", "Rates are means over queries with 95 % bootstrap intervals (queries resampled); a query "
            "counts only once all its top-k pairs are judged (the 'queries' column). Edit: yes = 1, "
            "partly = ½. Details: docs/ANNOTATION.md."]
    ag = rep["agreement"]
    parts = []
    for attr in ("identity", "edit"):
        vals = [name.replace("_", " ") + " " + ("n/a" if v["value"] is None else f"{v['value']:.2f}")
                for name, v in ag[attr].items()]
        parts.append(f"**{attr}**: " + ", ".join(vals))
    out += ["", "**Agreement** (n/a: undefined, e.g. one rater per pair) — " + " · ".join(parts)]
    mine = [g for g in rep["gold"] if g["annotator"] == user]
    if mine:
        g = mine[0]
        out.append(f"\n**Your gold accuracy**: identity {g['identity']['correct']}/{g['identity']['n']}, "
                   f"edit {g['edit']['correct']}/{g['edit']['n']}")
    return "\n".join(out)


def results_view(services: ServiceHolder, user: str | None, set_name: str | None, k: int | None,
                 out_dir: str | Path | None = None) -> ResultsView:
    if not user:
        return ResultsView(NO_SIGN_IN)
    svc = services.get()
    sets = svc.query_sets()
    if not sets:
        return ResultsView("No query set yet: open the Annotate tab (it pools the demo set) or run "
                           "`python -m db.pooling`.")
    name = set_name if set_name in sets else sets[0]
    with svc.Session() as s:
        rep = compute_report(s, name, int(k) if k else None, n_boot=N_BOOT)
        rows = export_rows(s, annotator=user)
    out = Path(out_dir) if out_dir else Path(tempfile.mkdtemp(prefix="cir-judgments-"))
    safe = "".join(c if c.isalnum() else "-" for c in user)
    files = [out / f"judgments-{safe}.csv", out / f"judgments-{safe}.jsonl"]
    write_csv(rows, files[0])
    write_jsonl(rows, files[1])
    return ResultsView(summary_markdown(rep, user), report_figure(rep), [str(f) for f in files], sets, name)


def build(services: ServiceHolder) -> tuple[list, Any]:
    """Lay out the tab; returns (outputs filled on page load, the load function)."""
    with gr.Row():
        set_dd = gr.Dropdown(label="Query set", choices=[], scale=2, elem_id="res-set")
        # No minimum: an emptied box arrives as 0, which means "the pool depth", not an error.
        k = gr.Number(label="k (0: the set's pool depth)", value=0, precision=0, scale=1)
        go = gr.Button("Compute", variant="primary", scale=1, elem_id="res-go")
    summary = gr.Markdown(NO_SIGN_IN, elem_id="res-summary")
    plot = gr.Plot(label="Rates with 95 % intervals", elem_id="res-plot")
    files = gr.File(label="Your judgments (CSV, JSONL)", file_count="multiple", interactive=False)

    def run(name, kk, request: gr.Request, profile: gr.OAuthProfile | None):
        try:
            v = results_view(services, user_of(request, profile), name, kk)
        except Exception as exc:  # a bad k or an empty set is a message, not a stack trace
            gr.Warning(str(exc))
            return gr.skip(), f"⚠ {exc}", None, None
        # The set list may have grown since the page loaded (the demo set is pooled on first use).
        dd = gr.update(choices=v.sets, value=v.chosen) if v.sets else gr.skip()
        return dd, v.summary, v.figure, v.files or None

    go.click(run, [set_dd, k], [set_dd, summary, plot, files], api_visibility="private")

    def on_load(request: gr.Request, profile: gr.OAuthProfile | None):
        if not user_of(request, profile):
            return gr.update(choices=[]), NO_SIGN_IN
        try:
            sets = services.get().query_sets()
        except Exception as exc:
            return gr.update(choices=[]), f"⚠ The annotation DB is unavailable: {exc}"
        return (gr.update(choices=sets, value=sets[0] if sets else None),
                "Choose a query set and press **Compute**.")

    return [set_dd, summary], on_load
