"""Chord λ is chosen where the val curve stops rising: the grid, then past its edge while the
best is the largest λ tried (up to `lambda_max`); `python -m training.pick_lambda` re-chooses a
checkpoint's λ that way and records it."""
import json
import shutil

import pytest

import cir_core  # noqa: F401  (first: sets OMP_WAIT_POLICY before torch loads OpenMP)
from training.heads import LAMBDA_GRID, ValBench
from training.pick_lambda import repick


def fake_val(curve):
    """A ValBench whose val R@10 at λ is `curve(λ)` (R@1 flat), counting the λs it scored."""
    val = ValBench.__new__(ValBench)
    val.world, val.n_queries, val.tried = True, 500, []
    val.bench = type("B", (), {"name": "world"})()
    val.queries = lambda method: None

    def metrics(method, composed, lam):
        val.tried.append(lam)
        return ({"R@10": 0.5 if lam is None else round(curve(lam), 4), "R@1": 0.1}, {})
    val.metrics = metrics
    val.report = lambda method, lam=None: {"val_R@10": 0.5, "val_chord_R@10": curve(method.chord_lambda)}
    return val


def test_the_search_goes_past_the_edge_until_the_curve_falls():
    val = fake_val(lambda l: 0.3 + 0.1 * l - 0.025 * l * l)  # rises to λ = 2, then falls
    lam, rec = val.select_lambda(object())
    assert lam == 2.0 and not rec["at_edge"]
    assert val.tried == [*LAMBDA_GRID, 1.25, 1.5, 2.0, 2.5]  # one past the best, no further
    assert rec["R@10"]["2"] == pytest.approx(0.4) and rec["lambda_max"] == 64.0


def test_an_interior_best_is_not_extended_and_a_rising_curve_says_so():
    val = fake_val(lambda l: 1 - abs(l - 0.34))
    assert val.select_lambda(object())[0] == 0.34 and val.tried == list(LAMBDA_GRID)
    val = fake_val(lambda l: l / 10)  # still rising at the bound
    lam, rec = val.select_lambda(object(), lambda_max=3.0)
    assert lam == 3.0 and rec["at_edge"] and max(val.tried) == 3.0


def test_repick_rewrites_only_the_lambda_record(tmp_path):
    from cir_core.backbone import load_backbone

    folder = tmp_path / "searle"
    shutil.copytree("assets/methods/searle", folder)
    before = json.loads((folder / "config.json").read_text())
    weights = (folder / "model.safetensors").read_bytes()
    val = fake_val(lambda l: 0.3 + 0.1 * l - 0.025 * l * l)
    cfg = repick(folder, val, load_backbone(), 8.0)
    after = json.loads((folder / "config.json").read_text())
    assert after == cfg and after["chord_lambda"] == 2.0
    assert after["lambda_repicked"]["previous"] == before["chord_lambda"]
    assert after["lambda_search"]["R@10"]["2"] == pytest.approx(0.4)
    assert after["metrics"]["val_chord_R@10"] == pytest.approx(0.4)
    rest = ("chord_lambda", "lambda_search", "metrics", "lambda_repicked")
    assert {k: v for k, v in after.items() if k not in rest} == {k: v for k, v in before.items() if k not in rest}
    assert (folder / "model.safetensors").read_bytes() == weights
