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
