"""SEARLE: φ as miccunifi/SEARLE defines and saves it, converted and ranked; its prompt; OTI and the
φ distillation trainer (tiny, CPU)."""
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
from cir_core.methods import create_method, get_method_class
from cir_core.methods.convert import convert
from cir_core.methods.searle import SEARLE

pytestmark = pytest.mark.usefixtures("one_thread")


class AuthorsPhi(nn.Module):
    """miccunifi/SEARLE `src/phi.py` as published (its layer list is its state-dict layout)."""

    def __init__(self, input_dim, hidden_dim, output_dim, dropout):
        super().__init__()
        self.layers = nn.Sequential(
            nn.Linear(input_dim, hidden_dim), nn.GELU(), nn.Dropout(p=dropout),
            nn.Linear(hidden_dim, hidden_dim), nn.GELU(), nn.Dropout(p=dropout),
            nn.Linear(hidden_dim, output_dim))

    def forward(self, x):
        return self.layers(x)


def authors_checkpoint(path, input_dim, output_dim, seed=0):
    """`train_phi.py: save_phi`: torch.save({'epoch', 'Phi': phi.state_dict()}); hidden = 4 × input
    (`hubconf.py`: ViT-B/32 512-2048-512, ViT-L/14 768-3072-768), dropout 0.5."""
    torch.manual_seed(seed)
    phi = AuthorsPhi(input_dim, 4 * input_dim, output_dim, 0.5).eval()
    torch.save({"epoch": 20, "Phi": phi.state_dict()}, path)
    return phi


def test_the_authors_checkpoint_converts_loads_and_ranks(tiny_backbone, small_bench, tmp_path):
    phi = authors_checkpoint(tmp_path / "phi_20.pt", tiny_backbone.dim, 128)
    assert [k for k in phi.state_dict()] == [f"layers.{i}.{p}" for i in (0, 3, 6) for p in ("weight", "bias")]
    folder = convert("searle", tmp_path / "phi_20.pt", tmp_path / "searle", tiny_backbone,
                     allow_pickle=True, chord_lambda=0.25, input_scale=3.0)
    cfg = json.loads((folder / "config.json").read_text())
    assert cfg["method"] == "searle" and cfg["arch"] == {"hidden_dim": 1024, "dropout": 0.5, "input_scale": 3.0, "raw_input": False}
    assert cfg["extra"]["converted_from"]["file"] == "phi_20.pt" and cfg["chord_lambda"] == 0.25
    m = create_method("searle", tiny_backbone, folder)
    ref = unit_rows(3, tiny_backbone.dim)
    with torch.no_grad():  # φ is the authors' φ, reading s · v_r
        want = phi(3.0 * torch.from_numpy(ref))
        torch.testing.assert_close(m.pseudo(torch.from_numpy(ref)), want)
    q = m.compose(ref, ["Make the star red.", "Move the character to the left.", ""])
    assert q.shape == (3, tiny_backbone.dim) and np.isfinite(q).all()
    rep, _ = evaluate(WorldEval(small_bench, 64, False), tiny_backbone, ["searle"], cache=tmp_path / "c",
                      progress=False, checkpoints={"searle": str(folder)})
    assert "skipped" not in rep or not rep["skipped"]
    assert set(rep["results"]["searle"]) == {"cosine", "chord"}
    assert all(0 <= v <= 1 for v in rep["results"]["searle"]["chord"].values())


def test_a_wrong_shape_or_key_is_named(tiny_backbone, tmp_path):
    authors_checkpoint(tmp_path / "xl.pt", 768, 768)  # SEARLE-XL (ViT-L/14) on the 256-d backbone
    with pytest.raises(CheckpointError) as e:
        convert("searle", tmp_path / "xl.pt", tmp_path / "out", tiny_backbone, allow_pickle=True, input_scale=1)
    msg = str(e.value)
    assert "xl.pt" in msg and "layers.0.weight has shape (3072, 768) but the model needs (3072, 256)" in msg
    assert "layers.6.weight" in msg and "token width 128" in msg and "\n" not in msg
    phi = AuthorsPhi(256, 1024, 128, 0.5)
    sd = phi.state_dict()
    sd["layers.9.weight"] = sd.pop("layers.6.weight")  # a key the published module does not have
    torch.save({"epoch": 1, "Phi": sd}, tmp_path / "renamed.pt")
    with pytest.raises(CheckpointError, match=r"key layers.6.weight is missing.*unexpected key layers.9.weight"):
        convert("searle", tmp_path / "renamed.pt", tmp_path / "out", tiny_backbone, allow_pickle=True, input_scale=1)
    torch.save({"epoch": 1, "phi": sd}, tmp_path / "nokey.pt")
    with pytest.raises(CheckpointError, match="no 'Phi' state dict.*top-level keys: epoch, phi"):
        convert("searle", tmp_path / "nokey.pt", tmp_path / "out", tiny_backbone, allow_pickle=True, input_scale=1)
    assert not (tmp_path / "out").exists()


def test_prompt_and_first_placeholder_only(tiny_backbone):
    m = SEARLE(tiny_backbone, {})
    assert m.prompts(["Make the star  red.", ""]) == ["a photo of $ that Make the star red.", "a photo of $"]
    dog = tiny_backbone.model.token_embedding.weight[tiny_backbone.tokenizer(["dog"])[0][1]]
    prompts = ["a photo of $ that costs $ 5", "a photo of $"]
    with torch.no_grad():  # only the first `$` takes the pseudo-word (encode_with_pseudo_tokens)
        q = m.text.encode(m.text.tokenize(prompts), dog.expand(2, -1))
    want = tiny_backbone.encode_texts(["a photo of dog that costs $ 5", "a photo of dog"])
    np.testing.assert_allclose(F.normalize(q, dim=-1).numpy(), want, atol=1e-5)


# -- the trainer -------------------------------------------------------------------------------
def test_nt_xent_is_searles_contrastive_loss():
    from training.train_searle import nt_xent

    v1, v2 = torch.randn(6, 5), torch.randn(6, 5)
    a, b = F.normalize(v1, dim=1), F.normalize(v2, dim=1)  # utils.contrastive_loss, literally
    num = torch.exp(torch.diag(a @ b.T) / 0.25).repeat(2)
    joint = torch.cat([a, b])
    pairs = torch.exp(joint @ joint.T / 0.25)
    den = (pairs - pairs * torch.eye(12)).sum(0)
    torch.testing.assert_close(nt_xent(v1, v2, 0.25), -torch.log(num / den).mean())


def test_world_concepts_and_phrases():
    from training.textinv import concept_phrases, replace_concept, world_concepts

    concepts = world_concepts()
    assert {"star", "red star", "grassy meadow", "Ada"} <= set(concepts) and len(concepts) == 77
    caps = ["Ada on the left facing right in a starry night, with a big red star on the right.",
            "A starry night with a small blue circle in the middle."]
    ph = concept_phrases(caps, ["star", "red star", "purple star", "starry night"])
    assert ph["star"] == caps[:1] and "purple star" not in ph and len(ph["starry night"]) == 2
    assert replace_concept(caps[0], "star") == \
        "Ada on the left facing right in a starry night, with a big red $ on the right."


@pytest.fixture
def searle_cfg(head_cfg, tmp_path):
    from training.train_searle import DEFAULTS

    def make(**kw):
        return head_cfg(DEFAULTS, **{"n_oti": 8, "oti_batch": 4, "oti_steps": 3, "oti_top_k": 3,
                                     "top_k_concepts": 4, "phrases_per_concept": 8, "batch_size": 8,
                                     "input_scale": 2.0, **kw})
    return make


def test_oti_is_saved_and_reused(searle_cfg, tiny_backbone, tmp_path):
    from training.train_searle import SEARLETask

    task = SEARLETask(searle_cfg(), tiny_backbone)
    tokens = np.load(tmp_path / "run" / "oti" / "tokens.npy")
    assert tokens.shape == (8, 128) and np.allclose(tokens, task.oti_tokens.numpy())
    meta = json.loads((tmp_path / "run" / "oti" / "meta.json").read_text())
    assert meta["n_done"] == 8 and meta["key"]["steps"] == 3
    # a second task with the same settings reads the tokens instead of inverting again
    again = SEARLETask(searle_cfg(), tiny_backbone)
    assert np.array_equal(again.oti_tokens.numpy(), tokens)
    # OTI moves the token towards the image: the template loss drops over the steps
    x = task.cfg
    x.oti_steps = 1
    one = task.invert(np.arange(4), np.random.default_rng(7))
    x.oti_steps = 40
    many = task.invert(np.arange(4), np.random.default_rng(7))
    v = torch.from_numpy(task.images[:4])
    text = task.method.text
    loss = [(1 - F.cosine_similarity(text.encode(text.tokenize(["A photo of a  $ "] * 4), torch.from_numpy(t)), v)).mean()
            for t in (one, many)]
    assert loss[1] < loss[0]


def test_trainer_learns_exports_and_reloads(searle_cfg, tiny_backbone, tmp_path):
    from training.loop import run
    from training.train_searle import SEARLETask

    cfg = searle_cfg(lr=3e-3)
    task = SEARLETask(cfg, tiny_backbone)
    opt = torch.optim.AdamW(task.param_groups(cfg), lr=3e-3)
    batch = task.batch(0, 0, random.Random(0))
    assert batch["v"].shape == (8, tiny_backbone.dim) and batch["oti"].shape == (8, 128)
    task.model.eval()  # dropout off, so the same batch gives the same loss
    first = task.loss(task.model, batch)[0].item()
    logs = fit(task, batch, opt)
    assert set(logs) == {"loss", "distil", "gpt"} and task.loss(task.model, batch)[0].item() < first
    cfg = searle_cfg(steps=2, val_queries=8, lambda_grid=[0.1, 0.5])
    run(SEARLETask(cfg, tiny_backbone), cfg)
    conf = json.loads((tmp_path / "export" / "config.json").read_text())
    assert conf["method"] == "searle" and conf["chord_lambda"] in (0.1, 0.5)
    assert conf["arch"]["input_scale"] == 2.0 and conf["metrics"]["oti_images"] == 8
    assert conf["lambda_search"]["split"] == "val" and conf["training"]["oti_steps"] == 3
    assert isinstance(create_method("searle", tiny_backbone, tmp_path / "export"), get_method_class("searle"))
