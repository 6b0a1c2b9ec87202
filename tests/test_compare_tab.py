"""What a daily user of the Compare tab expects (issue 29), on the handler functions: the limits
that change an input say so, the top-k as CSV, the permalink, item ids and progression moves on
the captions, the result preview; and the Figures tab's regenerate line and progress overlay."""
import csv
import json

import gradio as gr
import pytest
from _cir_fakes import fake_methods_engine, long_query, plain

from cir_core.engine import MAX_STEPS
from cir_core.engine.request import CompareRequest, admit, cut_edit, noted_number
from cir_core.errors import CIRError
from ui.compare import _load
from ui.permalink import from_query, link_query
from ui.preview import preview_info
from ui.results import compare_api, compare_view, moves

EDIT = "Make the square blue. Move the character to the left."
OPTIONAL = ["text-only", "image-only", "pic2word"]


@pytest.fixture(scope="module")
def engine():
    return fake_methods_engine()


def test_an_edit_over_the_limit_is_cut_at_a_word_and_said_so():
    text = "Make the square blue. " * 300  # 6,600 characters
    cut, note = cut_edit(text)
    assert len(cut) <= 2000 and cut.endswith(("blue.", "square", "the", "Make")) and text.startswith(cut)
    assert "6,599 characters; the limit is 2,000" in note and f"first {len(cut):,}" in note
    assert cut_edit(EDIT) == (EDIT, None)
    assert cut_edit("a  " * 900)[1] is None  # counted as the engine counts: whitespace collapsed


def test_compare_notes_reach_the_status_and_the_json(engine):
    ref = engine.view.item_id(0)
    many = " ".join(f"Add a star number {i}." for i in range(MAX_STEPS + 3))
    view = compare_view(engine, ref, None, many, k=3, notes=["k = 0 is outside 1–50: 1 was used."])
    status = plain(view.status)
    assert "k = 0 is outside 1–50" in status and f"has {MAX_STEPS + 3} sentences" in status
    assert f"shows the first {MAX_STEPS}" in status and len(view.steps) == MAX_STEPS
    assert any(f"has {MAX_STEPS + 3} sentences" in n for n in view.details["notes"])
    api = compare_api(engine, ref, "Make it blue. " * 200, 3, lam=5)
    assert any("characters; the limit is 2,000" in n for n in api["notes"])
    assert "λ = 5 is outside 0–1: 1 was used." in api["notes"] and len(api["edit"]) <= 2000


@pytest.mark.parametrize("value, used, note", [
    (0, 1, "k = 0 is outside 1–50: 1 was used."), (1000, 50, "k = 1000 is outside 1–50: 50 was used."),
    (8, 8, None), (None, 8, None), ("abc", 8, "k = abc is not a number: 8 was used."),
    (7.5, 8, "k = 7.5 is not a whole number: 8 was used.")])
def test_a_clamped_number_is_named(value, used, note):
    assert noted_number(value, 8, 1, 50, "k", integer=True) == (used, note)


def test_one_admission_for_every_caller(engine):
    """The tab, the JSON API and a notebook send their values through `admit`, the one place a
    Compare's k, λ, scoring, edit and methods are decided: the same request, the same answer."""
    req = CompareRequest(reference_id=engine.view.item_id(0), edit="Make it blue.", k=1000, scoring="Chord",
                         lam="0.5", methods="pact, sum")
    a = admit(req)
    assert (a.k, a.scoring, a.lam, a.methods) == (50, "chord", 0.5, ("pact", "sum"))
    assert a.notes == ("k = 1000 is outside 1–50: 50 was used.",)
    with pytest.raises(CIRError, match="unknown method 'nope'"):
        admit(CompareRequest(edit="x", methods=["nope"]))
    api = compare_api(engine, engine.view.item_id(0), "Make it blue.", 1000, "Chord", "0.5", methods="pact, sum")
    view = compare_view(engine, engine.view.item_id(0), None, "Make it blue.", 1000, "Chord", own_lambda=False,
                        lam="0.5", names=["pact", "sum"])
    run = engine.run(a).to_dict()
    assert [m["hits"] for m in api["methods"]] == [m["hits"] for m in run["methods"]] == \
        [m["hits"] for m in view.details["methods"]]
    assert api["notes"] == run["notes"] and "k = 1000 is outside 1–50: 50 was used." in plain(view.status)


def test_the_topk_csv_holds_every_method_and_step(engine, tmp_path):
    q, row = long_query(engine)
    view = compare_view(engine, engine.view.item_id(row), None, q.text, k=4, csv_dir=tmp_path)
    with open(view.csv, newline="", encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    methods = view.details["methods"]
    assert len(rows) == 4 * len(methods) + 4 * len(view.steps)
    pact = [r for r in rows if r["method"] == "pact" and not r["step"]]
    assert [r["item_id"] for r in pact] == [h["item_id"] for h in methods[0]["hits"]]
    assert [int(r["rank"]) for r in pact] == [1, 2, 3, 4] and pact[0]["reference"] == engine.view.item_id(row)
    assert pact[0]["is_target"] in ("0", "1") and float(pact[0]["score"]) == pytest.approx(
        methods[0]["hits"][0]["score"], abs=1e-6)
    assert {r["step"] for r in rows if r["step"]} == {str(i + 1) for i in range(len(view.steps))}


def test_an_edit_that_reads_as_a_formula_is_written_as_text(engine, tmp_path):
    """A spreadsheet would run a cell starting with = (issue 27's rule, shared with db/export)."""
    q, row = long_query(engine)
    edit = "=HYPERLINK(\"http://x\") make it red"
    view = compare_view(engine, engine.view.item_id(row), None, edit, k=2, csv_dir=tmp_path)
    with open(view.csv, newline="", encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    assert rows and all(r["edit"] == "'" + edit for r in rows)
    assert all(not r["score"].startswith("'") for r in rows)  # numbers stay numbers


def test_captions_carry_the_item_id_and_the_progressions_moves(engine):
    q, row = long_query(engine)
    view = compare_view(engine, engine.view.item_id(row), None, q.text, k=5)
    for (_, items), m in zip(view.columns, view.details["methods"]):
        assert [cap.splitlines()[1] for _, cap in items] == [h["item_id"] for h in m["hits"]]
    assert all(len(cap.splitlines()[0].split(" · ")) in (2, 3) for _, cap in view.steps[0][1])  # no cue at step 1
    prog = view.details["progression"]["steps"]
    was = {h["item_id"]: h["rank"] for h in prog[0]["hits"]}
    for (_, cap), h in zip(view.steps[1][1], prog[1]["hits"]):
        cue = cap.splitlines()[0].split(" · ")[-1]
        r = was.get(h["item_id"])
        assert cue == ("new" if r is None else "=" if r == h["rank"] else
                       f"▲{r - h['rank']}" if r > h["rank"] else f"▼{h['rank'] - r}")
    assert "▲2 / ▼1" in view.progression_header


def test_moves():
    class H:
        def __init__(self, row, rank):
            self.row, self.rank = row, rank

    before = [H(10, 1), H(11, 2), H(12, 3)]
    assert moves(before, [H(12, 1), H(10, 2), H(11, 3), H(99, 4)]) == ["▲2", "▼1", "▼1", "new"]
    assert moves(before, before) == ["=", "=", "="]


def test_the_permalink_round_trips_and_names_what_it_drops():
    q = link_query("test/000140", "Make it blue. Then & more?", 12, "Chord", 0.5, ["pic2word"])
    assert q.startswith("?ref=test/000140&edit=Make%20it%20blue.%20Then%20%26%20more%3F&k=12")
    from urllib.parse import parse_qsl

    linked = from_query(dict(parse_qsl(q[1:])), OPTIONAL)
    assert (linked.ref, linked.edit, linked.k, linked.scoring, linked.lam, linked.extra, linked.notes) == \
        ("test/000140", "Make it blue. Then & more?", 12, "Chord", 0.5, ["pic2word"], [])
    assert linked.runs and "lambda" not in link_query("r", "e", 8, "cosine", None, [])
    bad = from_query({"ref": "x", "k": "0", "scoring": "dot", "lambda": "7", "methods": "pic2word,nope",
                      "view": "api"}, OPTIONAL)
    assert bad.k == 1 and bad.scoring is None and bad.lam == 1.0 and bad.extra == ["pic2word"]
    assert len(bad.notes) == 4 and not bad.runs  # no edit: nothing to run
    assert from_query(None, OPTIONAL).ref is None


def test_the_page_load_takes_a_permalink(engine):
    ref = engine.view.item_id(7)
    out = _load(engine, {"ref": ref, "edit": EDIT, "k": "5", "scoring": "chord", "lambda": "0.2",
                         "methods": "image-only"}, OPTIONAL)
    *_, ref_id, edit, _, info, k, scoring, own, lam, extra, search, examples_note = out
    assert (ref_id, edit["value"], k, scoring, own, extra) == (ref, EDIT, 5, "Chord", False, ["image-only"])
    assert lam["value"] == 0.2 and lam["interactive"] is True and ref in info
    # the hints speak of the gallery shown (here the world)
    assert "square" in edit["placeholder"] and "caption" in search["placeholder"] and "world" in examples_note
    first = engine.view.item_id(engine.view.query(engine.view.example_queries()[0].query_id)[1])
    plain_load = _load(engine, {}, OPTIONAL)
    assert plain_load[6] == first and plain_load[-7:-2] == [gr.skip()] * 5  # the first example, as before
    with pytest.warns(UserWarning, match="cannot be opened"):  # the toast (outside an event: a warning)
        unknown = _load(engine, {"ref": "test/999999", "edit": EDIT}, OPTIONAL)
    assert unknown[6] == first  # not the link's: the page's script then presses nothing


def test_the_result_preview_names_the_result(engine):
    view = compare_view(engine, engine.view.item_id(0), None, EDIT, k=3)
    pick = view.picks["col-pact"][0]
    assert pick["item_id"] == view.details["methods"][0]["hits"][0]["item_id"]
    info = plain(preview_info(engine, pick))
    assert pick["item_id"] in info and "PACT" in info and "#1" in info
    assert engine.view.image(pick["row"], 640).size == (640, 640)
    assert len(view.picks) == len(view.columns) + len(view.steps)


def test_figures_regenerate_line_and_progress_overlay(engine, tmp_path):
    from ui import build_demo
    from ui.figures import CURRENT, export_view
    from ui.settings import AppConfig

    q, row = long_query(engine)
    view = export_view(engine, CURRENT, "", engine.view.item_id(row), None, q.text, ["pact"], k=2,
                       out_dir=tmp_path, engine_args=["--world-queries", "30"])
    with open(view.files[2], encoding="utf-8") as f:
        spec = json.load(f)
    assert "PYTHONPATH=" in view.status and "-m cir_core.figures" in view.status
    assert spec["regenerate"] in view.status and spec["regenerate"].endswith("--world-queries 30")
    deps = build_demo(AppConfig(world_queries=5)).config["dependencies"]
    export = next(d for d in deps if d.get("api_name") == "export_figure")
    clear = next(d for d in deps if d["id"] == export["trigger_after"])
    assert export["show_progress_on"] and export["show_progress_on"] != export["outputs"][2:]
    assert clear["backend_fn"] is False and clear["outputs"] == [export["outputs"][2]]  # the status
