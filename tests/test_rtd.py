"""RTD: the peer's φ read by a tuned copy of the text tower; an untuned copy is the peer exactly;
checkpoints (no token table unless tuned), the authors' Hugging Face text-encoder release converted
(a random-init fixture in their key layout), and the trainer (tiny, CPU)."""
import json

import numpy as np
import pytest
import torch

import cir_core  # noqa: F401  (first: sets OMP_WAIT_POLICY before torch loads OpenMP)
from cir_core.errors import CheckpointError, InputError
from cir_core.methods import create_method, get_method_class
from cir_core.methods.convert import convert, main
from cir_core.methods.rtd import HF_KEY, hf_to_open_clip
from training.loop import run
from training.train_rtd import DEFAULTS, RTDSettings, RTDTask, text_triplets

pytestmark = pytest.mark.usefixtures("one_thread")
PEERS = ("lincir", "pic2word", "searle")
TEXTS = ["make the square blue", "Move the character to the left. Add a red star.", ""]


def refs(dim, n=3):
    r = np.random.default_rng(0).standard_normal((n, dim)).astype(np.float32)
    return r / np.linalg.norm(r, axis=1, keepdims=True)


def peer_and_rtd(name, backbone):
    peer = get_method_class(name)(backbone, {"arch": {"input_scale": 20.0}})
    cls = get_method_class(f"rtd-{name}")
    return peer, cls(backbone, {"arch": peer.arch.to_dict()}, mapper=peer.mapper)


def hf_layout(tower, scale=0.0, seed=0):
    """The tower's weights as the authors' code saves a `CLIPTextModelWithProjection` (written here
    from transformers' key names, independently of the converter), each tensor + scale·noise."""
    g = torch.Generator().manual_seed(seed)
    noisy = lambda t: (t + scale * torch.randn(t.shape, generator=g)).clone()  # noqa: E731
    sd = {"text_model.embeddings.token_embedding.weight": noisy(tower.token_embedding.weight),
          "text_model.embeddings.position_embedding.weight": noisy(tower.positional_embedding),
          "text_model.embeddings.position_ids": torch.arange(tower.positional_embedding.shape[0])[None],
          "text_model.final_layer_norm.weight": noisy(tower.ln_final.weight),
          "text_model.final_layer_norm.bias": noisy(tower.ln_final.bias),
          "text_projection.weight": noisy(tower.text_projection.T)}
    for i, block in enumerate(tower.transformer.resblocks):
        p = f"text_model.encoder.layers.{i}."
        for kind in ("weight", "bias"):
            q, k, v = getattr(block.attn, f"in_proj_{kind}").chunk(3)
            sd.update({p + f"self_attn.q_proj.{kind}": noisy(q), p + f"self_attn.k_proj.{kind}": noisy(k),
                       p + f"self_attn.v_proj.{kind}": noisy(v),
                       p + f"self_attn.out_proj.{kind}": noisy(getattr(block.attn.out_proj, kind)),
                       p + f"layer_norm1.{kind}": noisy(getattr(block.ln_1, kind)),
                       p + f"layer_norm2.{kind}": noisy(getattr(block.ln_2, kind)),
                       p + f"mlp.fc1.{kind}": noisy(getattr(block.mlp.c_fc, kind)),
                       p + f"mlp.fc2.{kind}": noisy(getattr(block.mlp.c_proj, kind))})
    return sd


@pytest.mark.parametrize("name", PEERS)
def test_an_untuned_tower_is_the_peer_exactly(name, tiny_backbone):
    peer, rtd = peer_and_rtd(name, tiny_backbone)
    r = refs(tiny_backbone.dim)
    np.testing.assert_array_equal(rtd.compose(r, TEXTS), peer.compose(r, TEXTS))
    np.testing.assert_array_equal(rtd.compose_empty(r), peer.compose_empty(r))
    with torch.no_grad():  # tuning the copy changes the query, never the backbone or the peer
        rtd.tower.ln_final.bias.add_(0.5)
    assert np.abs(rtd.compose(r, TEXTS) - peer.compose(r, TEXTS)).max() > 1e-3
    np.testing.assert_array_equal(peer.compose(r, TEXTS), get_method_class(name)(
        tiny_backbone, {"arch": peer.arch.to_dict()}, mapper=peer.mapper).compose(r, TEXTS))


def test_checkpoint_holds_no_token_table_unless_tuned(tiny_backbone, tmp_path):
    peer, rtd = peer_and_rtd("lincir", tiny_backbone)
    with torch.no_grad():
        rtd.tower.transformer.resblocks[0].mlp.c_fc.bias.add_(0.1)
    keys = set(rtd.weights().state_dict())
    assert not any("embedding" in k and "positional" not in k for k in keys)
    assert {k.split(".")[0] for k in keys} == {"phi", "text"}
    rtd.save(tmp_path / "ck")
    cfg = json.loads((tmp_path / "ck" / "config.json").read_text())
    assert cfg["method"] == "rtd-lincir" and cfg["extra"]["base"] == "lincir" and cfg["extra"]["replace"] == "all"
    back = create_method("rtd-lincir", tiny_backbone, tmp_path / "ck")
    r = refs(tiny_backbone.dim)
    np.testing.assert_allclose(back.compose(r, TEXTS), rtd.compose(r, TEXTS), atol=1e-6)
    with pytest.raises(CheckpointError, match="lincir"):  # another method's folder is refused
        create_method("rtd-searle", tiny_backbone, tmp_path / "ck")


def test_the_hf_layout_maps_onto_open_clip(tiny_backbone):
    tower = get_method_class("rtd-lincir")(tiny_backbone).tower
    hf = hf_layout(tiny_backbone.model, scale=1.0)
    mapped = hf_to_open_clip(hf, "f.pt")
    blk = "transformer.resblocks.1.attn."
    np.testing.assert_array_equal(mapped[blk + "in_proj_weight"][:128],
                                  hf["text_model.encoder.layers.1.self_attn.q_proj.weight"])
    np.testing.assert_array_equal(mapped[blk + "in_proj_bias"][256:],
                                  hf["text_model.encoder.layers.1.self_attn.v_proj.bias"])
    np.testing.assert_array_equal(mapped["text_projection"], hf["text_projection.weight"].T)
    assert set(mapped) - {"own_embedding.weight"} == set(tower.state_dict())
    with pytest.raises(CheckpointError, match="f.pt: key text_model.pooler.weight has no open_clip counterpart"):
        hf_to_open_clip({**hf, "text_model.pooler.weight": torch.zeros(1)}, "f.pt")


def test_convert_the_authors_release(tiny_backbone, tmp_path, capsys):
    peer = get_method_class("lincir")(tiny_backbone, {"arch": {"input_scale": 20.0}})
    peer.save(tmp_path / "lincir")
    src = tmp_path / "text_encoder_best.pt"
    torch.save({"epoch": 3, HF_KEY: hf_layout(tiny_backbone.model)}, src)
    same = convert("rtd-lincir", src, tmp_path / "same", tiny_backbone, allow_pickle=True, base=tmp_path / "lincir")
    m = create_method("rtd-lincir", tiny_backbone, same)
    r = refs(tiny_backbone.dim)
    np.testing.assert_allclose(m.compose(r, TEXTS), peer.compose(r, TEXTS), atol=1e-6)  # the backbone's own tower
    cfg = json.loads((same / "config.json").read_text())
    assert cfg["arch"]["tune_token_embedding"] is True and cfg["extra"]["converted_from"]["file"] == src.name
    torch.save({"epoch": 3, HF_KEY: hf_layout(tiny_backbone.model, scale=0.02)}, src)
    assert main(["rtd-lincir", str(src), str(tmp_path / "tuned"), "--backbone", "cir-tiny-vit",
                 "--allow-pickle", "--base", str(tmp_path / "lincir")]) == 0
    tuned = create_method("rtd-lincir", tiny_backbone, tmp_path / "tuned")
    assert np.abs(tuned.compose(r, TEXTS) - peer.compose(r, TEXTS)).max() > 1e-3
    with pytest.raises(InputError, match="--base"):
        convert("rtd-lincir", src, tmp_path / "x", tiny_backbone, allow_pickle=True)
    wide = hf_layout(tiny_backbone.model)
    wide["text_model.final_layer_norm.weight"] = torch.ones(512)
    torch.save({HF_KEY: wide}, src)
    with pytest.raises(CheckpointError, match=r"key ln_final.weight has shape \(512,\) but the model needs \(128,\)"):
        convert("rtd-lincir", src, tmp_path / "x", tiny_backbone, allow_pickle=True, base=tmp_path / "lincir")
    assert not (tmp_path / "x").exists()


def test_the_trainer_tunes_the_tower_and_keeps_phi(tiny_backbone, tmp_path):
    peer = get_method_class("pic2word")(tiny_backbone, {"arch": {"input_scale": 20.0}})
    peer.save(tmp_path / "pic2word")
    cfg = RTDSettings.from_dict({**DEFAULTS.to_dict(), "backbone": "cir-tiny-vit", "base": "pic2word",
                                 "base_checkpoint": str(tmp_path / "pic2word"), "n_train": 24,
                                 "batch_size": 8, "steps": 3, "val_queries": 0, "keep_best": "",
                                 "device": "cpu", "threads": 0, "out_dir": str(tmp_path / "run"),
                                 "export_dir": str(tmp_path / "export")}, strict=True)
    task = RTDTask(cfg, tiny_backbone)
    assert len(task.triplets) == 24 and all(len(t) == 3 and all(t) for t in task.triplets)
    run(task, cfg)
    out = create_method("rtd-pic2word", tiny_backbone, tmp_path / "export")
    for k, v in peer.mapper.state_dict().items():
        np.testing.assert_array_equal(out.mapper.state_dict()[k], v)  # φ frozen
    before = tiny_backbone.model.transformer.resblocks[0].mlp.c_fc.weight
    assert not torch.equal(out.tower.transformer.resblocks[0].mlp.c_fc.weight, before)
    assert json.loads((tmp_path / "export" / "config.json").read_text())["metrics"]["train_triplets"] == 24


def test_triplets_come_from_the_training_stream():
    a, b = text_triplets(6, 0), text_triplets(6, 1)
    assert a == text_triplets(6, 0) and a != b


def test_offered_as_optional_columns_and_built_after_their_peers():
    from cir_core.methods import extra_methods
    from training.trainers import get_trainer, list_trainers

    assert {"rtd-lincir", "rtd-pic2word", "rtd-searle"} <= set(extra_methods())
    order = list_trainers()
    for peer in PEERS:
        t = get_trainer(f"rtd-{peer}")
        assert t.method == f"rtd-{peer}" and order.index(peer) < order.index(t.name)
        assert json.loads(open(t.config).read())["base"] == peer
