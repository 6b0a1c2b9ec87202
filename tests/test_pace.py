"""PACE: one accumulation step per sentence, batching, multi-step hard-negative mining, trainer."""
import json
import random

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from safetensors.torch import load_file

from cir_core.errors import CheckpointError
from cir_core.methods import create_method
from cir_core.methods.pace import PACE
from training.loop import run
from training.train_pace import DEFAULTS, PACETask, info_nce, mine_hard_negatives

pytestmark = pytest.mark.usefixtures("one_thread")
TEXTS = ["Make the square blue.", "Paint the cross black. Add a big purple triangle. Move left.",
         "", "Put it in a forest. Make the circle small.", "at night"]


@pytest.fixture
def pace(tiny_backbone):
    """A PACE whose residual branches are not zero (as trained ones are not)."""
    torch.manual_seed(0)
    m = PACE(tiny_backbone)
    for mlp in (m.module.fusion, m.module.accumulator):
        torch.nn.init.normal_(mlp.wp.weight, std=0.05)
    return m


def refs(n, dim, seed=0):
    r = np.random.default_rng(seed).standard_normal((n, dim)).astype(np.float32)
    return r / np.linalg.norm(r, axis=1, keepdims=True)


def test_one_step_per_sentence(pace, tiny_backbone):
    ref = refs(1, tiny_backbone.dim)[0]
    assert len(pace.steps(ref, TEXTS[1])) == 3 + 1  # q_0..q_3
    assert len(pace.steps(ref, TEXTS[0])) == 2  # a single sentence is one step
    assert len(pace.steps(ref, "")) == 1  # no sentence: q_0 only
    sents = ["Paint the cross black.", "Add a big purple triangle.", "Move left."]
    prog = pace.progression(ref, sents)
    assert len(prog) == 3 and all(p.shape == (tiny_backbone.dim,) for p in prog)
    steps = pace.steps(ref, TEXTS[1])
    for a, b in zip(prog, steps[1:]):
        np.testing.assert_allclose(a, b, atol=1e-6)
    assert not np.allclose(steps[1], steps[2], atol=1e-4)  # each step changes the query
    np.testing.assert_allclose(np.linalg.norm(np.stack(steps), axis=1), 1, atol=1e-5)


def test_short_direct_processes_a_single_sentence_by_the_fusion_alone(pace, tiny_backbone):
    """seed 002: "processing short queries directly"; longer texts still take a step per sentence."""
    direct = PACE(tiny_backbone, {"arch": {**pace.arch.to_dict(), "short_direct": True}}, module=pace.module)
    r = refs(2, tiny_backbone.dim)
    one, many = TEXTS[0], TEXTS[1]
    assert len(direct.steps(r[0], one)) == 1 and len(direct.steps(r[0], many)) == 4
    np.testing.assert_allclose(direct.compose(r[:1], [one])[0], pace.steps(r[0], one)[0], atol=1e-6)  # q_0
    np.testing.assert_allclose(direct.compose(r[1:], [many])[0], pace.compose(r[1:], [many])[0], atol=1e-6)
    prog = direct.progression(r[0], [one])
    assert len(prog) == 1 and np.allclose(prog[0], direct.steps(r[0], one)[0])
    q, steps = direct.compose_with_steps(r[:1], one, [one])
    assert len(steps) == 1 and np.allclose(q[0], steps[0], atol=1e-6)
    assert not np.allclose(direct.compose(r[:1], [one]), pace.compose(r[:1], [one]), atol=1e-4)


def test_batched_compose_equals_one_by_one(pace, tiny_backbone):
    r = refs(len(TEXTS), tiny_backbone.dim)
    q = pace.compose(r, TEXTS)  # mixed lengths: padded and masked
    for i, t in enumerate(TEXTS):
        np.testing.assert_allclose(q[i], pace.steps(r[i], t)[-1], atol=1e-5)
    np.testing.assert_allclose(pace.compose_empty(r)[2], q[2], atol=1e-6)  # q_∅ = q_0("")


def test_untrained_pace_is_the_sum_baseline(tiny_backbone):
    r = refs(2, tiny_backbone.dim)
    q = PACE(tiny_backbone).compose(r, TEXTS[:2])
    s = create_method("sum", tiny_backbone).compose(r, TEXTS[:2])
    np.testing.assert_allclose(q, s, atol=1e-5)


def _mine_every_row(states, n, positives, bank, bank_keys, pos_keys, per_step, cap):
    """The mining rule written plainly: every query at every step, then masked (the reference the
    row-restricted implementation must equal)."""
    B, K1, _ = states.shape
    hits = torch.zeros(B, len(bank))
    final = torch.empty(B, len(bank))
    same = bank_keys[None, :] == pos_keys[:, None]
    for k in range(K1):
        scores = states[:, k] @ bank.T
        final[n == k] = scores[n == k]
        above = (scores > (states[:, k] * positives).sum(-1, keepdim=True)) & (k <= n)[:, None] & ~same
        top_v, top_i = scores.masked_fill(~above, float("-inf")).topk(per_step, dim=-1)
        hits.scatter_add_(1, top_i, torch.isfinite(top_v).float())
    v, idx = final.masked_fill(hits == 0, float("-inf")).topk(cap, dim=-1)
    return idx, torch.isfinite(v)


def test_mining_equals_the_plain_rule_on_mixed_lengths():
    g = torch.Generator().manual_seed(3)
    B, K1, D, M = 24, 6, 16, 300
    n = torch.randint(0, K1, (B,), generator=g)
    n[:5] = 0  # short queries: one state only
    states = F.normalize(torch.randn(B, K1, D, generator=g), dim=-1)
    bank = F.normalize(torch.randn(M, D, generator=g), dim=-1)
    pos = F.normalize(states[:, 0] + 0.5 * torch.randn(B, D, generator=g), dim=-1)
    keys = torch.randint(0, 50, (M,), generator=g)
    pk = keys[torch.randint(0, M, (B,), generator=g)]
    want = _mine_every_row(states, n, pos, bank, keys, pk, 4, 12)
    idx, valid = mine_hard_negatives(states, n, pos, bank, keys, pk, 4, 12)
    assert torch.equal(valid, want[1]) and torch.equal(idx[valid], want[0][want[1]])
    assert valid.any(1).sum() > B // 2  # the comparison is not vacuous


def test_mining_hand_made_bank():
    e = torch.eye(5)
    pos = e[[0]]  # the target
    q0 = F.normalize(e[1] + 0.5 * e[0], dim=0)  # step 0 prefers bank entry 1 (e1) to the target
    q1 = F.normalize(e[2] + 0.5 * e[0], dim=0)  # step 1 prefers entry 2 (e2)
    states = torch.stack([q0, q1])[None]  # (1, 2, D): q_0, q_1
    bank = torch.stack([e[0], e[1], e[2], e[3], -e[1], F.normalize(e[0] + 0.3 * e[1], dim=0)])
    keys = torch.tensor([7, 1, 2, 3, 4, 7])  # entries 0 and 5 show the target's scene (key 7)
    n = torch.tensor([1])
    idx, valid = mine_hard_negatives(states, n, pos, bank, keys, torch.tensor([7]), per_step=4, cap=8)
    assert set(idx[valid].tolist()) == {1, 2}  # union over steps; never the target's scene
    # without keys, entry 5 (a re-render of the target) ranks above the positive and is mined
    idx, valid = mine_hard_negatives(states, n, pos, bank, per_step=4, cap=8)
    assert 5 in idx[valid].tolist() and 0 not in idx[valid].tolist()
    # n = 0: only q_0 counts
    idx, valid = mine_hard_negatives(states, torch.tensor([0]), pos, bank, keys, torch.tensor([7]), 4, 8)
    assert set(idx[valid].tolist()) == {1}
    # the cap keeps what q_n scores highest: e2 under q_1
    idx, valid = mine_hard_negatives(states, n, pos, bank, keys, torch.tensor([7]), 4, 1)
    assert idx[valid].tolist() == [2]
    # every returned candidate beats the positive at some step
    scores = states[0] @ bank.T
    for j in idx[valid].tolist():
        assert (scores[:, j] > (states[0] @ pos[0])).any()


def test_info_nce_with_hard_negatives():
    q = torch.eye(3)
    t = torch.eye(3)
    base = info_nce(q, t, 0.1).item()
    none = info_nce(q, t, 0.1, hard=torch.zeros(3, 2, 3), hard_valid=torch.zeros(3, 2, dtype=torch.bool))
    assert none.item() == pytest.approx(base, abs=1e-6)
    hard = q[:, None].repeat(1, 1, 1) * 0.99  # a near-copy of the query: a very hard negative
    assert info_nce(q, t, 0.1, hard=hard, hard_valid=torch.ones(3, 1, dtype=torch.bool)).item() > base + 0.5


def test_trainer_reduces_loss_on_a_fixed_batch(head_cfg, tiny_backbone):
    cfg = head_cfg(DEFAULTS, bank_size=64, step_loss=0.5, long_fraction=0.5)
    task = PACETask(cfg, tiny_backbone)
    batch = task.batch(0, 0, random.Random(0))
    assert int(batch["n"].max()) >= 2 and int(batch["n"].min()) == 1  # long and single mixed
    opt = torch.optim.AdamW(task.param_groups(cfg), lr=1e-3)
    first = None
    for _ in range(25):
        loss, logs = task.loss(task.model, batch)
        first = first if first is not None else loss.item()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(task.model.parameters(), 1.0)
        opt.step()
        opt.zero_grad()
    assert {"nce", "hard", "step_nce", "acc"} <= set(logs)
    assert loss.item() < 0.6 * first  # mined negatives change as it learns: not monotone


def test_end_to_end_export_and_reload(head_cfg, tiny_backbone, tmp_path):
    cfg = head_cfg(DEFAULTS, steps=3, val_queries=8, bank_size=64, lambda_grid=[0.1, 0.34])
    run(PACETask(cfg, tiny_backbone), cfg)
    conf = json.loads((tmp_path / "export" / "config.json").read_text())
    assert conf["method"] == "pace" and conf["chord_lambda"] in (0.1, 0.34)
    assert "val_R@10[long]" in conf["metrics"]
    m = create_method("pace", tiny_backbone, tmp_path / "export")
    r = refs(len(TEXTS), tiny_backbone.dim)
    q = m.compose(r, TEXTS)
    again = PACE.from_checkpoint(tiny_backbone, m.save(tmp_path / "again"))
    np.testing.assert_array_equal(again.compose(r, TEXTS), q)
    np.testing.assert_array_equal(again.progression(r[1], ["A b.", "C d."])[1],
                                  m.progression(r[1], ["A b.", "C d."])[1])


def test_resume_equals_uninterrupted(head_cfg, tiny_backbone, tmp_path):
    def go(steps, out):
        cfg = head_cfg(DEFAULTS, steps=steps, out_dir=str(out), export_dir=str(out / "export"),
                       bank_size=64, ema=0.9, schedule="constant", ckpt_every=1)
        run(PACETask(cfg, tiny_backbone), cfg)
        return load_file(str(out / "last" / "model.safetensors"))

    whole = go(4, tmp_path / "a")
    go(2, tmp_path / "b")
    resumed = go(4, tmp_path / "b")
    for k in whole:
        torch.testing.assert_close(resumed[k], whole[k], rtol=0, atol=0)


def test_refuses_another_dimension(tiny_backbone, tmp_path):
    from types import SimpleNamespace

    folder = PACE(tiny_backbone).save(tmp_path / "ck", metrics={})
    cfg = json.loads((folder / "config.json").read_text())
    assert cfg["embed_dim"] == tiny_backbone.dim and "hidden_mult" in cfg["arch"]
    with pytest.raises(CheckpointError, match="dimension"):
        PACE.from_checkpoint(SimpleNamespace(dim=64, id="small@x", device="cpu"), folder)


def test_mining_over_the_whole_gallery_equals_a_bank_of_every_image(head_cfg, tiny_backbone):
    """bank_size=0 mines every training image (seed 002); step by step it equals the one-shot
    definition on a bank holding them all."""
    from training.train_pace import DEFAULTS, PACETask, mine_hard_negatives

    task = PACETask(head_cfg(DEFAULTS, bank_size=0), tiny_backbone)
    b = task.batch(0, 0, random.Random(0))
    assert "bank" not in b
    bank, keys = task.whole_bank()
    assert len(bank) == 2 * len(task.cache)
    states = task.model(b["v_r"], b["text"], b["sents"], b["n"]).detach()
    idx, valid = mine_hard_negatives(states, b["n"], b["v_t"], bank, keys, b["t_key"], 8, 64)
    scores = torch.einsum("bkd,md->bkm", states, bank)
    pos = torch.einsum("bkd,bd->bk", states, b["v_t"])
    for r in range(len(idx)):
        for j in idx[r][valid[r]].tolist():
            assert keys[j] != b["t_key"][r]
            assert (scores[r, : int(b["n"][r]) + 1, j] > pos[r, : int(b["n"][r]) + 1]).any()
    task.loss(task.model, b)  # the loss runs on the whole bank


def test_prefix_training_reads_each_prefix_as_the_prefix_protocol_composes_it(head_cfg, tiny_backbone):
    """prefix_fraction=1: every long query of the batch is cut to its first k < n sentences, its
    text embedding f_T(" ".join(sentences[:k])) as `prefix_queries` encodes it, the target kept;
    the prefix draws come after the recipe's, so both pick the same queries for the same seed."""
    from training.train_pace import PrefixTexts

    recipe = PACETask(head_cfg(DEFAULTS, bank_size=64, long_fraction=0.5), tiny_backbone)
    cut = PACETask(head_cfg(DEFAULTS, bank_size=64, long_fraction=0.5, prefix_fraction=1.0), tiny_backbone)
    assert recipe.prefixes is None
    a, b = recipe.batch(0, 0, random.Random(5)), cut.batch(0, 0, random.Random(5))
    torch.testing.assert_close(a["v_t"], b["v_t"], rtol=0, atol=0)  # same queries, same targets
    c, strings = cut.cache, json.loads((cut.cache.folder / "texts.json").read_text())
    long_rows = [r for r in range(len(a["n"])) if int(a["n"][r]) >= 2]
    assert long_rows, "the batch has long queries"
    for r in long_rows:
        i = cache_row(c, a, r)
        k = int(b["n"][r])
        assert 1 <= k < int(a["n"][r])  # short_direct is off in this recipe: n counts sentences
        sent = [strings[j] for j in c.sent_idx[c.sent_off[i]:c.sent_off[i + 1]]]
        want = tiny_backbone.encode_texts([" ".join(sent[:k])])[0]
        np.testing.assert_allclose(b["text"][r].numpy(), want, atol=2e-3)  # float16 storage
        assert not b["sents"][r, k:].any() and torch.equal(b["sents"][r, :k], a["sents"][r, :k])
    longest = int(np.argmax(c.n_sentences))
    with pytest.raises(ValueError, match="no proper prefix"):
        PrefixTexts(c, tiny_backbone).embedding(longest, int(c.n_sentences[longest]))


def cache_row(cache, batch, r):
    """The cache query behind row r of a batch drawn with the recipe (its final target intact),
    found by its reference image, text and target image together; queries that match all three are
    the same query drawn twice by the stream (their sentences must agree too)."""
    every = np.arange(len(cache))
    pair = np.concatenate([cache.image("ref", every), cache.text(cache.edit[every]), cache.image("tgt", every)], 1)
    d = np.abs(pair - np.concatenate([batch["v_r"][r].numpy(), batch["text"][r].numpy(),
                                      batch["v_t"][r].numpy()])).sum(1)
    i, same = int(np.argmin(d)), np.flatnonzero(d == 0)
    assert d[i] == 0 and all(np.array_equal(cache.sentences(int(j)), cache.sentences(i)) for j in same)
    return i


def test_pace_trains_a_prefix_against_its_intermediate_target(head_cfg, tiny_backbone, train_cache):
    cfg = head_cfg(DEFAULTS, bank_size=64, long_fraction=0.5, prefix_fraction=1.0, prefix_target="intermediate")
    task, plain = PACETask(cfg, tiny_backbone), PACETask(head_cfg(DEFAULTS, bank_size=64, long_fraction=0.5),
                                                         tiny_backbone)
    a, b = plain.batch(0, 0, random.Random(3)), task.batch(0, 0, random.Random(3))
    cut = [r for r in range(len(a["n"])) if int(b["n"][r]) < int(a["n"][r])]
    assert cut
    for r in cut:
        i = cache_row(train_cache, a, r)
        img, key = task.targets.target(i, int(b["n"][r]))  # after exactly the k sentences it reads
        np.testing.assert_array_equal(b["v_t"][r].numpy(), img)
        assert int(b["t_key"][r]) == key != int(a["t_key"][r])
    keys = b["t_key"].numpy()
    np.testing.assert_array_equal(b["same"].numpy(), keys[:, None] == keys[None, :])  # built from the new keys
    loss, _ = task.loss(task.model, b)
    assert np.isfinite(loss.item())
    with pytest.raises(SystemExit, match="'final' or 'intermediate'"):
        PACETask(head_cfg(DEFAULTS, prefix_fraction=0.5, prefix_target="middle"), tiny_backbone)


def test_the_shipped_recipe_loads_and_a_refused_lever_is_an_unknown_key():
    """pace_tiny.json holds the shipped recipe only; the levers tried and refused
    (docs/experiments/pace.md) are gone from the trainer, so asking for one is an error naming it,
    never a silently ignored setting."""
    from pathlib import Path

    from training.loop import parse_cli

    recipe = str(Path(__file__).resolve().parents[1] / "training" / "configs" / "pace_tiny.json")
    cfg, _, _ = parse_cli(DEFAULTS, ["--config", recipe], None)
    assert (cfg.prefix_fraction, cfg.prefix_target, cfg.n_train, cfg.bank_size) == (0.5, "intermediate", 80000, 0)
    for lever in ("progress_loss=1", "direction_loss=1", "step_negative=8", "spare_final=true"):
        with pytest.raises(SystemExit, match=lever.split("=")[0]):
            parse_cli(DEFAULTS, ["--config", recipe, lever], None)
