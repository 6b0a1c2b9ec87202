"""Pic2Word: IM2TEXT as google-research/composed_image_retrieval defines and saves it, converted and
ranked; its prompts; the image-only trainer (tiny, CPU)."""
import json
import random

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from torch import nn

import cir_core  # noqa: F401  (first: sets OMP_WAIT_POLICY before torch loads OpenMP)
from cir_core.benchmarks.world import WorldEval
from cir_core.errors import CheckpointError
from cir_core.eval.loop import evaluate
from cir_core.methods import create_method
from cir_core.methods.convert import convert
from cir_core.methods.pic2word import Pic2Word

pytestmark = pytest.mark.usefixtures("one_thread")


class AuthorsIM2TEXT(nn.Module):
    """`model/model.py: IM2TEXT` as published (its attribute names are its state-dict layout)."""

    def __init__(self, embed_dim=512, middle_dim=512, output_dim=512, n_layer=2, dropout=0.1):
        super().__init__()
        self.fc_out = nn.Linear(middle_dim, output_dim)
        layers = []
        dim = embed_dim
        for _ in range(n_layer):
            block = []
            block.append(nn.Linear(dim, middle_dim))
            block.append(nn.Dropout(dropout))
            block.append(nn.ReLU())
            dim = middle_dim
            layers.append(nn.Sequential(*block))
        self.layers = nn.Sequential(*layers)

    def forward(self, x):
        for layer in self.layers:
            x = layer(x)
        return self.fc_out(x)


def authors_checkpoint(path, embed_dim, output_dim, seed=0, ddp=True):
    """`src/main.py`: torch.save({"epoch", "name", "state_dict" (CLIP), "state_dict_img2text",
    "optimizer"}), the img2text keys prefixed "module." under DistributedDataParallel."""
    torch.manual_seed(seed)
    img2text = AuthorsIM2TEXT(embed_dim=embed_dim, middle_dim=512, output_dim=output_dim, n_layer=2).eval()
    opt = torch.optim.AdamW(img2text.parameters(), lr=1e-4, betas=(0.9, 0.98), eps=1e-6)
    img2text(torch.randn(2, embed_dim)).sum().backward()
    opt.step()  # a real optimizer state (ints, floats, tensors) travels in the file
    sd = {("module." if ddp else "") + k: v for k, v in img2text.state_dict().items()}
    clip_sd = {"module.logit_scale": torch.tensor(4.6), "module.positional_embedding": torch.zeros(77, 8)}
    torch.save({"epoch": 30, "name": "lr=0.0001_wd=0.1", "state_dict": clip_sd,
                "state_dict_img2text": sd, "optimizer": opt.state_dict()}, path)
    return img2text


def unit_rows(n, d, seed=0):
    r = np.random.default_rng(seed).standard_normal((n, d)).astype(np.float32)
    return r / np.linalg.norm(r, axis=1, keepdims=True)


def test_the_authors_checkpoint_converts_loads_and_ranks(tiny_backbone, small_bench, tmp_path):
    img2text = authors_checkpoint(tmp_path / "epoch_30.pt", tiny_backbone.dim, 128)
    assert sorted(img2text.state_dict()) == ["fc_out.bias", "fc_out.weight", "layers.0.0.bias",
                                             "layers.0.0.weight", "layers.1.0.bias", "layers.1.0.weight"]
    folder = convert("pic2word", tmp_path / "epoch_30.pt", tmp_path / "p2w", tiny_backbone,
                     allow_pickle=True, input_scale=5.0)
    cfg = json.loads((folder / "config.json").read_text())
    assert cfg["arch"] == {"middle_dim": 512, "n_layer": 2, "dropout": 0.1, "input_scale": 5.0, "raw_input": False}
    assert cfg["extra"]["prompt"] == "a photo of * , {edit}" and cfg["extra"]["empty_prompt"] == "a photo of *"
    m = create_method("pic2word", tiny_backbone, folder)
    ref = unit_rows(3, tiny_backbone.dim)
    with torch.no_grad():
        torch.testing.assert_close(m.pseudo(torch.from_numpy(ref)), img2text(5.0 * torch.from_numpy(ref)))
    rep, _ = evaluate(WorldEval(small_bench, 64, False), tiny_backbone, ["pic2word"], cache=tmp_path / "c",
                      progress=False, checkpoints={"pic2word": str(folder)})
    assert set(rep["results"]["pic2word"]) == {"cosine", "chord"} and not rep.get("skipped")
    # without the DDP prefix too, and as safetensors
    from safetensors.torch import save_file
    save_file(AuthorsIM2TEXT(256, 512, 128).state_dict(), str(tmp_path / "bare.safetensors"))
    assert convert("pic2word", tmp_path / "bare.safetensors", tmp_path / "p2w-st", tiny_backbone, input_scale=1)


def test_a_wrong_shape_or_key_is_named(tiny_backbone, tmp_path):
    authors_checkpoint(tmp_path / "vitl.pt", 768, 768)  # the released ViT-L/14 layout
    with pytest.raises(CheckpointError) as e:
        convert("pic2word", tmp_path / "vitl.pt", tmp_path / "out", tiny_backbone, allow_pickle=True)
    msg = str(e.value)
    assert "vitl.pt" in msg and "layers.0.0.weight has shape (512, 768) but the model needs (512, 256)" in msg
    assert "fc_out.weight has shape (768, 512) but the model needs (128, 512)" in msg
    sd = AuthorsIM2TEXT(256, 512, 128).state_dict()
    sd["layers.0.0.scale"] = torch.ones(3)
    torch.save({"epoch": 1, "state_dict_img2text": sd}, tmp_path / "extra.pt")
    with pytest.raises(CheckpointError, match="unexpected key layers.0.0.scale"):
        convert("pic2word", tmp_path / "extra.pt", tmp_path / "out", tiny_backbone, allow_pickle=True)


def test_prompts_and_the_placeholder(tiny_backbone):
    m = Pic2Word(tiny_backbone, {})
    assert m.prompts(["Paint the star red.", " "]) == ["a photo of * , Paint the star red.", "a photo of *"]
    word = tiny_backbone.model.token_embedding.weight[tiny_backbone.tokenizer(["dog"])[0][1]]
    prompts = m.prompts(["Paint the star red.", ""])
    with torch.no_grad():
        q = m.text.encode(m.text.tokenize(prompts), word.expand(2, -1))
    want = tiny_backbone.encode_texts([p.replace("*", "dog") for p in prompts])
    np.testing.assert_allclose(F.normalize(q, dim=-1).numpy(), want, atol=1e-5)
    ref = unit_rows(2, tiny_backbone.dim)
    np.testing.assert_allclose(m.compose_empty(ref), m.compose(ref, ["", ""]), atol=1e-6)


# -- the trainer -------------------------------------------------------------------------------
def test_symmetric_clip_loss():
    from training.train_pic2word import symmetric_clip_loss

    v, t = torch.randn(5, 4), torch.randn(5, 4)
    a, b = F.normalize(v, dim=-1), F.normalize(t, dim=-1)
    lab = torch.arange(5)
    want = (F.cross_entropy(7 * a @ b.T, lab) + F.cross_entropy(7 * b @ a.T, lab)) / 2
    torch.testing.assert_close(symmetric_clip_loss(v, t, 7.0), want)


def test_trainer_learns_exports_and_reloads(head_cfg, tiny_backbone, tmp_path):
    from training.loop import run
    from training.train_pic2word import DEFAULTS, Pic2WordTask

    cfg = head_cfg(DEFAULTS, lr=3e-3, input_scale=0.0)
    task = Pic2WordTask(cfg, tiny_backbone)
    assert task.arch.input_scale > 1  # measured: the tiny tower's raw image features
    groups = task.param_groups(cfg)
    assert [g["weight_decay"] for g in groups] == [0.1, 0.0] and groups[0]["betas"] == (0.9, 0.98)
    assert all(p.ndim == 1 for p in groups[1]["params"])  # biases: no weight decay (the authors')
    opt = torch.optim.AdamW(groups, lr=3e-3)
    batch = task.batch(0, 0, random.Random(0))
    assert batch.shape == (16, tiny_backbone.dim)
    task.model.eval()
    first = task.loss(task.model, batch)[0].item()
    for _ in range(20):
        loss, _ = task.loss(task.model, batch)
        loss.backward()
        opt.step()
        opt.zero_grad()
    assert task.loss(task.model, batch)[0].item() < 0.8 * first
    cfg = head_cfg(DEFAULTS, steps=2, val_queries=8, lambda_grid=[0.2, 0.6], input_scale=4.0)
    run(Pic2WordTask(cfg, tiny_backbone), cfg)
    conf = json.loads((tmp_path / "export" / "config.json").read_text())
    assert conf["method"] == "pic2word" and conf["chord_lambda"] in (0.2, 0.6) and conf["arch"]["input_scale"] == 4.0
    assert "wall_minutes" in conf["metrics"] and conf["training"]["beta2"] == 0.98
    m = create_method("pic2word", tiny_backbone, tmp_path / "export")
    again = Pic2Word.from_checkpoint(tiny_backbone, m.save(tmp_path / "again"))
    ref = unit_rows(2, tiny_backbone.dim)
    np.testing.assert_array_equal(again.compose(ref, ["a", "b"]), m.compose(ref, ["a", "b"]))


def test_a_stopped_run_exports_nothing(head_cfg, tiny_backbone, tmp_path, capsys):
    from training.loop import run
    from training.train_pic2word import DEFAULTS, Pic2WordTask

    cfg = head_cfg(DEFAULTS, steps=3, input_scale=1.0, max_minutes=1e-9)  # stops after one step
    run(Pic2WordTask(cfg, tiny_backbone), cfg)
    assert "stopped at step 1 of 3: not exported" in capsys.readouterr().out
    assert not (tmp_path / "export").exists() and (tmp_path / "run" / "last" / "state.json").is_file()


# -- the three optional methods in the workbench ------------------------------------------------
OPTIONAL = ["pic2word", "searle", "lincir"]


def test_optional_columns_not_default_but_everywhere_on_request(tmp_path):
    import sqlite3

    from cir_core.methods import default_columns, get_method_class, list_methods
    from db.pooling import main as pool

    assert all(get_method_class(n).app_role == "optional" and n in list_methods() for n in OPTIONAL)
    assert default_columns() == ["pact", "dice", "pace", "compose-only"]
    db = tmp_path / "ann.sqlite"
    assert pool(["--name", "tinv", "--queries", "2", "--k", "2", "--scorings", "cosine", "chord",
                 "--methods", "pact", *OPTIONAL, "--world-queries", "8", "--cache-dir", str(tmp_path / "c"),
                 "--db", str(db)]) == 0
    con = sqlite3.connect(db)
    pooled = {m for (m,) in con.execute("SELECT DISTINCT method FROM retrieved_items")}
    con.close()
    assert pooled == {"pact", *OPTIONAL}


def test_the_eval_cli_reports_them_with_their_own_lambda(tmp_path, monkeypatch):
    from cir_core.eval import cli as ev

    monkeypatch.setenv("CIR_CACHE_DIR", str(tmp_path / "c"))
    out = tmp_path / "r.json"
    assert ev.main(["--n-queries", "6", "--methods", ",".join(OPTIONAL), "--json", str(out)]) == 0
    rep = json.loads(out.read_text())
    assert set(rep["results"]) == set(OPTIONAL)
    assert all(set(rep["results"][m]) == {"cosine", "chord"} for m in OPTIONAL)


def test_a_figure_shows_them(tmp_path, monkeypatch):
    from _cir_fakes import N_QUERIES, cache_root
    from PIL import Image

    from cir_core.figures import main as figures

    monkeypatch.delenv("CIR_BACKBONE", raising=False)
    q = tmp_path / "q.json"
    q.write_text(json.dumps(["test-00001"]))
    out = tmp_path / "spec.json"
    assert figures(["--queries", str(q), "--out", str(tmp_path / "f.png"), "--out", str(out),
                    "--world-queries", str(N_QUERIES), "--cache-dir", str(cache_root()),
                    "--methods", ",".join(OPTIONAL), "--k", "3"]) == 0
    assert json.loads(out.read_text())["methods"] == OPTIONAL and Image.open(tmp_path / "f.png").width > 300
