"""DiCE: the gated MLP of seed 001, its three losses, the trainer, checkpoints, resume."""
import json
import random
from types import SimpleNamespace

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from safetensors.torch import load_file

from cir_core.errors import CheckpointError
from cir_core.methods import create_method
from cir_core.methods.dice import DiCE, DiCENet
from training.heads import EMAWrapper
from training.loop import run
from training.train_dice import DEFAULTS, DiCETask, dice_losses

pytestmark = pytest.mark.usefixtures("one_thread")


def unit(*shape, seed=0):
    return F.normalize(torch.randn(*shape, generator=torch.Generator().manual_seed(seed)), dim=-1)


def test_architecture_is_the_papers():
    D = 16
    net = DiCENet(D).eval()
    m = net.mlp
    assert m.norm.normalized_shape == (2 * D,)
    assert m.w1.weight.shape == m.w2.weight.shape == (4 * D, 2 * D)
    assert m.wp.weight.shape == (D, 4 * D) and m.drop.p == 0.05
    z_r, z_e = unit(3, D), unit(3, D, seed=1)
    x = F.layer_norm(torch.cat([z_r, z_e], -1), (2 * D,), m.norm.weight, m.norm.bias)
    want = m.wp(F.gelu(m.w1(x)) * m.w2(x))
    torch.testing.assert_close(net(z_r, z_e), want)


def test_losses_on_hand_made_vectors():
    e = torch.eye(4)
    z_img, z_txt = e[[0]], e[[1]]
    z_t = F.normalize(e[[1]] + e[[2]], dim=-1)
    # ẑ = z_t: aligned; ẑ − z_img is not parallel to z_t − z_txt, so delta > 0
    parts = dice_losses(z_t.clone(), z_img, z_txt, z_t)
    assert parts["align"].item() == pytest.approx(0, abs=1e-6)
    # ẑ − z_img ∥ z_t − z_txt: delta 0; antiparallel: 2
    z_lin = z_img + 0.5 * (z_t - z_txt)
    assert dice_losses(z_lin, z_img, z_txt, z_t, normalise=False)["delta"].item() == pytest.approx(0, abs=1e-6)
    anti = z_img - 0.5 * (z_t - z_txt)
    assert dice_losses(anti, z_img, z_txt, z_t, normalise=False)["delta"].item() == pytest.approx(2, abs=1e-6)
    # normalised (the default): ẑ's scale cannot game the delta loss
    a, b = (dice_losses(k * z_lin, z_img, z_txt, z_t)["delta"].item() for k in (1.0, 7.0))
    assert a == pytest.approx(b, abs=1e-6)


def test_contrastive_and_duplicate_targets():
    z_t = torch.eye(4)
    z_img = z_txt = unit(4, 4, seed=3)
    assert dice_losses(z_t * 5, z_img, z_txt, z_t, tau=0.01)["ctr"].item() < 1e-6
    # two instances per sample (both reference modalities): R = 2B rows, same labels
    assert dice_losses(torch.cat([z_t, z_t]), z_img, z_txt, z_t, tau=0.01)["ctr"].item() < 1e-6
    dup = torch.stack([z_t[0], z_t[0], z_t[2], z_t[3]])  # samples 0 and 1 share a caption
    same = torch.ones(4, 4, dtype=torch.bool).tril() & torch.ones(4, 4, dtype=torch.bool).triu()
    same[0, 1] = same[1, 0] = True
    loose = dice_losses(dup, z_img, z_txt, dup, tau=0.01)["ctr"].item()
    masked = dice_losses(dup, z_img, z_txt, dup, tau=0.01, same_target=same)["ctr"].item()
    assert loose > 0.3 and masked < 1e-6


def test_trainer_reduces_loss_on_a_fixed_batch(head_cfg, tiny_backbone):
    cfg = head_cfg(DEFAULTS, lr=3e-3)
    task = DiCETask(cfg, tiny_backbone)
    opt = torch.optim.AdamW(task.param_groups(cfg), lr=3e-3)
    batch = task.batch(0, 0, random.Random(0))
    assert batch["z_img"].shape == (16, tiny_backbone.dim)
    first = None
    for _ in range(25):
        loss, logs = task.loss(task.model, batch)
        first = first if first is not None else loss.item()
        loss.backward()
        opt.step()
        opt.zero_grad()
    assert set(logs) >= {"align", "delta", "ctr", "loss"}
    assert loss.item() < 0.8 * first


def test_ema_bias_corrected_average():
    net = torch.nn.Linear(2, 1, bias=False)
    w = EMAWrapper(net, 0.5)
    vals = [1.0, 3.0]
    with torch.no_grad():
        net.weight.fill_(vals[0])
        w.update()
        net.weight.fill_(vals[1])
    # weights 1 then 3 with decay 0.5, bias-corrected: (0.5*0.5*1 + 0.5*3) / (1 - 0.25)
    got = w.averaged_state()["weight"]
    torch.testing.assert_close(got, torch.full((1, 2), (0.25 + 1.5) / 0.75))
    assert EMAWrapper(net, 0).averaged_state()["weight"].eq(3).all()


def test_end_to_end_export_lambda_and_reload(head_cfg, tiny_backbone, tmp_path):
    cfg = head_cfg(DEFAULTS, steps=3, val_queries=8, lambda_grid=[0.1, 0.34, 0.5])
    metrics = run(DiCETask(cfg, tiny_backbone), cfg)
    assert "val_R@10" in metrics
    folder = tmp_path / "export"
    conf = json.loads((folder / "config.json").read_text())
    assert conf["method"] == "dice" and conf["embed_dim"] == tiny_backbone.dim
    assert conf["backbone"] == tiny_backbone.id and conf["chord_lambda"] in (0.1, 0.34, 0.5)
    assert conf["lambda_search"]["split"] == "val" and conf["training"]["w_ctr"] == 0.2
    assert conf["git_commit"]
    m = create_method("dice", tiny_backbone, folder)
    assert m.chord_lambda == conf["chord_lambda"]
    ref = unit(3, tiny_backbone.dim).numpy()
    texts = ["Make the square blue.", "Add a red star. Move left.", ""]
    q = m.compose(ref, texts)
    m2 = DiCE.from_checkpoint(tiny_backbone, m.save(tmp_path / "again"))
    np.testing.assert_array_equal(m2.compose(ref, texts), q)
    assert not np.allclose(q, DiCE(tiny_backbone).compose(ref, texts), atol=1e-3)


def test_resume_equals_uninterrupted(head_cfg, tiny_backbone, tmp_path):
    def go(steps, out):
        cfg = head_cfg(DEFAULTS, steps=steps, out_dir=str(out), export_dir=str(out / "export"),
                       ema=0.9, ckpt_every=1)
        run(DiCETask(cfg, tiny_backbone), cfg)
        return load_file(str(out / "last" / "model.safetensors"))

    whole = go(6, tmp_path / "a")
    go(3, tmp_path / "b")
    resumed = go(6, tmp_path / "b")
    assert set(whole) == set(resumed) and any(k.startswith("ema.") for k in whole)
    for k in whole:
        torch.testing.assert_close(resumed[k], whole[k], rtol=0, atol=0)


def test_refuses_another_dimension(tiny_backbone, tmp_path):
    folder = DiCE(tiny_backbone).save(tmp_path / "ck", metrics={})
    (folder / "model.safetensors").write_bytes(b"corrupt")  # the dimension is checked first
    other = SimpleNamespace(dim=tiny_backbone.dim * 2, id="wide@x", device="cpu")
    with pytest.raises(CheckpointError, match="embed_dim=256.*has embed_dim=512"):
        DiCE.from_checkpoint(other, folder)
    with pytest.raises(CheckpointError, match="cannot read"):
        DiCE.from_checkpoint(tiny_backbone, folder)
    with pytest.raises(CheckpointError, match="not 'dice'"):
        from cir_core.methods.pace import PACE
        DiCE.from_checkpoint(tiny_backbone, PACE(tiny_backbone).save(tmp_path / "p", metrics={}))
