"""The Results tab: per-method identity / edit rates from the annotation DB, with bootstrap
intervals over queries, agreement, a bar chart, and the signed-in annotator's own export.

Signed-in users only. Rates and agreement are aggregates; gold accuracy is shown for the viewer
alone and only once they have finished the set, in both modes (every annotator's is the
organisers', `python -m db.report`), and the export holds only the viewer's judgments (the full
export is the operator's `python -m db.export`). In annotation-only mode (`--annotation-only`) the tab shows
the viewer's own work only — counts, gold accuracy, export — and no method rates, so a campaign's
annotators learn nothing about the methods while they judge.

The tab opens on the set the viewer works in (their newest claim) and refreshes its list when it
is selected. Compute reads in a read transaction (SQLite: no write lock, so annotators' saves go
on) and runs one at a time (`concurrency_limit=1`): the bootstrap is CPU work.
"""
from __future__ import annotations

import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import gradio as gr

from db.export import OWN_FIELDS, own_rows, write_csv, write_jsonl
from db.report import compute_report, report_figure

from .annotate import NO_SIGN_IN, DBUnavailable, ServiceHolder, user_of
from .common import EngineHolder, int_in, md_text, warn
from .tempfiles import TEMP

log = logging.getLogger(__name__)

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


def summary_markdown(rep: dict, user: str, gold: dict | None = None) -> str:
    """The report as markdown tables (the terminal version is `db.report.format_report`), with
    the viewer's own gold accuracy as `AnnotationService.shown_gold` gives it (None: not yet)."""
    j, k = rep["judgments"], rep["k"]
    out = [f"**{md_text(rep['query_set'])}** · {rep['n_queries']} queries · {j['annotators']} annotators · "
           f"{j['answered']} answers, {j['skipped']} skips · {j['tasks_answered']} / {j['tasks']} pairs judged"]
    if rep.get("pairwise"):
        return "\n".join(out + pairwise_markdown(rep["pairwise"]) + review_markdown(rep) +
                          [f"\n{GOLD_LATER}" if gold is None else _gold_line(gold)])
    out += ["", f"| method · scoring | queries @1 / @{k} | identity @1 | identity @{k} | edit @1 | edit @{k} |",
            "|---|---|---|---|---|---|"]
    for m in rep["methods"]:
        cov = m["coverage"]
        out.append(f"| {md_text(m['method'])} · {md_text(m['scoring'])} | {cov['at_1']} / {cov['at_k']} | "
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
            out.append(f"| {md_text(a).replace('/', ' · ')} − {md_text(b).replace('/', ' · ')} | "
                       f"{cells[0]} | {cells[1]} |")
    out += [f"\n⚠ {md_text(n, 1000)}" for n in rep.get("notes", [])]
    out += ["", "Rates are means over queries with 95 % bootstrap intervals (queries resampled); a query "
            "counts only once all its top-k pairs are judged (the 'queries' column). Edit: yes = 1, "
            "partly = ½. Details: docs/ANNOTATION.md."]
    out += human_auto_markdown(rep.get("human_vs_auto"), k)
    out += review_markdown(rep)
    ag = rep["agreement"]
    parts = []
    for attr in ag:
        vals = [name.replace("_", " ") + " " + ("n/a" if v["value"] is None else f"{v['value']:.2f}")
                for name, v in ag[attr].items()]
        parts.append(f"**{attr}**: " + ", ".join(vals))
    out += ["", "**Agreement** (n/a: undefined, e.g. one rater per pair) — " + " · ".join(parts)]
    if gold is None:
        out.append(f"\n{GOLD_LATER}")
    else:
        out.append(_gold_line(gold))
    return "\n".join(out)


def review_markdown(rep: dict) -> list[str]:
    """The review's state, and per method the rates from the raw majority beside the adjudicated."""
    rv = rep.get("review")
    if not rv:
        return []
    out = ["", f"**Labels**: {rv['adjudicated']} pairs decided by reviewers, **{rv['open_ties']} open ties** "
           f"(no majority, not decided), {rv['majority']} by majority, {rv['unjudged']} unjudged."]
    rows = rep.get("labels") or []
    if rows:
        metrics = list(rows[0]["at_k"]["raw_majority"])
        k = rep["k"]
        out += ["", "| method · scoring | " + " | ".join(f"{m} @{k} majority | {m} @{k} adjudicated" for m in metrics)
                + " |", "|---|" + "---|" * (2 * len(metrics))]
        for r in rows:
            out.append(f"| {md_text(r['method'])} · {md_text(r['scoring'])} | " + " | ".join(
                f"{_ci(r['at_k']['raw_majority'][m])} | {_ci(r['at_k']['adjudicated'][m])}" for m in metrics) + " |")
    return out


def pairwise_markdown(pw: dict) -> list[str]:
    """A pairwise set's win rates (raw and adjudicated) and its Bradley-Terry ranking."""
    def ci3(c: dict) -> str:
        return _ci(c)

    out = ["", "**Pairwise** (X's win rate over Y: (X wins + ½ ties) / answers; 95 % interval over queries)", "",
           "| X | Y | pairs | identical | win rate (answers) | win rate (adjudicated) | X wins | Y wins | both | neither |",
           "|---|---|---|---|---|---|---|---|---|---|"]
    for p in pw["pairs"]:
        raw = p["raw"]
        out.append(f"| {md_text(p['x'])} | {md_text(p['y'])} | {p['tasks']} | {p['identical']} | "
                   f"{ci3(raw['win_rate'])} | {ci3(p['adjudicated']['win_rate'])} | "
                   + " | ".join(ci3(raw.get(o, {})) for o in ("x", "y", "both", "neither")) + " |")
    if pw.get("bradley_terry"):
        out += ["", "**Bradley–Terry ranking** (log-strength, 95 % interval): " + " · ".join(
            f"{b['rank']}. {md_text(b['method'])} {b['log_strength']:+.2f} [{b['lo']:+.2f}, {b['hi']:+.2f}]"
            for b in pw["bradley_terry"])]
    if pw.get("position_bias"):
        pb = pw["position_bias"]
        out.append(f"\nPosition bias: A (left) chosen in {pb['share_a']:.2f} [{pb['lo']:.2f}, {pb['hi']:.2f}] of "
                   f"{pb['n']} answers that chose a side (½: none).")
    return out


def organiser_markdown(rep: dict) -> str:
    """The organiser's per-annotator table (db.organiser.annotator_report) as markdown."""
    qs = rep["questions"]
    head = ["annotator", "done / queue", "s per pair", "gold identity", *[f"agree {q}" for q in qs],
            *[f"κ {q}" for q in qs]]
    out = [f"**Annotators of {md_text(rep['query_set'])}** (medians and rates with 95 % intervals: seconds "
           "over their answers, gold by Wilson, agreement with the others' majority and κ with co-annotators "
           "over queries)", "", "| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in rep["annotators"]:
        p = r["progress"]
        cells = [md_text(r["annotator"]) + (" (paused)" if r["paused"] else ""), f"{p['done']} / {p['total']}",
                 _ci(r["seconds"]), _vci(r["gold"].get("identity")),
                 *[_vci(r["agreement"][q]) for q in qs], *[_vci(r["kappa"][q]) for q in qs]]
        out.append("| " + " | ".join(cells) + " |")
    if not rep["annotators"]:
        out.append("| nobody has answered yet |" + " |" * (len(head) - 1))
    return "\n".join(out)


def _vci(c: dict | None) -> str:
    if not c or c.get("value") is None:
        return "n/a"
    return f"{c['value']:.2f} [{c['lo']:.2f}, {c['hi']:.2f}]"


def _agree_md(g: dict) -> str:
    if g["rate"] is None:
        return "n/a"
    kappa = "n/a" if g["kappa"] is None else f"{g['kappa']:.2f} [{g['kappa_lo']:.2f}, {g['kappa_hi']:.2f}]"
    return f"{g['rate']:.2f} [{g['rate_lo']:.2f}, {g['rate_hi']:.2f}] · κ {kappa}"


def human_auto_markdown(r: dict | None, k: int) -> list[str]:
    """db.human_auto's table (people's identity rate beside the cast labels', and how often the
    label agrees with the majority of people) as markdown; nothing when the set has no labels."""
    if not r:
        return []
    out = ["", "**People vs the automatic identity label** (cast labels / the world's truth; mean and 95 % "
           "interval over the queries shown; agreement with the majority human label, Cohen's κ)", "",
           f"| method · scoring | queries @{k} | people @1 | label @1 | people @{k} | label @{k} | "
           f"identity@{k} | people − label @{k} | agreement @{k} |", "|---|---|---|---|---|---|---|---|---|"]
    for m in r["methods"]:
        a1, ak = m["at_1"], m["at_k"]
        out.append(f"| {md_text(m['method'])} · {md_text(m['scoring'])} | {ak['queries']} | {_ci(a1['human'])} | "
                   f"{_ci(a1['auto_rate'])} | {_ci(ak['human'])} | {_ci(ak['auto_rate'])} | "
                   f"{_ci(ak['auto_identity'])} | {_diff_ci(ak['human_minus_auto'])} | "
                   f"{_agree_md(m['agreement_at_k'])} |")
    g = r["agreement"]
    out.append(f"\nAll judged pairs: agreement {_agree_md(g)} ({g['n_tasks']} pairs over {g['n_queries']} "
               f"queries; no majority: {', '.join(f'{k_} {v}' for k_, v in r['no_majority'].items()) or 'none'})")
    return out


def _diff_ci(c: dict) -> str:
    if c.get("diff") is None:
        return "n/a"
    return f"{c['diff']:+.2f} [{c['lo']:+.2f}, {c['hi']:+.2f}]"


GOLD_LATER = ("Your gold accuracy is shown once you have finished this set (shown earlier, it would tell "
              "which pairs are the known-answer ones), as it was the first time you saw it; organisers see "
              "everyone's with `python -m db.report`.")


def _gold_line(g: dict) -> str:
    return (f"\n**Your gold accuracy**: identity {g['identity']['correct']}/{g['identity']['n']}, "
            f"edit {g['edit']['correct']}/{g['edit']['n']}")


def _export(svc: Any, user: str, out_dir: str | Path | None) -> list[str]:
    """The viewer's own judgments (OWN_FIELDS: no task ids, no gold answers) as CSV and JSONL."""
    with svc.ReadSession() as s:
        rows = own_rows(s, user)
    # Served to `user` only (ui/http_guard.py): the rows hold their comments.
    out = Path(out_dir) if out_dir else TEMP.new("cir-judgments-", owner=user)
    safe = "".join(c if c.isalnum() else "-" for c in user)[:80]
    files = [out / f"judgments-{safe}.csv", out / f"judgments-{safe}.jsonl"]
    write_csv(rows, files[0], OWN_FIELDS)
    write_jsonl(rows, files[1], OWN_FIELDS)
    return [str(f) for f in files]


def own_markdown(svc: Any, user: str, name: str) -> str:
    """The viewer's own work in `name` (annotation-only mode): counts, and gold accuracy once
    they have finished the set — watched after every answer, it would tell which pairs are gold."""
    counts = svc.progress_of(user).get(name, {"answered": 0, "skipped": 0})
    out = [f"**{md_text(name)}** · your work: **{counts['answered']}** answered, "
           f"**{counts['skipped']}** skipped"]
    g = svc.shown_gold(user, name)
    out.append(f"\n{GOLD_LATER}" if g is None else _gold_line(g))
    out.append("\nThis campaign runs in annotation-only mode: method results are shown to the "
               "organisers only, after annotation.")
    return "\n".join(out)


def results_view(services: ServiceHolder, user: str | None, set_name: str | None, k: int | None,
                 out_dir: str | Path | None = None, own_only: bool = False) -> ResultsView:
    if not user:
        return ResultsView(NO_SIGN_IN)
    svc = services.get()
    sets = svc.query_sets()
    if not sets:
        return ResultsView("No query set yet: open the Annotate tab (it pools the demo set) or run "
                           "`python -m db.pooling`.")
    name = set_name if set_name in sets else (svc.current_set(user) or sets[0])
    if own_only:
        return ResultsView(own_markdown(svc, user, name), None, _export(svc, user, out_dir), sets, name)
    with svc.ReadSession() as s:
        rep = compute_report(s, name, int(k) if k else None, n_boot=N_BOOT)
    files = _export(svc, user, out_dir)
    return ResultsView(summary_markdown(rep, user, svc.shown_gold(user, name)), report_figure(rep), files, sets, name)


def build(services: ServiceHolder, holder: EngineHolder | None = None, own_only: bool = False) -> tuple[list, Any]:
    """Lay out the tab; returns (outputs filled on page load and on selecting the tab, the load
    function)."""
    with gr.Row():
        set_dd = gr.Dropdown(label="Query set", choices=[], scale=2, elem_id="res-set")
        # No minimum: an emptied box arrives as 0, which means "the pool depth", not an error.
        k = gr.Number(label="k (0: the set's pool depth)", value=0, precision=0, scale=1, visible=not own_only)
        go = gr.Button("Compute" if not own_only else "Show my work", variant="primary", scale=1,
                       elem_id="res-go")
    summary = gr.Markdown(NO_SIGN_IN, elem_id="res-summary")
    plot = gr.Plot(label="Rates with 95 % intervals", elem_id="res-plot", visible=not own_only)
    files = gr.File(label="Your judgments (CSV, JSONL)", file_count="multiple", interactive=False)
    org = _organiser_panel(services)

    def run(name, kk, request: gr.Request, profile: gr.OAuthProfile | None):
        try:
            v = results_view(services, user_of(request, profile), name if isinstance(name, str) else None,
                             int_in(kk, 0, 0, 10_000), own_only=own_only)
        except (ValueError, LookupError, PermissionError, DBUnavailable) as exc:  # a bad k, a DB that cannot open
            msg = str(exc)
        except Exception:
            log.exception("Results failed")
            msg = "The results could not be computed (the server log has the details)."
        else:
            # The set list may have grown since the page loaded (the demo set is pooled on first use).
            dd = gr.update(choices=v.sets, value=v.chosen) if v.sets else gr.skip()
            return dd, v.summary, v.figure, v.files or None
        warn(msg)
        return gr.skip(), f"⚠ {md_text(msg)}", None, None

    go.click(run, [set_dd, k], [set_dd, summary, plot, files], api_name="results_compute",
             api_visibility="undocumented", concurrency_limit=1, concurrency_id="results")

    def on_load(request: gr.Request, profile: gr.OAuthProfile | None):
        user = user_of(request, profile)
        if not user:
            return gr.update(choices=[]), NO_SIGN_IN, gr.update(visible=False)
        try:
            svc = services.get()
            if holder is not None and holder.engine is not None:
                svc.ensure_default_set(holder.engine)  # the same set the Annotate tab opens on
            sets = svc.query_sets()
            name = svc.current_set(user)
        except Exception as exc:
            log.warning("Results tab could not load for %r: %s", user, exc)
            return gr.update(choices=[]), f"⚠ The annotation DB is unavailable: {md_text(exc)}", gr.update(visible=False)
        return (gr.update(choices=sets, value=name),
                "Choose a query set and press **" + ("Show my work" if own_only else "Compute") + "**.",
                gr.update(visible=svc.roles.is_organiser(user)))

    org.wire(set_dd)
    return [set_dd, summary, org.column], on_load


@dataclass
class OrganiserPanel:
    column: Any
    wire: Any  # (set dropdown) -> None: its events, once the set dropdown exists


def organiser_view(services: ServiceHolder, user: str | None, set_name: str | None) -> tuple[str, Any, list[str]]:
    """The per-annotator table (markdown), the drift figure and the annotators' names, for an
    organiser; PermissionError for anyone else (the service checks the role)."""
    if not user:
        raise PermissionError("sign in first")
    from db.organiser import drift_figure

    svc = services.get()
    name = set_name if set_name in svc.query_sets() else svc.current_set(user)
    if name is None:
        return "No query set yet.", None, []
    rep = svc.annotator_table(user, name, n_boot=N_BOOT)
    return organiser_markdown(rep), drift_figure(rep), [r["annotator"] for r in rep["annotators"]]


def _organiser_panel(services: ServiceHolder) -> OrganiserPanel:
    """Organisers only (visible on load for them; the service refuses everyone else): the table,
    the drift plot, and pausing or resuming an annotator."""
    with gr.Column(visible=False, elem_id="org-panel") as col:
        gr.Markdown("### The campaign's annotators (organisers only)")
        with gr.Row(equal_height=True):
            go = gr.Button("Show annotators", variant="primary", elem_id="org-go", scale=1)
            who = gr.Dropdown(label="Annotator", choices=[], elem_id="org-who", scale=2)
            pause = gr.Button("Pause", elem_id="org-pause", scale=1)
            resume = gr.Button("Resume", elem_id="org-resume", scale=1)
        table = gr.Markdown("", elem_id="org-table")
        drift = gr.Plot(label="Drift over the campaign", show_label=False, elem_id="org-drift")

    def wire(set_dd: Any) -> None:
        def table_for(name: Any, user: str | None, note: str = "") -> tuple:
            try:
                md, fig, names = organiser_view(services, user, name if isinstance(name, str) else None)
            except (PermissionError, LookupError, DBUnavailable) as exc:
                warn(str(exc))
                return f"⚠ {md_text(exc)}", None, gr.update()
            return (note + md), fig, gr.update(choices=names)

        def show(name, request: gr.Request, profile: gr.OAuthProfile | None):
            return table_for(name, user_of(request, profile))

        def toggle(paused: bool):
            def fn(name, person, request: gr.Request, profile: gr.OAuthProfile | None):
                user = user_of(request, profile)
                try:
                    if not isinstance(person, str) or not person:
                        raise LookupError("choose an annotator first")
                    now = services.get().set_paused(user or "", person, paused)
                except (PermissionError, LookupError, ValueError, DBUnavailable) as exc:
                    warn(str(exc))
                    return f"⚠ {md_text(exc)}", None, gr.update()
                note = f"**{md_text(person)}** is {'paused: their queue stopped and their pairs are back in the pool' if now else 'active again'}.\n\n"
                return table_for(name, user, note)
            return fn

        kw = {"api_visibility": "undocumented", "concurrency_limit": 1, "concurrency_id": "results"}
        go.click(show, [set_dd], [table, drift, who], api_name="organiser_table", **kw)
        pause.click(toggle(True), [set_dd, who], [table, drift, who], api_name="organiser_pause", **kw)
        resume.click(toggle(False), [set_dd, who], [table, drift, who], api_name="organiser_resume", **kw)

    return OrganiserPanel(col, wire)
