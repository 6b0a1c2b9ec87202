"""cir_core.checkpoint: one description and one save/load pair for every trained method family;
format-1 configs (the three schemas shipped before) still load; writes are atomic."""
import json
import shutil
from pathlib import Path

import numpy as np
import pytest
import torch

import cir_core  # noqa: F401  (first: sets OMP_WAIT_POLICY before torch loads OpenMP)
from cir_core.checkpoint import (
    CONFIG,
    FORMAT_VERSION,
    WEIGHTS,
    Checkpoint,
    main,
    migrate_v1,
    read_checkpoint,
    save_checkpoint,
    upgrade,
    write_weights,
)
from cir_core.errors import CheckpointError
from cir_core.fileio import atomic_write, atomic_write_path, sha256_file
from cir_core.methods import create_method, get_method_class, list_methods
from cir_core.methods.factory import default_checkpoint

TRAINED = [n for n in list_methods() if get_method_class(n).needs_checkpoint]
LEGACY = json.loads((Path(__file__).parent / "data" / "legacy_method_configs.json").read_text())
# what `upgrade` wrote from those (the configs shipped until the 2026-12-03 retrain): the format-1
# tests compare with this, never with whatever is shipped now, so a retrain cannot break them
LEGACY_V2 = json.loads((Path(__file__).parent / "data" / "legacy_method_configs_v2.json").read_text())
SMALL = {"pact": {"mapper_hidden": 32, "lora_rank": 2}, "compose-only": {"mapper_hidden": 32, "lora_rank": 2},
         "searle": {"hidden_dim": 64}, "lincir": {"hidden_dim": 64}, "pic2word": {"middle_dim": 64}}


def _refs(backbone, n=3, seed=0):
    r = np.random.default_rng(seed).standard_normal((n, backbone.dim)).astype(np.float32)
    return r / np.linalg.norm(r, axis=1, keepdims=True)


def _trained(name, backbone, seed=0, arch=None):
    """The method with small random weights in every checkpointed tensor (not its init: LoRA's
    B starts at zero; PACT's frozen tower copy is not part of its checkpoint); `arch` overrides
    the small test architecture."""
    m = get_method_class(name)(backbone, {"arch": SMALL.get(name, {}) if arch is None else arch, "chord_lambda": 0.7})
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for v in m.weights().state_dict(keep_vars=True).values():
            if v.is_floating_point():
                v.copy_(torch.randn(v.shape, generator=g) * 0.05)
    return m


def test_every_trained_family_is_covered():
    assert {"pact", "compose-only", "dice", "pace", "pic2word", "searle", "lincir"} <= set(TRAINED)


@pytest.mark.parametrize("name", TRAINED)
def test_round_trip(name, tiny_backbone, tmp_path):
    m = _trained(name, tiny_backbone)
    texts = ["Make the square blue.", "Move it left. Add a red star.", ""]
    ref = _refs(tiny_backbone)
    folder = m.save(tmp_path / "ck", {"val_R@10": 0.5}, training={"steps": 3}, lambda_search={"split": "val"},
                    note="kept")
    cfg = json.loads((folder / CONFIG).read_text())
    assert list(cfg) == [k for k in Checkpoint.ORDER if k in cfg] and cfg["format_version"] == FORMAT_VERSION
    assert cfg["method"] == name and cfg["embed_dim"] == tiny_backbone.dim and cfg["chord_lambda"] == 0.7
    assert cfg["metrics"] == {"val_R@10": 0.5} and cfg["training"] == {"steps": 3}
    assert cfg["lambda_search"] == {"split": "val"} and cfg["extra"]["note"] == "kept"
    assert ("token_width" in cfg) == (name not in ("dice", "pace"))
    loaded = create_method(name, tiny_backbone, folder)
    assert type(loaded) is type(m) and loaded.chord_lambda == 0.7 and loaded.arch == m.arch
    want = {k: v for k, v in m.weights().state_dict().items()}
    got = loaded.weights().state_dict()
    assert set(got) == set(want) and all(torch.equal(got[k], want[k].float()) for k in want)
    np.testing.assert_array_equal(loaded.compose(ref, texts), m.compose(ref, texts))
    np.testing.assert_array_equal(loaded.compose_empty(ref), m.compose_empty(ref))
    # a re-save keeps what it is not given, and describes the model as it is now
    loaded.chord_lambda = 0.2
    again = json.loads((loaded.save(tmp_path / "again") / CONFIG).read_text())
    assert again["chord_lambda"] == 0.2 and again["metrics"] == cfg["metrics"] and again["extra"]["note"] == "kept"
    assert again["training"] == {"steps": 3} and again["lambda_search"] == {"split": "val"}


@pytest.mark.parametrize("name", [n for n in list_methods() if n not in TRAINED])
def test_an_untrained_method_has_nothing_to_save(name, tiny_backbone, tmp_path):
    with pytest.raises(CheckpointError, match="no trained weights"):
        create_method(name, tiny_backbone).save(tmp_path / "x")
    assert not (tmp_path / "x").exists()


# -- format 1 ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("name", sorted(LEGACY))
def test_a_format_1_config_loads_and_reads_as_its_format_2_rewrite(name, tiny_backbone, tmp_path):
    """The shipped configs were rewritten once (`upgrade`), weights untouched: migrating an
    original (kept in tests/data) gives exactly the rewrite, and both load the same weights to the
    same queries. The weights are random ones of the legacy architecture, so no retrain matters."""
    old, rewritten = LEGACY[name], Checkpoint.from_json(LEGACY_V2[name], "legacy v2")
    assert old.get("format_version", 1) == 1 and rewritten.format_version == FORMAT_VERSION
    assert Checkpoint.from_json(old, "legacy") == rewritten
    wrote = _trained(name, tiny_backbone, seed=3, arch=old["arch"]).save(tmp_path / "weights")
    ref, texts = _refs(tiny_backbone), ["Add a star."] * 3
    queries = []
    for tag, cfg in (("v1", old), ("v2", LEGACY_V2[name])):
        folder = tmp_path / tag
        folder.mkdir()
        shutil.copy(wrote / WEIGHTS, folder / WEIGHTS)
        (folder / CONFIG).write_text(json.dumps(cfg))
        m = create_method(name, tiny_backbone, folder)
        assert m.chord_lambda == old["chord_lambda"] and m.arch.to_dict() == {**m.arch.to_dict(), **old["arch"]}
        queries.append(m.compose(ref, texts))
    np.testing.assert_array_equal(queries[0], queries[1])
    # the weights were read, not left at init: another seed's weights give other queries
    other = _trained(name, tiny_backbone, seed=4, arch=old["arch"]).compose(ref, texts)
    assert np.abs(other - queries[0]).max() > 1e-3


def test_what_format_1_kept_where():
    dice, pact, searle = (migrate_v1(LEGACY[n]) for n in ("dice", "pact", "searle"))
    assert dice["training"] == LEGACY["dice"]["hparams"] and "lambda_search" not in dice["metrics"]
    assert dice["lambda_search"] == LEGACY["dice"]["metrics"]["lambda_search"] and dice["extra"] == {}
    assert pact["training"] == LEGACY["pact"]["training"] and pact["lambda_search"] == LEGACY["pact"]["lambda_search"]
    assert pact["extra"] == {"prompt": "a photo of $ that {edit}", "empty_prompt": "a photo of $", "objective": "full"}
    assert searle["extra"]["placeholder"] == "$" and searle["extra"]["replace"] == "first"
    assert searle["lambda_repicked"] == LEGACY["searle"]["lambda_repicked"]
    user = migrate_v1({"method": "dice", "embed_dim": 8, "hparams": {"a": 1}, "training": {"b": 2}, "mine": 3})
    assert user["training"] == {"b": 2} and user["extra"] == {"hparams": {"a": 1}, "mine": 3}


def test_upgrade_rewrites_the_config_only(tmp_path, capsys):
    folder = tmp_path / "dice"
    folder.mkdir()
    shutil.copy(default_checkpoint("dice") / WEIGHTS, folder / WEIGHTS)  # any weights: only the config changes
    (folder / CONFIG).write_text(json.dumps(LEGACY["dice"]))
    weights = sha256_file(folder / WEIGHTS)
    assert main(["upgrade", str(folder)]) == 0 and "upgraded to format 2" in capsys.readouterr().out
    assert json.loads((folder / CONFIG).read_text())["format_version"] == FORMAT_VERSION
    assert sha256_file(folder / WEIGHTS) == weights
    assert read_checkpoint(folder) == Checkpoint.from_json(LEGACY_V2["dice"], "legacy v2")
    assert upgrade(folder) is False
    assert main(["upgrade", str(tmp_path / "nowhere")]) == 2 and "config.json missing" in capsys.readouterr().err


@pytest.mark.parametrize("change, match", [
    ({"hparams": {}}, r"config.json: unknown key\(s\) \['hparams'\].*'extra'"),
    ({"format_version": 3}, "format_version 3; this version reads formats up to 2"),
    ({"embed_dim": "256"}, "key 'embed_dim' is '256', not int"),
    ({"extra": []}, "key 'extra' is \\[\\], not dict"),
])
def test_a_bad_format_2_config_is_named(change, match, tiny_backbone, tmp_path):
    folder = _trained("dice", tiny_backbone).save(tmp_path / "ck")
    cfg = json.loads((folder / CONFIG).read_text())
    (folder / CONFIG).write_text(json.dumps({**cfg, **change}))
    with pytest.raises(CheckpointError, match=match) as e:
        create_method("dice", tiny_backbone, folder)
    assert "\n" not in str(e.value)


# -- atomic writes ----------------------------------------------------------------------------------
def test_a_failed_write_leaves_the_old_file_and_no_temp(tmp_path):
    path = tmp_path / "f.txt"
    path.write_text("old")

    def half(f):
        f.write("new, half written")
        raise OSError("disk full")

    with pytest.raises(OSError, match="disk full"):
        atomic_write(path, half, False)

    def half_path(tmp):
        Path(tmp).write_text("partial")
        raise RuntimeError("writer died")

    with pytest.raises(RuntimeError, match="writer died"):
        atomic_write_path(path, half_path)
    assert path.read_text() == "old" and sorted(p.name for p in tmp_path.iterdir()) == ["f.txt"]
    atomic_write_path(path, lambda tmp: Path(tmp).write_text("new"))
    assert path.read_text() == "new" and sorted(p.name for p in tmp_path.iterdir()) == ["f.txt"]


def test_a_failed_checkpoint_save_keeps_the_previous_one(tiny_backbone, tmp_path):
    folder = _trained("dice", tiny_backbone).save(tmp_path / "ck")
    before = {f: (folder / f).read_bytes() for f in (WEIGHTS, CONFIG)}
    with pytest.raises(Exception):  # noqa: B017 - safetensors' own error type for a non-tensor value mid-write
        save_checkpoint(folder, read_checkpoint(folder), {"w": torch.zeros(2), "bad": "not a tensor"})
    assert {f: (folder / f).read_bytes() for f in (WEIGHTS, CONFIG)} == before
    assert sorted(p.name for p in folder.iterdir()) == sorted(before)
    tied = torch.ones(4)
    write_weights(tmp_path / "tied.safetensors", {"a": tied, "b": tied, "t": torch.ones(2, 3).T})  # copied, not refused
