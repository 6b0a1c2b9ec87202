"""db.human_auto: the human identity rate beside the automatic identity@k, and how well the
automatic label agrees with the majority human label (rate, Cohen's κ, intervals)."""
from __future__ import annotations

import numpy as np
import pytest

from db.agreement import cohen_kappa
from db.human_auto import format_human_auto, human_vs_auto, majority
from db.results import JudgmentRow, SetData, item_scores


def make_set() -> SetData:
    """4 queries × 2 items; method m ranks item a then b, method n ranks b then a."""
    qids = [1, 2, 3, 4]
    task_of = {(q, it): q * 10 + i for q in qids for i, it in enumerate("ab", 1)}
    rankings = {("m", "cosine"): {q: {1: "a", 2: "b"} for q in qids},
                ("n", "cosine"): {q: {1: "b", 2: "a"} for q in qids}}
    auto = {11: "yes", 12: "no", 21: "yes", 22: "yes", 31: "no", 32: "no", 41: "yes", 42: "no"}
    # two annotators per task; x and y agree except where noted
    answers = {11: ("yes", "yes"), 12: ("no", "no"), 21: ("yes", "yes"), 22: ("no", "no"),   # 22 disagrees with auto
               31: ("yes", "no"),                                                           # tie: no majority
               32: ("no", "no"), 41: ("cant_tell", "cant_tell"), 42: ("yes", "yes")}         # 42 disagrees
    judg = [JudgmentRow(t, who, "answered", lab, "yes", None) for t, labs in answers.items()
            for who, lab in zip("xy", labs)]
    return SetData("s", "test", 2, 2, qids, rankings, task_of, {}, judg, auto)


def test_rates_beside_each_other_and_agreement_by_hand():
    data = make_set()
    r = human_vs_auto(data, item_scores(data.judgments), k=2, n_boot=500)
    m = next(x for x in r["methods"] if x["method"] == "m")
    # m's rank 1 = item a: human 1, 1, 0.5, 0 ; auto yes, yes, no, yes
    assert m["at_1"]["human"]["mean"] == pytest.approx(2.5 / 4)
    assert m["at_1"]["auto_rate"]["mean"] == pytest.approx(3 / 4) == m["at_1"]["auto_identity"]["mean"]
    # at 2: auto any-hit per query 1, 1, 0, 1; auto rate 0.5, 1, 0, 0.5
    assert m["at_k"]["auto_identity"]["mean"] == pytest.approx(3 / 4)
    assert m["at_k"]["auto_rate"]["mean"] == pytest.approx(2 / 4)
    assert m["at_k"]["human_minus_auto"]["diff"] == pytest.approx(np.mean([0.5, 0.5, 0.25, 0.5]) - 0.5)
    human, left = majority(data)
    assert left == {"tie": 1, "cant_tell": 1} and len(human) == 6
    g = r["agreement"]
    assert g["n_tasks"] == 6 and g["rate"] == pytest.approx(4 / 6)
    pairs = np.array([[data.auto_identity[t], human[t]] for t in sorted(human)], dtype=object)
    assert g["kappa"] == pytest.approx(cohen_kappa(pairs, missing=None))
    assert g["rate_lo"] <= g["rate"] <= g["rate_hi"] and g["kappa_lo"] <= g["kappa"] <= g["kappa_hi"]
    text = "\n".join(format_human_auto(r, 2))
    assert "human vs automatic" in text and "m/cosine" in text and "kappa" in text


def test_no_labels_no_table():
    data = make_set()
    data.auto_identity = {}
    assert human_vs_auto(data, item_scores(data.judgments), k=2) is None and format_human_auto(None, 2) == []


def test_the_results_tab_shows_the_table():
    """The organisers' Results tab carries the same table as db.report, as markdown."""
    from ui.annotation_results import human_auto_markdown

    data = make_set()
    r = human_vs_auto(data, item_scores(data.judgments), k=2, n_boot=200)
    md = "\n".join(human_auto_markdown(r, 2))
    row = next(line for line in md.splitlines() if line.startswith("| m · cosine"))
    cells = [c.strip() for c in row.strip("|").split("|")]
    assert cells[1] == "4" and cells[2].startswith("0.62 [") and cells[3].startswith("0.75 [")
    assert "κ" in cells[8] and "no majority: tie 1, cant_tell 1" in md
    assert human_auto_markdown(None, 2) == []
