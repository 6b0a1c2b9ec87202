"""training.reuse / build_assets --reuse: a checkpoint trained elsewhere stands for a run only when
it was trained on the installed backbone with the same recipe."""
from __future__ import annotations

import json
from types import SimpleNamespace

import training.reuse as reuse_mod
from training import build_assets
from training.reuse import reuse, wanted_settings, why_not


def checkpoint(folder, bb_id="bb@local:1", **training):
    folder.mkdir(parents=True)
    (folder / "config.json").write_text(json.dumps({"backbone": bb_id, "training": training}))
    (folder / "model.safetensors").write_bytes(b"weights")
    return folder


def test_only_the_same_backbone_and_recipe_is_reused(tmp_path):
    recipe = tmp_path / "r.json"
    recipe.write_text(json.dumps({"_comment": "x", "steps": 10, "lr": 0.001, "out_dir": "runs/a"}))
    want = wanted_settings(str(recipe), ["delta_normalise=false", "out_dir=runs/b"])
    assert want == {"steps": 10, "lr": 0.001, "out_dir": "runs/b", "delta_normalise": False}
    good = checkpoint(tmp_path / "good", steps=10, lr=0.001, delta_normalise=False, out_dir="elsewhere")
    assert why_not(good, want, "bb@local:1") is None  # run and export folders may differ
    assert "trained on bb@local:1, not bb@local:2" in why_not(good, want, "bb@local:2")
    other = checkpoint(tmp_path / "other", steps=20, lr=0.001, delta_normalise=False)
    assert "steps=20 (recipe 10)" in why_not(other, want, "bb@local:1")
    assert "no checkpoint" in why_not(tmp_path / "missing", want, "bb@local:1")
    dest = tmp_path / "assets" / "m"
    reuse(good, dest)
    assert (dest / "model.safetensors").read_bytes() == b"weights"


def test_build_assets_copies_instead_of_training(tmp_path, monkeypatch, capsys):
    recipe = tmp_path / "r.json"
    dest = tmp_path / "assets" / "m"
    recipe.write_text(json.dumps({"steps": 10, "backbone": "local-dir:bb", "export_dir": str(dest)}))
    checkpoint(tmp_path / "staged" / "m", steps=10, backbone="local-dir:bb", export_dir="assets/methods/m")
    monkeypatch.setattr(reuse_mod, "current_backbone_id", lambda spec, pretrained=None: "bb@local:1")
    t = SimpleNamespace(name="m", method="m", config=str(recipe))
    assert build_assets.reused(t, 0, [], tmp_path / "staged")
    assert (dest / "config.json").is_file() and "reused" in capsys.readouterr().out
    assert not build_assets.reused(t, 0, ["steps=11"], tmp_path / "staged")
    assert "steps=10 (recipe 11)" in capsys.readouterr().out
