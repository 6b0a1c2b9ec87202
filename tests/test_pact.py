"""PACT / compose-only: pseudo-word placement, LoRA, checkpoints, and the trainer (tiny, CPU)."""
import json
import os
import random
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
import torch

import cir_core  # noqa: F401  (first: sets OMP_WAIT_POLICY before torch loads OpenMP)
from cir_core.errors import BackboneError, CheckpointError
from cir_core.methods import create_method, get_method_class, list_methods
from cir_core.methods.compose_only import ComposeOnly
from cir_core.methods.pact import PACT
from cir_core.methods.pact_model import PACTComposer, PACTConfig
from cir_core.methods.pseudoword import EMPTY_PROMPT, edit_prompt, token_id
from cir_core.text_tower import encode_tokens

EDITS = ["Paint the circle purple.", "a purple cross instead", "Move it left. Add a red star.", ""]
SMALL = {"mapper_hidden": 32, "lora_rank": 2}


def _refs(backbone, n, seed=0):
    r = np.random.default_rng(seed).standard_normal((n, backbone.dim)).astype(np.float32)
    return r / np.linalg.norm(r, axis=1, keepdims=True)


def _state(module):
    return {k: v.detach().clone() for k, v in module.state_dict().items()}


def test_edit_prompt():
    assert edit_prompt("Paint the circle purple.") == "a photo of $ that paint the circle purple"
    assert edit_prompt("  Move it.  Add a star. ") == "a photo of $ that move it. Add a star"
    assert edit_prompt("") == edit_prompt(" . ") == EMPTY_PROMPT


def test_pseudo_token_equivalence(tiny_backbone):
    """φ(v_r) replaced by the embedding of "dog", LoRA at zero: the query is f_T of the real text."""
    c = PACTComposer(tiny_backbone, PACTConfig(**SMALL)).eval()
    dog = tiny_backbone.model.token_embedding.weight[placeholder_id_of(tiny_backbone, "dog")]
    with torch.no_grad():
        q = c.encode_with_token(c.tokenize(EDITS), dog.expand(len(EDITS), -1))
    q = torch.nn.functional.normalize(q, dim=-1).numpy()
    want = tiny_backbone.encode_texts([edit_prompt(e).replace("$", "dog") for e in EDITS])
    np.testing.assert_allclose(q, want, atol=1e-5)


def test_inference_runs_a_merged_tower_equal_to_the_parametrized_one(tiny_backbone):
    c = PACTComposer(tiny_backbone, PACTConfig(**SMALL)).eval()
    ref, toks = torch.from_numpy(_refs(tiny_backbone, len(EDITS))), c.tokenize(EDITS)
    with torch.no_grad():
        base = c(ref, toks)  # B = 0: the plain tower
        g = torch.Generator().manual_seed(0)
        for d in c.lora:
            # a trained-looking delta, not the zero init; seeded, and of a trained delta's size
            # (an unseeded N(0, 1) B let float32 merge rounding reach 4e-4 on some test orders)
            d.B.copy_(torch.randn(d.B.shape, generator=g) * 0.1)
    live = c(ref, toks).detach()  # grad mode on: the parametrized tower, W + B A s each forward
    assert np.abs(live.numpy() - base.numpy()).max() > 1e-2  # the delta does change the queries
    with torch.no_grad():
        merged = c(ref, toks)
        tower = c.merged_tower()
        assert c(ref, toks).shape == merged.shape and c.merged_tower() is tower  # kept
    np.testing.assert_allclose(merged.numpy(), live.numpy(), rtol=1e-4, atol=1e-4)  # float rounding
    assert not any(".parametrizations." in n for n, _ in tower.transformer.named_parameters())
    assert set(c.state_dict()) == set(_state(c))  # no state-dict entry for the merged copy
    with torch.no_grad():
        c.lora[0].B.add_(0.5)  # an optimizer step is an in-place update like this
        changed = c(ref, toks)
    assert c.merged_tower() is not tower
    np.testing.assert_allclose(changed.numpy(), c(ref, toks).detach().numpy(), rtol=1e-4, atol=1e-4)
    assert not np.allclose(changed.numpy(), merged.numpy())
    c.load_state_dict({k: torch.zeros_like(v) for k, v in c.state_dict().items()}, strict=False)
    assert c.merged_tower() is not tower


def placeholder_id_of(backbone, word):
    ids = [int(t) for t in backbone.tokenizer([word])[0] if int(t) != 0]
    assert len(ids) == 3, ids
    return ids[1]


def test_placeholder_detection(tiny_backbone):
    c = PACTComposer(tiny_backbone, PACTConfig(**SMALL))
    pid = token_id(tiny_backbone.tokenizer)
    toks = c.tokenize(["costs $5 more", ""], empty=False)
    # "$" in the edit itself does not move the pseudo-word: the first "$" (position 4) is ours
    assert (toks == pid).sum(1).tolist() == [2, 1]
    assert c.word.positions(toks).tolist() == [4, 4]
    with pytest.raises(BackboneError, match="not found in prompt row 1"):
        c.word.positions(tiny_backbone.tokenizer(["a photo of $", "a photo of dog"]))

    class Splitting:  # a tokenizer that does not keep "$" whole must be refused at build time
        def __call__(self, texts):
            return torch.tensor([[1, 7, 8, 2]])

    with pytest.raises(BackboneError, match="one token"):
        token_id(Splitting())


def test_lora_zero_init_and_backbone_untouched(tiny_backbone):
    before = _state(tiny_backbone.model)
    c = PACTComposer(tiny_backbone, PACTConfig(**SMALL, lora_layers="last:2", lora_targets=["in_proj", "c_fc"]))
    assert len(c.lora) == 4 and "parametrizations" not in str(dict(tiny_backbone.model.named_modules()))
    tokens = tiny_backbone.tokenize(["a photo of a dog that is red", "a star"])
    with torch.no_grad():
        np.testing.assert_allclose(encode_tokens(c.tower, tokens), encode_tokens(tiny_backbone.model, tokens),
                                   atol=1e-6)
        for p in c.lora_parameters():  # a trained LoRA changes the copy, never the backbone
            p.add_(0.1)
        assert not torch.allclose(encode_tokens(c.tower, tokens), encode_tokens(tiny_backbone.model, tokens))
    after = _state(tiny_backbone.model)
    assert before.keys() == after.keys() and all(torch.equal(before[k], after[k]) for k in before)
    assert all(not p.requires_grad for p in tiny_backbone.model.parameters())
    # the state dict is the trainables only: φ and the LoRA factors
    keys = list(c.state_dict())
    assert len(keys) == 2 * 4 + 6 and all(k.startswith("mapper.") or k.endswith((".A", ".B")) for k in keys)


@pytest.fixture()
def trained_pact(tiny_backbone):
    m = PACT(tiny_backbone, {"arch": SMALL, "chord_lambda": 0.3})
    with torch.no_grad():
        for p in m.composer.lora_parameters():
            p.normal_(0, 0.05)
    return m


def test_checkpoint_roundtrip(tiny_backbone, trained_pact, tmp_path):
    refs = _refs(tiny_backbone, 4)
    trained_pact.save(tmp_path / "ck", {"val_R@10": 0.5})
    cfg = json.loads((tmp_path / "ck" / "config.json").read_text())
    assert cfg["method"] == "pact" and cfg["embed_dim"] == tiny_backbone.dim and cfg["token_width"] == 128
    assert cfg["chord_lambda"] == 0.3 and cfg["arch"]["lora_rank"] == 2 and cfg["metrics"]["val_R@10"] == 0.5
    loaded = create_method("pact", tiny_backbone, tmp_path / "ck")
    assert isinstance(loaded, PACT) and loaded.chord_lambda == 0.3
    np.testing.assert_array_equal(loaded.compose(refs, EDITS), trained_pact.compose(refs, EDITS))
    np.testing.assert_array_equal(loaded.compose_empty(refs), trained_pact.compose_empty(refs))
    # re-saving a loaded checkpoint keeps its extra keys but describes the current model
    loaded.chord_lambda = 0.5
    again = json.loads((loaded.save(tmp_path / "again", {"x": 1}, note="n") / "config.json").read_text())
    assert again["chord_lambda"] == 0.5 and again["metrics"] == {"x": 1} and again["extra"]["note"] == "n"
    # q_∅ is "a photo of $", which an empty edit also maps to
    np.testing.assert_allclose(loaded.compose_empty(refs), loaded.compose(refs, [""] * 4), atol=1e-6)


def test_wrong_checkpoints_refused(tiny_backbone, trained_pact, tmp_path):
    folder = trained_pact.save(tmp_path / "ck")
    cfg_path = folder / "config.json"
    good = json.loads(cfg_path.read_text())
    for key, value, match in (("embed_dim", 512, "embed_dim=512"), ("token_width", 768, "token_width=768"),
                              ("arch", {**good["arch"], "mapper_hidden": 64}, "does not fit")):
        cfg_path.write_text(json.dumps({**good, key: value}))
        with pytest.raises(CheckpointError, match=match) as e:
            PACT.from_checkpoint(tiny_backbone, folder)
        assert "\n" not in str(e.value)
    cfg_path.write_text(json.dumps({**good, "method": "dice"}))
    with pytest.raises(CheckpointError, match="not .pact. or .compose-only."):
        PACT.from_checkpoint(tiny_backbone, folder)
    with pytest.raises(CheckpointError, match="config.json missing"):
        PACT.from_checkpoint(tiny_backbone, tmp_path / "nowhere")


def test_compose_only_registered_and_distinct(tiny_backbone, tmp_path):
    names = list_methods()
    assert names[:3] == ["text-only", "image-only", "sum"] and {"pact", "compose-only"} <= set(names)
    assert get_method_class("compose-only") is ComposeOnly and ComposeOnly is not PACT
    assert ComposeOnly.needs_checkpoint and PACT.needs_checkpoint
    m = ComposeOnly(tiny_backbone, {"arch": SMALL})
    cfg = json.loads((m.save(tmp_path / "co") / "config.json").read_text())
    assert cfg["method"] == "compose-only"
    assert type(create_method("compose-only", tiny_backbone, tmp_path / "co")) is ComposeOnly
    with pytest.raises(CheckpointError, match="no checkpoint"):
        create_method("compose-only", tiny_backbone, tmp_path / "missing")


# -- the trainer -----------------------------------------------------------------------------
FAST = {"mapper_lr": 3e-3, "identity_lr": 3e-3, "lora_lr": 1e-3}  # few steps must show progress


def _cfg(tmp_path, steps, **extra):
    from training.train_pact import DEFAULTS

    x = {**SMALL, **FAST, "batch_size": 8, "replay_batch": 4, "identity_steps": 3,
         "joint_steps": 7, "val_queries": 8, "identity_warmup": 0, "joint_warmup": 2,
         "export_dir": str(tmp_path / "export"), "val_cache_root": str(tmp_path / "cache"), **extra}
    return replace(DEFAULTS, steps=steps, out_dir=str(tmp_path / "run"), eval_every=10_000,
                   ckpt_every=10_000, log_every=10_000, threads=0, **x)


@pytest.fixture(scope="module")
def runs(tiny_backbone, tmp_path_factory):
    """One uninterrupted 10-step run (3 identity + 7 joint) and one stopped at 5 then resumed."""
    from training.loop import run
    from training.train_pact import PACTTask

    root = tmp_path_factory.mktemp("pact_runs")
    out = {}
    for name, stops in (("a", [10]), ("b", [5, 10])):
        for steps in stops:
            cfg = _cfg(root / name, steps)
            task = PACTTask(cfg, backbone=tiny_backbone)
            out[name] = (task, run(task, cfg), root / name)
            if steps == 5:
                cfg_file = root / name / "export" / "config.json"
                out["b5"] = json.loads(cfg_file.read_text()) if cfg_file.is_file() else None
    return out


def _fixed_loss(task, batch):
    task.model.eval()
    with torch.no_grad():
        return task.loss(task.model, batch)[0].item()


def test_trainer_reduces_loss(tiny_backbone, tmp_path):
    """20 loop steps (8 identity + 12 joint) on one fixed batch per phase lower both losses."""
    from training.loop import run
    from training.train_pact import PACTTask

    cfg = _cfg(tmp_path, 20, identity_steps=8, joint_steps=12)
    task = PACTTask(cfg, backbone=tiny_backbone)
    fixed = {1: task.batch(0, 0, random.Random("p1")), 2: task.batch(8, 0, random.Random("p2"))}
    assert fixed[2]["caption_mask"].shape == (8, fixed[2]["captions"].shape[0])
    before = {p: _fixed_loss(task, b) for p, b in fixed.items()}
    task.batch = lambda step, rank, rng: fixed[task.phase(step)]
    metrics = run(task, cfg)
    after = {p: _fixed_loss(task, b) for p, b in fixed.items()}
    assert after[1] < before[1] - 0.1 and after[2] < before[2] - 0.1, (before, after)
    assert {"val_cos_R@10", "val_chord_R@10", "val_cos_identity@1", "val_chord_identity@1"} <= set(metrics)


def test_resume_is_exact(runs):
    """10 steps in one go == 5 steps, stop, resume to 10 (CPU: bit-identical weights)."""
    from safetensors.torch import load_file

    a, b = (load_file(str(runs[k][2] / "run" / "last" / "model.safetensors")) for k in "ab")
    assert a.keys() == b.keys() and any(k.endswith(".B") for k in a)
    assert all(torch.equal(a[k], b[k]) for k in a)
    assert all(a[k].abs().sum() > 0 for k in a if k.endswith(".B"))  # phase 2 trained the LoRA
    # the run stopped at 5 of 10 exported nothing; its resumed end did
    assert runs["b5"] is None and (runs["b"][2] / "export" / "config.json").is_file()


def test_export_and_lambda_selection(runs, tiny_backbone):
    folder = runs["a"][2] / "export"
    cfg = json.loads((folder / "config.json").read_text())
    assert cfg["method"] == "pact" and cfg["extra"]["objective"] == "full" and cfg["backbone"] == tiny_backbone.id
    search = cfg["lambda_search"]
    assert search["split"] == "val" and cfg["chord_lambda"] in cfg["training"]["lambda_grid"]
    key = search["criterion"]  # the mean of the world's and the films' val R@10
    assert key == "world+films R@10"
    assert search[key][f"{cfg['chord_lambda']:g}"] == max(search[key].values())
    assert set(cfg["metrics"]["val_chord"]) >= {"R@10", "identity@1"}
    m = create_method("pact", tiny_backbone, folder)
    assert m.chord_lambda == cfg["chord_lambda"]
    refs = tiny_backbone.encode_texts(["a red star"])  # any unit vector of the right size
    trained = runs["a"][0]
    trained.model.eval()
    np.testing.assert_array_equal(m.compose(refs, ["Add a star."]),
                                  trained._method(0.0).compose(refs, ["Add a star."]))


@pytest.mark.parametrize("objective,terms", [
    ("full", {"compose", "preserve", "replay"}), ("compose", {"compose"}),
    ("preserve", {"preserve", "replay"}), ("compose+visual", {"compose", "visual"})])
def test_objectives(runs, tiny_backbone, tmp_path, objective, terms):
    from training.train_pact import PACTTask

    task = PACTTask(_cfg(tmp_path, 10, objective=objective), backbone=tiny_backbone)
    assert task.cfg.method == ("compose-only" if objective == "compose" else "pact")
    shipped = objective in ("full", "compose")
    assert (task.default_export(tmp_path).parent.name == "methods") == shipped
    batch = task.batch(3, 0, random.Random(0))
    loss, logs = task.loss(task.model, batch)
    assert set(logs) == terms | {"loss"} and torch.isfinite(loss)
    assert ("captions" in batch) == (objective != "preserve")
    phase1 = task.loss(task.model, task.batch(0, 0, random.Random(0)))[1]
    assert set(phase1) == {"loss", "identity"}


def test_cache_data(tiny_backbone, train_cache, train_cache_root, tmp_path):
    """data=cache: rows of the shared embed cache, a pure function of the rng, same layout."""
    from training.train_pact import PACTTask

    task = PACTTask(_cfg(tmp_path, 10, data="cache", n_train=48, cache_root=str(train_cache_root)),
                    backbone=tiny_backbone)
    b1, b2 = (task.batch(5, 0, random.Random("same")) for _ in range(2))
    assert all(torch.equal(b1[k], b2[k]) for k in ("ref", "tokens", "captions", "caption_mask"))
    n = len(b1["ref"])
    assert b1["captions"].shape[0] > n and b1["caption_mask"].shape == (n, b1["captions"].shape[0])
    np.testing.assert_allclose(b1["ref"].norm(dim=1), 1, atol=1e-5)
    loss, logs = task.loss(task.model, b1)
    assert torch.isfinite(loss) and set(logs) == {"loss", "compose", "preserve", "replay"}


def test_phase_lrs(tiny_backbone, tmp_path):
    from training.train_pact import PACTTask

    task = PACTTask(_cfg(tmp_path, 10, joint_warmup=0), backbone=tiny_backbone)
    task.cfg.identity_lr, task.cfg.mapper_lr, task.cfg.lora_lr = 1e-4, 3e-5, 1e-5
    opt = torch.optim.AdamW(task.param_groups(task.cfg), lr=1.0)
    task.before_step(0, opt)
    lrs = {g["name"]: g["lr"] for g in opt.param_groups}
    assert lrs == {"mapper": 1e-4, "lora": 0.0} and not task.model.composer.lora_parameters()[0].requires_grad
    task.before_step(3, opt)
    lrs = {g["name"]: g["lr"] for g in opt.param_groups}
    assert lrs == {"mapper": 3e-5, "lora": 1e-5} and task.model.composer.lora_parameters()[0].requires_grad


@pytest.mark.slow  # three fresh processes import torch: ~30 s on 2 CPU cores
@pytest.mark.skipif(os.environ.get("CIR_SKIP_TORCHRUN") == "1", reason="CIR_SKIP_TORCHRUN=1")
def test_torchrun_two_processes_match_one_with_the_same_global_batch(train_cache, train_cache_root, tmp_path):
    """PACT under DDP (gloo, 2 CPU processes, each composing half of every batch against the whole
    batch's keys; a fresh DDP when phase 2 unfreezes the LoRA factors) trains the same weights as
    one process with the same global batch."""
    import subprocess
    import sys

    import torch.distributed
    from safetensors.torch import load_file

    if not torch.distributed.is_available() or not torch.distributed.is_gloo_available():
        pytest.skip("torch.distributed with gloo is unavailable")
    root = Path(__file__).resolve().parents[1]
    # no dropout: its masks are random per process, so only a deterministic model can match
    settings = {**SMALL, **FAST, "mapper_dropout": 0.0, "lora_dropout": 0.0, "backbone": "cir-tiny-vit",
                "data": "cache", "n_train": 48,
                "cache_root": str(train_cache_root), "batch_size": 8, "replay_batch": 4, "identity_steps": 2,
                "joint_steps": 3, "identity_warmup": 0, "joint_warmup": 0, "val_queries": 4,
                "val_cache_root": str(tmp_path / "val"), "eval_every": 1000, "ckpt_every": 1000, "threads": 1,
                "device": "cpu", "precision": "fp32"}
    env = {**os.environ, "OMP_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1"}
    weights = {}
    for name, launcher in (("one", []), ("two", ["-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2"])):
        cfg = tmp_path / f"{name}.json"
        cfg.write_text(json.dumps({**settings, "out_dir": str(tmp_path / name),
                                   "export_dir": str(tmp_path / name / "export")}))
        cmd = [sys.executable, *launcher, "-m", "training.train_pact", "--config", str(cfg)]
        done = subprocess.run(cmd, cwd=root, env=env, capture_output=True, text=True, timeout=400)
        assert done.returncode == 0, done.stderr[-3000:]
        weights[name] = load_file(str(tmp_path / name / "last" / "model.safetensors"))
    assert weights["one"].keys() == weights["two"].keys()
    moved = False
    for k, v in weights["one"].items():
        np.testing.assert_allclose(weights["two"][k].numpy(), v.numpy(), atol=2e-5, err_msg=k)
        moved |= k.endswith(".B") and bool(v.abs().sum() > 0)  # LoRA's B starts at zero
    assert moved  # the LoRA factors trained in phase 2, in both runs
