"""Report: bootstrap over queries, the join from judgments back to methods, agreement wiring,
gold accuracy, the figure and the CLI. Expected numbers are worked out in tests/_db_fixture.py."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from _db_fixture import build

from cir_core.errors import InputError
from cir_core.stats import bootstrap_ci, bootstrap_means, paired_bootstrap
from db.report import compute_report, format_report, main, report_figure
from db.report_plot import save_figure
from db.sqlite import open_db, session_factory


@pytest.fixture(scope="module")
def db_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build(tmp_path_factory.mktemp("report") / "ann.sqlite")


@pytest.fixture(scope="module")
def report(db_path: Path) -> dict:
    engine = open_db(db_path)
    with session_factory(engine)() as s:
        rep = compute_report(s, "s", k=2, n_boot=200, seed=0)
    engine.dispose()
    return rep


def _method(rep: dict, name: str) -> dict:
    return next(m for m in rep["methods"] if m["method"] == name)


# --- stats ---------------------------------------------------------------------------------

def test_bootstrap_ci_contains_mean_and_is_seeded() -> None:
    values = np.random.default_rng(1).random(40)
    ci = bootstrap_ci(values, n_boot=500, seed=7)
    assert ci.lo <= ci.mean <= ci.hi and ci.n == 40
    assert ci.mean == pytest.approx(values.mean())
    assert bootstrap_ci(values, n_boot=500, seed=7) == ci
    assert bootstrap_ci(values, n_boot=500, seed=8) != ci


def test_bootstrap_spread_matches_standard_error_of_query_means() -> None:
    # 400 queries, half at 1: the bootstrap SD of the mean should be ~ sqrt(p(1-p)/n) = 0.025.
    values = np.repeat([0.0, 1.0], 200)
    assert bootstrap_means(values, 2000, seed=0).std() == pytest.approx(0.025, rel=0.1)


def test_bootstrap_degenerate_inputs() -> None:
    ci = bootstrap_ci(np.full(5, 0.5), n_boot=50, seed=0)
    assert (ci.mean, ci.lo, ci.hi) == (0.5, 0.5, 0.5)
    empty = bootstrap_ci(np.zeros(0), n_boot=50, seed=0)
    assert empty.n == 0 and np.isnan(empty.mean)
    with pytest.raises(InputError, match="NaN"):
        bootstrap_ci(np.array([0.1, np.nan]))
    with pytest.raises(InputError, match="n_boot"):
        bootstrap_ci(np.ones(3), n_boot=0)


def test_paired_bootstrap_keeps_pairs() -> None:
    # Query difficulty varies a lot, but b is always a + 0.1: the pairing removes the variance.
    a = np.random.default_rng(2).random(30)
    d = paired_bootstrap(a + 0.1, a, n_boot=300, seed=0)
    assert d.diff == pytest.approx(0.1) and d.lo == pytest.approx(0.1)
    assert d.hi == pytest.approx(0.1) and d.frac_positive == 1.0 and d.n == 30
    rev = paired_bootstrap(a, a + 0.1, n_boot=300, seed=0)
    assert rev.diff == pytest.approx(-0.1) and rev.frac_positive == 0.0
    with pytest.raises(InputError, match="same queries"):
        paired_bootstrap(a, a[:-1])


def test_exact_ties_are_not_positive() -> None:
    """a - b = [+0.2, -0.2]: a resample's mean difference is > 0 only when it draws query 0
    twice (1 in 4); the other ties are exactly 0, whatever the float sum gives."""
    from cir_core.stats import _resample_counts

    d = paired_bootstrap([0.4, 0.4], [0.2, 0.6], n_boot=20000, seed=0)
    exact = float((_resample_counts(2, 20000, 0)[:, 0] == 2).mean())
    assert d.frac_positive == exact and abs(exact - 0.25) < 0.01
    assert d.diff == 0.0
    # Many queries, values on a coarse grid: ties are frequent, and never counted as positive.
    rng = np.random.default_rng(1)
    a = rng.integers(0, 5, 40) / 4
    b = a.copy()
    b[:2] += 0.25
    b[2:4] -= 0.25
    tie = paired_bootstrap(a, b, n_boot=4000, seed=3)
    counts = _resample_counts(40, 4000, 3)
    exact = float(((counts[:, 2] + counts[:, 3]) > (counts[:, 0] + counts[:, 1])).mean())
    assert tie.frac_positive == exact


def test_bca_interval() -> None:
    from cir_core.stats import MIN_QUERIES_TRUSTED

    values = np.array([1, 1, 1, 0.8, 1, 0.6, 1, 1, 0.4, 1, 1, 0.8])  # skewed towards the ceiling
    p = bootstrap_ci(values, n_boot=2000, seed=0)
    b = bootstrap_ci(values, n_boot=2000, seed=0, method="bca")
    assert b.mean == p.mean and b.lo <= b.mean <= b.hi
    assert b.lo < p.lo  # BCa reaches further into the long tail
    assert bootstrap_ci(np.full(6, 0.5), n_boot=100, method="bca") == bootstrap_ci(np.full(6, 0.5), n_boot=100)
    with pytest.raises(InputError, match="method"):
        bootstrap_ci(values, method="student")
    assert MIN_QUERIES_TRUSTED == 30


def test_report_says_when_intervals_rest_on_few_queries(db_path) -> None:
    from db.sqlite import open_db, session_factory

    engine = open_db(db_path)
    with session_factory(engine)() as s:
        rep = compute_report(s, "s", n_boot=200, ci="bca")
    engine.dispose()
    assert rep["ci"] == "bca" and rep["notes"] and "fewer than 30 queries" in rep["notes"][0]
    assert "note: Intervals over fewer than 30" in format_report(rep)


# --- the join back to methods ----------------------------------------------------------------

def test_rates_at_1_and_k_hand_computed(report: dict) -> None:
    a = _method(report, "A")
    assert a["coverage"] == {"at_1": 2, "at_k": 2}
    # A@1: q0 -> x (0.5 / 0.75), q1 -> u (1 / 1, a gold task: still counted).
    assert a["at_1"]["identity"]["mean"] == pytest.approx(0.75)
    assert a["at_1"]["edit"]["mean"] == pytest.approx(0.875)
    assert a["at_1"]["edit_strict"]["mean"] == pytest.approx(0.75)
    # A@2: q0 = mean(x, y) = identity 0.25, edit 0.375, cant_tell 0.5; q1 = mean(u, v) = 0.5.
    assert a["at_k"]["identity"]["mean"] == pytest.approx(0.375)
    assert a["at_k"]["edit"]["mean"] == pytest.approx(0.4375)
    assert a["at_k"]["edit_strict"]["mean"] == pytest.approx(0.375)
    assert a["at_k"]["identity_cant_tell"]["mean"] == pytest.approx(0.25)


def test_shared_item_counts_for_both_and_nothing_leaks(report: dict) -> None:
    b = _method(report, "B")
    # x was retrieved by A and B: B@1 on q0 sees the same 0.5 / 0.75. q1's rank-1 w was only
    # skipped, so B covers one query.
    assert b["coverage"] == {"at_1": 1, "at_k": 1}
    assert b["at_1"]["identity"]["mean"] == pytest.approx(0.5)
    assert b["at_1"]["edit"]["mean"] == pytest.approx(0.75)
    # B@2 on q0 = mean(x, z): y's cant_tell (A only) must not show up, z (B only) must.
    assert b["at_k"]["identity"]["mean"] == pytest.approx(0.75)
    assert b["at_k"]["edit"]["mean"] == pytest.approx(0.625)
    assert b["at_k"]["identity_cant_tell"]["mean"] == 0.0


def test_comparisons_on_shared_queries(report: dict) -> None:
    c = {(x["depth"], x["metric"]): x for x in report["comparisons"]}
    assert len(report["comparisons"]) == 4  # one pair x {at_1, at_k} x {identity, edit}
    assert c[("at_1", "identity")]["n"] == 1 and c[("at_1", "identity")]["diff"] == 0.0
    # at_k, q0 only: A 0.25 - B 0.75 = -0.5 identity; 0.375 - 0.625 = -0.25 edit.
    assert c[("at_k", "identity")]["diff"] == pytest.approx(-0.5)
    assert c[("at_k", "edit")]["diff"] == pytest.approx(-0.25)
    assert c[("at_k", "edit")]["frac_positive"] == 0.0


def test_agreement_gold_and_counts(report: dict) -> None:
    assert report["judgments"] == {"answered": 6, "skipped": 1, "skip_reasons": {"blurry": 1},
                                   "annotators": 2, "tasks": 6, "tasks_answered": 5,
                                   "paused_left_out": 0}
    ident = report["agreement"]["identity"]
    # One shared unit (q0/x): ann1 yes, ann2 no. Cohen: p_o = 0, p_e = 1*0 + 0*1 = 0 -> 0.
    assert ident["cohen_kappa"] == {"value": 0.0, "n_units": 1, "raters": ["ann1", "ann2"]}
    # Fleiss on that unit: P_i = 0, P_e = 0.5 -> (0 - 0.5) / 0.5 = -1.
    assert ident["fleiss_kappa"] == {"value": -1.0, "n_units": 1, "raters_per_unit": 2}
    # Krippendorff: o_yn = o_ny = 1, n = 2 -> 1 - (2-1) * 2 / (4 - 2) = 0.
    assert ident["krippendorff_alpha"]["value"] == pytest.approx(0.0)
    assert report["gold"] == [{"annotator": "ann1", "skipped": 0,
                               "identity": {"correct": 1, "n": 1, "accuracy": 1.0},
                               "edit": {"correct": 0, "n": 1, "accuracy": 0.0}}]


def test_report_is_json_and_validates_k(db_path: Path, report: dict) -> None:
    json.dumps(report, allow_nan=False)
    engine = open_db(db_path)
    with session_factory(engine)() as s:
        with pytest.raises(InputError, match="pool_k"):
            compute_report(s, "s", k=3, n_boot=10)
        with pytest.raises(InputError, match="known: s"):
            compute_report(s, "nope", n_boot=10)
        k1 = compute_report(s, "s", k=1, n_boot=10)
        # BEGIN IMMEDIATE makes every read hold the write lock: the report must let go of it.
        assert not s.in_transaction()
    engine.dispose()
    assert k1["methods"][0]["at_k"] == k1["methods"][0]["at_1"]


def test_figure_and_cli(db_path: Path, report: dict, tmp_path: Path,
                        capsys: pytest.CaptureFixture) -> None:
    fig = report_figure(report)
    assert len(fig.axes) == 2
    assert save_figure(fig, tmp_path / "f.png").read_bytes()[:4] == b"\x89PNG"
    out_json, out_png = tmp_path / "r.json", tmp_path / "r.png"
    assert main(["--db", str(db_path), "--json", str(out_json), "--plot", str(out_png),
                 "--bootstrap", "50", "--seed", "3"]) == 0
    loaded = json.loads(out_json.read_text())["query_sets"]
    assert [r["query_set"] for r in loaded] == ["s"] and loaded[0]["seed"] == 3
    assert out_png.read_bytes()[:4] == b"\x89PNG"
    assert "A/cosine" in capsys.readouterr().out
    assert main(["--db", str(db_path), "--set", "nope"]) == 2
    assert "no query set named 'nope'" in capsys.readouterr().err
