"""Backbone loading (offline), encoding contracts, local-dir round trip, and checkpoint errors."""
import json

import numpy as np
import open_clip
import pytest
import torch
from PIL import Image

from cir_core.backbone import TINY_MODEL, load_backbone, save_backbone_dir
from cir_core.errors import BackboneError, CheckpointError

TEXTS = ["a red cube on the left", "", "make it blue"]


@pytest.fixture(scope="module")
def tiny():
    return load_backbone(TINY_MODEL, seed=0)


@pytest.fixture(scope="module")
def images(tmp_path_factory):
    folder = tmp_path_factory.mktemp("imgs")
    paths = []
    for i, colour in enumerate([(255, 0, 0), (0, 128, 255), (20, 200, 20)]):
        paths.append(folder / f"{i}.png")
        Image.new("RGB", (90, 70), colour).save(paths[-1])
    return paths


def test_tiny_backbone_attributes(tiny):
    cfg = open_clip.get_model_config(TINY_MODEL)
    assert tiny.dim == cfg["embed_dim"]
    assert tiny.image_size == cfg["vision_cfg"]["image_size"]
    assert tiny.context_length == cfg["text_cfg"]["context_length"]
    assert tiny.id == f"{TINY_MODEL}@random-seed0" and tiny.name == TINY_MODEL
    assert not tiny.model.training
    assert not any(p.requires_grad for p in tiny.model.parameters())


def test_encode_shapes_and_normalisation(tiny, images):
    # Paths and PIL images (any mode) are both accepted; batch size must not change results.
    mixed = [images[0], Image.open(images[1]).convert("RGBA"), str(images[2])]
    img = tiny.encode_images(mixed, batch_size=2)
    txt = tiny.encode_texts(TEXTS, batch_size=2)
    for emb in (img, txt):
        assert emb.dtype == np.float32 and emb.shape == (3, tiny.dim)
        np.testing.assert_allclose(np.linalg.norm(emb, axis=1), 1.0, atol=1e-5)
    np.testing.assert_allclose(img, tiny.encode_images(images, batch_size=64), atol=1e-5)
    np.testing.assert_allclose(txt, tiny.encode_texts(TEXTS, progress=True), atol=1e-5)
    assert not np.allclose(txt[1], txt[2])  # the empty edit is a real, distinct embedding


def test_empty_inputs(tiny):
    assert tiny.encode_images([]).shape == (0, tiny.dim)
    assert tiny.encode_texts([]).shape == (0, tiny.dim)


def test_tensor_helpers(tiny, images):
    x = tiny.image_tensor(images[:2])
    assert x.shape == (2, 3, tiny.image_size, tiny.image_size)
    assert tiny.tokenize(TEXTS).shape == (3, tiny.context_length)


def test_seed_determinism(tiny, images):
    again = load_backbone(TINY_MODEL, seed=0)
    other = load_backbone(TINY_MODEL, seed=1)
    np.testing.assert_array_equal(again.encode_images(images), tiny.encode_images(images))
    assert not np.allclose(other.encode_texts(TEXTS), tiny.encode_texts(TEXTS))
    assert other.id.endswith("seed1")


def test_save_and_reload_local_dir(tiny, images, tmp_path):
    out = save_backbone_dir(tiny.model, TINY_MODEL, tmp_path / "bb", extra={"steps": 7})
    config = json.loads((out / "open_clip_config.json").read_text())
    assert set(config) >= {"model_cfg", "preprocess_cfg"} and config["extra"] == {"steps": 7}
    reloaded = load_backbone(f"local-dir:{out}", seed=123)  # seed must not matter here
    np.testing.assert_array_equal(reloaded.encode_images(images), tiny.encode_images(images))
    np.testing.assert_array_equal(reloaded.encode_texts(TEXTS), tiny.encode_texts(TEXTS))
    assert reloaded.name == TINY_MODEL and reloaded.id.startswith(f"{TINY_MODEL}@local:")
    assert reloaded.id == load_backbone(f"local-dir:{out}").id  # stable cache key
    # open_clip's own loader reads the same folder.
    model, _, _ = open_clip.create_model_and_transforms(f"local-dir:{out}")
    torch.testing.assert_close(model.state_dict(), tiny.model.state_dict())


def test_checkpoint_file_nested_and_prefixed(tiny, images, tmp_path):
    path = tmp_path / "ddp.pt"
    torch.save({"epoch": 3, "state_dict": {f"module.{k}": v for k, v in tiny.model.state_dict().items()}},
               path)
    loaded = load_backbone(TINY_MODEL, pretrained=str(path), seed=5)
    np.testing.assert_array_equal(loaded.encode_images(images), tiny.encode_images(images))
    assert loaded.id.startswith(f"{TINY_MODEL}@local:")


def test_wrong_architecture_refused(tmp_path):
    cfg = open_clip.get_model_config(TINY_MODEL)
    cfg["vision_cfg"]["width"] = 64  # same layout, different width: every visual shape differs
    path = tmp_path / "narrow.safetensors"
    from safetensors.torch import save_file
    save_file(open_clip.CLIP(**cfg).state_dict(), str(path))
    with pytest.raises(CheckpointError, match=r"narrow\.safetensors.*cir-tiny-vit.*but the model needs") as err:
        load_backbone(TINY_MODEL, pretrained=str(path))
    assert "\n" not in str(err.value)


def test_wrong_checkpoint_in_local_dir(tmp_path):
    folder = tmp_path / "bb"
    save_backbone_dir(load_backbone(TINY_MODEL).model, TINY_MODEL, folder)
    cfg = json.loads((folder / "open_clip_config.json").read_text())
    cfg["model_cfg"]["embed_dim"] = 128  # config no longer matches the weights
    (folder / "open_clip_config.json").write_text(json.dumps(cfg))
    with pytest.raises(CheckpointError, match="open_clip_model.safetensors"):
        load_backbone(f"local-dir:{folder}")


def test_unreadable_checkpoint(tmp_path):
    path = tmp_path / "junk.pt"
    path.write_bytes(b"not a checkpoint")
    with pytest.raises(CheckpointError, match="junk.pt"):
        load_backbone(TINY_MODEL, pretrained=str(path))


def test_unknown_model_suggests_close_names():
    with pytest.raises(BackboneError, match="ViT-B-32"):
        load_backbone("ViT-B-33")
    with pytest.raises(BackboneError, match="did you mean cir-tiny-vit"):
        load_backbone("cir-tiny-vlt")


def test_missing_paths(tmp_path):
    with pytest.raises(BackboneError, match="not found"):
        load_backbone(f"local-dir:{tmp_path / 'absent'}")
    with pytest.raises(CheckpointError, match="missing.safetensors.*not found"):
        load_backbone(TINY_MODEL, pretrained=str(tmp_path / "missing.safetensors"))
    with pytest.raises(BackboneError, match="cannot be combined"):
        load_backbone(f"local-dir:{tmp_path}", pretrained="openai")
    with pytest.raises(CheckpointError, match="not-a-tag"):
        load_backbone(TINY_MODEL, pretrained="not-a-tag")
    (tmp_path / "noweights").mkdir()
    (tmp_path / "noweights" / "open_clip_config.json").write_text("{}")
    with pytest.raises(CheckpointError, match="no weights"):
        load_backbone(f"local-dir:{tmp_path / 'noweights'}")
    # open_clip requires the nested {"model_cfg": ...} layout: a flat config is refused cleanly.
    (tmp_path / "noweights" / "w.safetensors").write_bytes(b"")
    with pytest.raises(BackboneError, match="noweights"):
        load_backbone(f"local-dir:{tmp_path / 'noweights'}")


@pytest.mark.parametrize("model, pretrained", [("ViT-B-32", "laion2b_s34b_b79k"), ("hf-hub:org/absent", None)])
def test_download_needed_while_offline(tmp_path, monkeypatch, model, pretrained):
    from huggingface_hub import constants
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(tmp_path))  # an empty cache, whatever is installed
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)
    with pytest.raises(BackboneError, match="not in the local cache and HF_HUB_OFFLINE is set"):
        load_backbone(model, pretrained=pretrained)


def test_real_architecture_random_weights():
    bb = load_backbone("ViT-B-32")
    imgs = [Image.new("RGB", (300, 200), (200, 10, 10)), Image.new("L", (64, 64), 90)]
    assert bb.encode_images(imgs).shape == (2, 512)
    assert bb.encode_texts(["a photo of a cat", ""]).shape == (2, 512)
    assert bb.id == "ViT-B-32@random-seed0" and bb.image_size == 224
