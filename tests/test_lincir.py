"""LinCIR: φ as navervision/lincir defines and saves it, converted and ranked; every `$` takes the
pseudo-word; keyword masking and the text-only trainer (tiny, CPU)."""
import json
import random

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from _cir_fakes import fit, unit_rows
from torch import nn

import cir_core  # noqa: F401  (first: sets OMP_WAIT_POLICY before torch loads OpenMP)
from cir_core.benchmarks.world import WorldEval
from cir_core.errors import CheckpointError
from cir_core.eval.loop import evaluate
from cir_core.methods import create_method
from cir_core.methods.convert import convert
from cir_core.methods.lincir import LinCIR
from cir_core.methods.refs import Refs

pytestmark = pytest.mark.usefixtures("one_thread")


class AuthorsPhi(nn.Module):
    """navervision/lincir `models.py: Phi` (a copy of SEARLE's) as published."""

    def __init__(self, input_dim, hidden_dim, output_dim, dropout):
        super().__init__()
        self.layers = nn.Sequential(
            nn.Linear(input_dim, hidden_dim),
            nn.GELU(),
            nn.Dropout(p=dropout),
            nn.Linear(hidden_dim, hidden_dim),
            nn.GELU(),
            nn.Dropout(p=dropout),
            nn.Linear(hidden_dim, output_dim),
        )

    def forward(self, x):
        return self.layers(x)


def authors_checkpoint(path, projection_dim, hidden_size, seed=0):
    """`train_phi.py: save_phi`: torch.save({'epoch': step, 'Phi': phi.state_dict()}), with
    Phi(projection_dim, projection_dim * 4, hidden_size, dropout=0.5)."""
    torch.manual_seed(seed)
    phi = AuthorsPhi(projection_dim, projection_dim * 4, hidden_size, 0.5).eval()
    torch.save({"epoch": 20000, "Phi": phi.state_dict()}, path)
    return phi


def test_the_authors_checkpoint_converts_loads_and_ranks(tiny_backbone, small_bench, tmp_path):
    authors_checkpoint(tmp_path / "phi_best.pt", tiny_backbone.dim, 128)
    folder = convert("lincir", tmp_path / "phi_best.pt", tmp_path / "lincir", tiny_backbone, allow_pickle=True)
    cfg = json.loads((folder / "config.json").read_text())
    assert cfg["method"] == "lincir" and cfg["arch"]["hidden_dim"] == 1024 and cfg["extra"]["replace"] == "all"
    assert cfg["arch"]["raw_input"] is True  # the converter's default: φ reads raw image features
    assert cfg["extra"]["converted_from"]["phi_input"].startswith("raw image features")
    m = create_method("lincir", tiny_backbone, folder)
    ref, norms = unit_rows(3, tiny_backbone.dim), np.array([18.5, 20.0, 23.25], np.float32)
    np.testing.assert_array_equal(m.phi_input(Refs(ref, norms)), ref * norms[:, None])
    rep, _ = evaluate(WorldEval(small_bench, 64, False), tiny_backbone, ["lincir"], cache=tmp_path / "c",
                      progress=False, checkpoints={"lincir": str(folder)})
    assert set(rep["results"]["lincir"]) == {"cosine", "chord"} and not rep.get("skipped")


def test_a_wrong_shape_or_key_is_named(tiny_backbone, tmp_path):
    authors_checkpoint(tmp_path / "lincir_large.pt", 768, 768)  # the released ViT-L/14 φ
    with pytest.raises(CheckpointError, match=r"lincir_large.pt does not fit lincir's φ.*layers.0.weight has "
                                              r"shape \(3072, 768\) but the model needs \(3072, 256\)"):
        convert("lincir", tmp_path / "lincir_large.pt", tmp_path / "out", tiny_backbone, allow_pickle=True)
    phi = AuthorsPhi(256, 1024, 128, 0.5)
    sd = {k.replace("layers.3", "layers.4"): v for k, v in phi.state_dict().items()}
    torch.save({"epoch": 1, "Phi": sd}, tmp_path / "shifted.pt")
    with pytest.raises(CheckpointError, match="key layers.3.weight is missing"):
        convert("lincir", tmp_path / "shifted.pt", tmp_path / "out", tiny_backbone, allow_pickle=True)


def test_every_placeholder_takes_the_pseudo_word(tiny_backbone):
    m = LinCIR(tiny_backbone, {})
    assert m.prompts(["Make the star red."]) == ["a photo of $ that Make the star red."]
    dog = tiny_backbone.model.token_embedding.weight[tiny_backbone.tokenizer(["dog"])[0][1]]
    with torch.no_grad():  # encode_with_pseudo_tokens_HF: torch.where(text == 259, pseudo, x)
        q = m.text.encode(m.text.tokenize(["$ on $ facing left"]), dog[None])
    want = tiny_backbone.encode_texts(["dog on dog facing left"])
    np.testing.assert_allclose(F.normalize(q, dim=-1).numpy(), want, atol=1e-5)


def test_keyword_masking_follows_lincirs_loader():
    from training.textinv import clean_caption, extract_keywords, mask_keywords

    cap = clean_caption("Sami standing on the left, facing right in a sandy beach, with a big red star "
                        "in the middle and a small blue circle on the right.$")
    assert "$" not in cap and cap.startswith("sami")
    assert extract_keywords(cap) == ["sami", "the left", "a sandy beach", "a big red star", "the middle",
                                     "a small blue circle", "the right"]
    assert mask_keywords(cap, random.Random(0)) == "$ standing on $ , facing right in $ , with $ in $ and $ on $ ."
    # no keyword at all: one random word is masked instead (CaptionDataset's else branch)
    assert mask_keywords("standing facing", random.Random(0)).count("$") == 1


def test_trainer_learns_exports_and_reloads(head_cfg, tiny_backbone, tmp_path):
    from training.loop import run
    from training.train_lincir import DEFAULTS, LinCIRTask

    cfg = head_cfg(DEFAULTS, lr=1e-3, input_scale=3.0)
    task = LinCIRTask(cfg, tiny_backbone)
    assert task.captions and all(c == c.lower() for c in task.captions)
    batch = task.batch(0, 0, random.Random(0))
    assert batch["u"].shape == (16,) and batch["n"].shape == (16, tiny_backbone.dim)
    assert bool((batch["masked"] == task.method.text.id).any(1).all())  # every row has its `$`
    opt = torch.optim.AdamW(task.param_groups(cfg), lr=1e-3)
    task.model.eval()
    first = task.loss(task.model, batch)[0].item()
    logs = fit(task, batch, opt)
    assert task.loss(task.model, batch)[0].item() < 0.8 * first and logs["target_norm"] > 1
    cfg = head_cfg(DEFAULTS, steps=2, val_queries=8, lambda_grid=[0.05, 0.34], input_scale=3.0)
    run(LinCIRTask(cfg, tiny_backbone), cfg)
    conf = json.loads((tmp_path / "export" / "config.json").read_text())
    assert conf["method"] == "lincir" and conf["chord_lambda"] in (0.05, 0.34) and conf["arch"]["input_scale"] == 3.0
    assert conf["training"]["noise_std"] == 1.0 and conf["training"]["schedule"] == "constant"
    assert isinstance(create_method("lincir", tiny_backbone, tmp_path / "export"), LinCIR)


def test_the_best_validated_phi_is_exported_and_survives_a_resume(head_cfg, tiny_backbone, tmp_path):
    """train_phi.py's `phi_best`: the export is the φ of the best val R@1, kept across a resume."""
    from safetensors.torch import load_file

    from training.loop import run
    from training.train_lincir import DEFAULTS, LinCIRTask

    def go(steps, scores):
        cfg = head_cfg(DEFAULTS, steps=steps, val_queries=8, eval_every=1, ckpt_every=1, lr=1e-3,
                       lambda_grid=[0.34], input_scale=3.0)
        task = LinCIRTask(cfg, tiny_backbone)
        real = task.val.report
        task.val.report = lambda m: {**real(m), "val_R@1": scores[task.step]}  # a chosen val curve
        run(task, cfg)
        return task

    go(2, {0: 0.1, 1: 0.5})  # step 2 is the best so far: kept in the loop's checkpoint
    assert load_file(str(tmp_path / "run" / "last" / "model.safetensors"))["best_step"].item() == 2
    task = go(4, {2: 0.3, 3: 0.2})  # resumed: steps 3 and 4 validate worse
    conf = json.loads((tmp_path / "export" / "config.json").read_text())
    assert conf["metrics"]["selected_step"] == 2 and conf["metrics"]["selected_val_R@1"] == 0.5
    assert conf["metrics"]["last_step_metrics"]["val_R@1"] == 0.2
    best = task.model.best.state_dict()
    m = create_method("lincir", tiny_backbone, tmp_path / "export")
    assert all(torch.equal(m.mapper.state_dict()[k], best[k]) for k in best)
    assert not all(torch.equal(best[k], v) for k, v in task.model.net.state_dict().items())
