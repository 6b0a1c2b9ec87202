"""training.seed_report on the shipped checkpoints (seed 0 only: the others are built by
`build_assets --seeds`): the tables, the claims' paired intervals and the prefix progression."""
from pathlib import Path

import numpy as np
import pytest

from training import seed_report as sr

ROOT = Path(__file__).resolve().parents[1]


def test_mean_std_is_the_sample_std():
    got = sr.mean_std([0.5, 0.7, 0.9])
    assert got["mean"] == 0.7 and got["std"] == round(float(np.std([0.5, 0.7, 0.9], ddof=1)), 4)
    assert sr.mean_std([0.25])["std"] == 0.0


@pytest.mark.skipif(not (ROOT / "assets" / "methods" / "pact" / "config.json").is_file(),
                    reason="the shipped checkpoints are not built")
def test_one_seed_report_on_the_shipped_checkpoints(tmp_path, monkeypatch):
    monkeypatch.setenv("CIR_CACHE_DIR", str(tmp_path / "cache"))
    rep = sr.build([0], 30, ("pact", "compose-only"), progress=False)
    t = rep["tables"]
    assert set(t) == {"pact", "compose-only", "sum"} and set(t["pact"]) == {"cosine", "chord"}
    by = {(c["a"], c["b"], c["metric"]): c for c in rep["claims"]}
    c = by["pact/chord", "compose-only/chord", "identity@1"]
    # one seed: the paired mean difference is the difference of the two reported metrics
    want = t["pact"]["chord"]["identity@1"]["mean"] - t["compose-only"]["chord"]["identity@1"]["mean"]
    assert c["diff"] == pytest.approx(want, abs=2e-4) and c["lo"] <= c["diff"] <= c["hi"]
    assert c["per_seed_diff"]["std"] == 0.0 and c["n_queries"] == 30
    assert ("sum/chord", "sum/cosine", "R@10") in by and ("pact/cosine", "sum/cosine", "R@1") in by
    p = rep["progression_prefix"]["pact/cosine"]
    assert 0 <= p["lo"] <= p["pooled"] <= p["hi"] <= 1 and p["queries"] > 0
    assert "| pact | chord |" in sr.format_markdown(rep)


def test_missing_seed_checkpoints_say_how_to_build_them(capsys):
    assert sr.main(["--seeds", "0,97", "--methods", "pact"]) == 2
    assert "build_assets --seeds 0,97" in capsys.readouterr().err


def _report(tables, claims, prog, **kw):
    base = {"date": "d0", "benchmark": "films", "split": "test", "seeds": [0, 1, 2], "n_queries": 10,
            "backbone": "bb", "n_boot": 2000}
    return {**base, **kw, "tables": tables, "claims": claims, "progression_prefix": prog}


def test_keep_lays_the_re_measured_rows_over_an_earlier_report(tmp_path):
    c = lambda a, b, d: {"a": a, "b": b, "metric": "R@10", "diff": d}  # noqa: E731
    old = _report({"pact": "P0", "pace": "A0", "sum": "S0"},
                  [c("pact/cosine", "sum/cosine", 0.1), c("pace/cosine", "sum/cosine", 0.2)],
                  {"pact/cosine": "p0", "pace/cosine": "a0"})
    new = _report({"pace": "A1", "sum": "S1"}, [c("pace/cosine", "sum/cosine", 0.3)], {"pace/cosine": "a1"}, date="d1")
    got = sr.merge(old, new)
    assert got["tables"] == {"pact": "P0", "pace": "A1", "sum": "S1"} and list(got["tables"]) == ["pact", "pace", "sum"]
    assert [x["diff"] for x in got["claims"]] == [0.1, 0.3]
    assert got["progression_prefix"] == {"pact/cosine": "p0", "pace/cosine": "a1"}
    assert got["kept"] == {"methods": ["pact"], "date": "d0"} and got["date"] == "d1"
    assert "The rows of pact are kept from the report of d0" in sr.format_markdown(
        {**got, "tables": {}, "claims": [], "progression_prefix": {}})
    with pytest.raises(sr.InputError, match="earlier report has backbone 'bb', this run 'other'"):
        sr.merge(old, {**new, "backbone": "other"})


def test_keep_names_a_missing_report(tmp_path, capsys):
    assert sr.main(["--seeds", "0", "--methods", "pact", "--keep", str(tmp_path / "nope.json")]) == 2
    assert "nope.json" in capsys.readouterr().err
