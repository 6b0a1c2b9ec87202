"""cir_core.eval.markdown: RESULTS.md's tables from an evaluation report, never typed by hand."""
from __future__ import annotations

import json

import pytest

from cir_core.errors import InputError
from cir_core.eval.markdown import breakdown_table, main, metrics_table, progression_table, read_lambdas

PROG = {"R@10_first_step": 0.25, "R@10_last_step": 0.5, "rank_improved": 0.8, "rank_improved_or_held": 0.9,
        "step_improved_or_held": 0.75, "median_rank_first": 12.0, "median_rank_last": 0.0}
REPORT = {"results": {"sum": {"cosine": {"R@1": 0.1234, "R@10": 0.5}, "chord": {"R@1": 0.2, "R@10": 0.45}},
                      "pact": {"cosine": {"R@1": 0.3, "R@10": 0.9}, "chord": {"R@1": 0.4, "R@10": None}}},
          "extra": {"pact": {"chord": {"breakdown": {"R@10[scene]": 1.0, "R@10[long]": 0.5},
                                       "progression": {"prefix": PROG}}}}}


def test_tables(tmp_path):
    (tmp_path / "pact").mkdir()
    (tmp_path / "pact" / "config.json").write_text(json.dumps({"chord_lambda": 0.34}))
    lam = read_lambdas(tmp_path)
    assert lam == {"pact": 0.34}
    t = metrics_table(REPORT, ["R@10", "R@1"], lam).splitlines()
    assert t[0] == "| method | scoring | R@10 | R@1 |" and t[2] == "| sum | cosine | 50.0 | 12.3 |"
    assert t[5] == "| pact | chord (λ 0.34) | n/a | 40.0 |"
    assert breakdown_table(REPORT).splitlines()[2] == "| pact | 50.0 | 100.0 |"  # kinds sorted: long, scene
    assert progression_table(REPORT).splitlines()[2] == \
        "| pact (prefix) | 25.0 | 50.0 | 80.0 % (90.0 %) | 75.0 % | 12 → 0 |"
    with pytest.raises(InputError, match="no progression"):
        progression_table(REPORT, "cosine")


def test_cli_names_the_file_on_a_bad_report(tmp_path, capsys):
    bad = tmp_path / "r.json"
    bad.write_text("{not json")
    assert main([str(bad)]) == 2 and "r.json" in capsys.readouterr().err
    good = tmp_path / "g.json"
    good.write_text(json.dumps(REPORT))
    assert main([str(good), "--metrics", "R@1"]) == 0 and "| sum | chord | 20.0 |" in capsys.readouterr().out
