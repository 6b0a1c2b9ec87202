"""Backbones are built with the activation their weights were trained with: an `openai` tag
(open_clip's table: quick_gelu) builds QuickGELU, and the id says so, so caches and checkpoints
made under the other activation are refused. Offline: random ViT-B-32 weights in a fake Hugging
Face cache under the repo open_clip resolves the tag to."""
import json
import warnings

import numpy as np
import open_clip
import pytest
import torch

import cir_core  # noqa: F401  (first: sets OMP_WAIT_POLICY before torch loads OpenMP)
from cir_core.backbone import _create, load_backbone, save_backbone_dir, tag_wants_quick_gelu, uses_quick_gelu
from cir_core.backbone_id import activation
from cir_core.errors import CheckpointError

SHA = "0" * 40


def fake_hf_cache(root, repo: str, state: dict) -> None:
    """`root` laid out as huggingface_hub's cache holding `repo`'s open_clip safetensors."""
    from safetensors.torch import save_file

    folder = root / f"models--{repo.replace('/', '--')}"
    (folder / "refs").mkdir(parents=True)
    (folder / "refs" / "main").write_text(SHA)
    snap = folder / "snapshots" / SHA
    snap.mkdir(parents=True)
    save_file({k: v.contiguous() for k, v in state.items()}, str(snap / "open_clip_model.safetensors"))


@pytest.fixture(scope="module")
def openai_cache(tmp_path_factory):
    """Random ViT-B-32 weights (fp16, to keep the file small) as the `openai` tag's HF repo."""
    model, _ = _create("ViT-B-32", None, "cpu", seed=3, weights_follow=False)
    state = {k: v.half() if v.is_floating_point() else v for k, v in model.state_dict().items()}
    root = tmp_path_factory.mktemp("hf")
    repo = open_clip.pretrained.get_pretrained_cfg("ViT-B-32", "openai")["hf_hub"].strip("/")
    fake_hf_cache(root, repo, state)
    return root, state


@pytest.mark.parametrize("model, tag, quick", [
    ("ViT-B-32", "openai", True), ("ViT-L-14", "openai", True), ("RN50", "openai", True),
    ("ViT-B-32", "laion2b_s34b_b79k", False), ("ViT-B-32", None, False)])
def test_the_pretrained_table_decides(model, tag, quick):
    assert tag_wants_quick_gelu(model, tag) is quick


def test_an_openai_tag_loads_with_quickgelu_and_says_so(openai_cache, monkeypatch):
    from huggingface_hub import constants

    root, state = openai_cache
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(root))
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        bb = load_backbone("ViT-B-32", "openai")
    assert not [w for w in caught if "QuickGELU" in str(w.message)], [str(w.message) for w in caught]
    assert uses_quick_gelu(bb.model) and bb.id == "ViT-B-32@openai+quickgelu"
    assert activation(bb.id) == "quickgelu"
    key = "visual.transformer.resblocks.0.mlp.c_fc.weight"
    assert torch.equal(bb.model.state_dict()[key], state[key].float())  # the cached weights, loaded
    # the `-quickgelu` name resolves to the same repo and runs the same network
    same = load_backbone("ViT-B-32-quickgelu", "openai")
    assert same.id == "ViT-B-32-quickgelu@openai" and activation(same.id) == "quickgelu"
    texts = ["a photo of a dog", "two red squares on grass"]
    np.testing.assert_array_equal(bb.encode_texts(texts), same.encode_texts(texts))
    # ... while the GELU build open_clip makes by default is another network on these weights
    with pytest.warns(UserWarning, match="QuickGELU mismatch"):  # all open_clip says about it
        gelu, _ = _create("ViT-B-32", "openai", "cpu", 0, False)
    assert not uses_quick_gelu(gelu)
    with torch.inference_mode():
        t = bb.tokenize(texts)
        a = torch.nn.functional.normalize(bb.model.encode_text(t), dim=-1)
        b = torch.nn.functional.normalize(gelu.eval().encode_text(t), dim=-1)
    assert float((a * b).sum(-1).min()) < 1 - 1e-6


def test_a_saved_folder_keeps_quickgelu(openai_cache, monkeypatch, tmp_path):
    from huggingface_hub import constants

    root, _ = openai_cache
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(root))
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)
    bb = load_backbone("ViT-B-32", "openai")
    out = save_backbone_dir(bb.model, "ViT-B-32", tmp_path / "bb")
    assert json.loads((out / "open_clip_config.json").read_text())["model_cfg"]["quick_gelu"] is True
    again = load_backbone(f"local-dir:{out}")
    assert uses_quick_gelu(again.model) and again.id.endswith("+quickgelu")
    np.testing.assert_allclose(again.encode_texts(["a cat"]), bb.encode_texts(["a cat"]), atol=1e-6)


@pytest.mark.parametrize("made, runs, refused", [
    ("ViT-L-14@openai", "ViT-L-14@openai+quickgelu", True),  # made before the fix: GELU on openai weights
    ("ViT-L-14@openai+quickgelu", "ViT-L-14@openai+quickgelu", False),
    ("ViT-L-14-quickgelu@openai", "ViT-L-14@openai+quickgelu", False),
    ("ViT-B-32@random-seed0", "ViT-B-32@openai+quickgelu", True)])
def test_a_checkpoint_made_under_the_other_activation_is_refused(tmp_path, made, runs, refused):
    from types import SimpleNamespace

    from cir_core.checkpoint import load_checkpoint

    (tmp_path / "config.json").write_text(json.dumps({"method": "dice", "backbone": made, "embed_dim": 8}))
    bb = SimpleNamespace(id=runs, dim=8)
    if refused:
        with pytest.raises(CheckpointError, match=r"gelu.*runs (quickgelu|gelu)"):
            load_checkpoint(tmp_path, ("dice",), bb, {"embed_dim": 8})
    else:
        assert load_checkpoint(tmp_path, ("dice",), bb, {"embed_dim": 8}).backbone == made
