"""training.pick_variant: the val choice between a recipe and one variant, and build_assets --set."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from cir_core.errors import InputError
from training import build_assets, pick_variant


def _export(folder: Path, r10: float, weights: bytes) -> Path:
    folder.mkdir(parents=True)
    (folder / "config.json").write_text(json.dumps({"method": "dice", "metrics": {"val_R@10": r10}}))
    (folder / "model.safetensors").write_bytes(weights)
    return folder


@pytest.fixture
def shipped(tmp_path, monkeypatch):
    import cir_core.methods as methods

    monkeypatch.setattr(methods, "default_checkpoint", lambda name: tmp_path / "assets" / name)
    return _export(tmp_path / "assets" / "dice", 0.80, b"recipe")


def test_variant_that_wins_replaces_the_shipped_checkpoint(shipped, tmp_path, capsys):
    var = _export(tmp_path / "var", 0.85, b"variant")
    log = tmp_path / "choices.json"
    pick_variant.main(["dice", str(var), "delta_normalise=true", "--json", str(log)])
    assert capsys.readouterr().out.split() == ["delta_normalise=true"]
    assert (shipped / "model.safetensors").read_bytes() == b"variant"
    rec = json.loads(log.read_text())
    assert [r["chosen"] for r in rec] == ["variant"] and rec[0]["recipe"] == 0.80
    # a rerun finds it installed: still the variant, its override still printed, nothing lost
    pick_variant.main(["dice", str(var), "delta_normalise=true", "--json", str(log)])
    assert capsys.readouterr().out.split() == ["delta_normalise=true"]
    assert len(json.loads(log.read_text())) == 2


@pytest.mark.parametrize("r10", [0.80, 0.70])
def test_a_tie_or_a_loss_keeps_the_recipe(shipped, tmp_path, capsys, r10):
    var = _export(tmp_path / "var", r10, b"variant")
    pick_variant.main(["dice", str(var), "delta_normalise=true"])
    assert capsys.readouterr().out == ""
    assert (shipped / "model.safetensors").read_bytes() == b"recipe"


def test_missing_or_metricless_exports_are_named(shipped, tmp_path):
    with pytest.raises(InputError, match="no checkpoint config"):
        pick_variant.pick("dice", tmp_path / "nowhere", ["a=1"])
    var = _export(tmp_path / "var", 0.9, b"v")
    with pytest.raises(InputError, match="no metric 'val_R@1'"):
        pick_variant.pick("dice", var, ["a=1"], metric="val_R@1")
    assert (shipped / "model.safetensors").read_bytes() == b"recipe"


def test_build_assets_set_reaches_every_named_step(monkeypatch):
    seen = []

    class T:
        name, config, args, method, run_dir, module = "dice", "cfg.json", (), "dice", None, "m"

        def main(self, argv):
            seen.append(argv)

    monkeypatch.setattr(build_assets, "list_trainers", lambda: ["dice"])
    monkeypatch.setattr(build_assets, "get_trainer", lambda n: T())
    build_assets.main(["--only", "dice", "--seeds", "1", "--set", "delta_normalise=true"])
    assert "delta_normalise=true" in seen[0] and "seed=1" in seen[0]
    with pytest.raises(SystemExit, match="key=value"):
        build_assets.main(["--only", "dice", "--set", "oops"])
