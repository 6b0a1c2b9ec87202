"""Train PACE (seed 002) on the frozen-embedding cache of the world's training queries.

    python -m training.train_pace --config training/configs/pace_tiny.json [key=value ...]

Triplets (reference image, long edit, target image): `long_fraction` of each batch are "long"
queries (2–10 sentences), the rest single-sentence ones, so the model sees every length (the
paper stresses robustness to length). Loss: InfoNCE of q_n against the batch's target images
plus multi-step hard negatives: every state q_0..q_n scores a bank of `bank_size` image
embeddings drawn from the cache (other queries' references and targets); at each step the top
`mine_per_step` candidates scoring above the positive are kept, the union over steps is capped
at `mine_cap` (the ones q_n scores highest) and added as extra negatives of q_n. A bank entry
showing the target's own scene is never a negative. `step_loss` > 0 adds the same InfoNCE on
every intermediate state q_0..q_{n−1} (averaged; 0 by default: the paper trains q_n).
`prefix_fraction` > 0 trains that share of the long queries of each batch on a random prefix of
their text instead (sentences 1..k, k < n, composed from scratch as the prefix protocol and the
app's per-sentence progression compose it), against the final target (`prefix_target=final`) or
against the image after its first k edits (`intermediate`, `training.prefix_targets`); 0 by
default, 0.5 with intermediate targets in the tiny recipe (docs/METHODS.md).

This module holds the shipped recipe only. The levers tried on it and refused (a progress hinge,
a step-direction loss, step negatives, sparing the final target, nested prefix targets) are in
docs/experiments/pace.md, with their rules, results and the commits that held their code.
"""
from __future__ import annotations

import json
import random
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import torch
import torch.nn.functional as F

from cir_core.encoder import Encoder, Towers
from cir_core.methods.pace import PACE, PACEConfig, PACENet, final_state, step_counts

from .heads import EMAWrapper, np_rng
from .registry import CONFIGS, Trainer, register_trainer
from .task import CachedHeadTask, HeadSettings, cli

if TYPE_CHECKING:
    from .embed_cache import TrainEmbeddings


@dataclass
class PACESettings(HeadSettings, PACEConfig):
    """The PACE trainer's settings: the loop's and the heads', the architecture (`PACEConfig`),
    the length mix and the multi-step hard-negative mining."""

    steps: int = 10000
    lr: float = 1e-3
    weight_decay: float = 0.05
    warmup: int = 500
    eval_every: int = 2000
    ckpt_every: int = 1000
    out_dir: str = "runs/pace"
    export_dir: str | None = "assets/methods/pace"
    batch_size: int = 256
    ema: float = 0.999
    long_fraction: float = 0.6
    tau: float = 0.05
    bank_size: int = 0  # 0: the whole training gallery (every reference and target), as seed 002; N: a random bank of N
    mine_per_step: int = 8
    mine_cap: int = 64
    step_loss: float = 0.0
    prefix_fraction: float = 0.0
    prefix_target: str = "final"  # what a prefix is trained to find: the final target | intermediate


DEFAULTS = PACESettings()
register_trainer(Trainer("pace", "training.train_pace", f"{CONFIGS}/pace_tiny.json", "pace", f"{CONFIGS}/pace_vitl14.json",
                         "PACETask", "embed-cache", run_dir="runs/pace"))


@torch.no_grad()
def mine_hard_negatives(states: torch.Tensor, n: torch.Tensor, positives: torch.Tensor,
                        bank: torch.Tensor, bank_keys: torch.Tensor | None = None,
                        pos_keys: torch.Tensor | None = None, per_step: int = 8,
                        cap: int = 64) -> tuple[torch.Tensor, torch.Tensor]:
    """Multi-step hard negatives. states (B, K+1, D): q_0..q_K (rows valid up to n_b);
    positives (B, D); bank (M, D). Returns (idx (B, C) into the bank, valid (B, C) bool): the
    union over valid steps of each step's top-`per_step` bank entries that score above the
    positive, capped at C = min(cap, M) entries ranked by q_n's score. Entries whose key equals
    the positive's key (the same scene) are never returned."""
    states, positives, bank = states.float(), positives.float(), bank.float()
    B, K1, _ = states.shape
    M = bank.shape[0]
    same = (bank_keys[None, :] == pos_keys[:, None]) if bank_keys is not None and pos_keys is not None else None
    hits = torch.zeros(B, M, device=bank.device)
    final = torch.empty(B, M, device=bank.device)
    for k in range(K1):  # one step at a time: (rows, M) scores, whatever the bank's size
        rows = (k <= n).nonzero().squeeze(1)  # only queries that have a step k: most are short
        if not len(rows):
            break
        scores = states[rows, k] @ bank.T
        last = n[rows] == k
        final[rows[last]] = scores[last]  # q_n's scores rank the union
        above = scores > (states[rows, k] * positives[rows]).sum(-1, keepdim=True)
        if same is not None:
            above &= ~same[rows]
        top_v, top_i = scores.masked_fill(~above, float("-inf")).topk(min(per_step, M), dim=-1)
        hits.view(-1).index_add_(0, (rows[:, None] * M + top_i).reshape(-1), torch.isfinite(top_v).float().reshape(-1))
    v, idx = final.masked_fill(hits == 0, float("-inf")).topk(min(cap, M), dim=-1)
    return idx, torch.isfinite(v)


def info_nce(q: torch.Tensor, targets: torch.Tensor, tau: float, same: torch.Tensor | None = None,
             hard: torch.Tensor | None = None, hard_valid: torch.Tensor | None = None,
             reduction: str = "mean") -> torch.Tensor:
    """InfoNCE of q (B, D) against the batch's targets (B, D) (row b's positive is target b),
    plus per-row extra negatives hard (B, C, D) where hard_valid. `same` (B, B) marks pairs of
    rows with the same target scene (not negatives of each other)."""
    q = F.normalize(q.float(), dim=-1)
    logits = q @ targets.float().T / tau
    if same is not None:
        logits = logits.masked_fill(same & ~torch.eye(len(q), dtype=torch.bool, device=q.device),
                                    float("-inf"))
    if hard is not None and hard.shape[1]:
        h = torch.einsum("bd,bcd->bc", q, hard.float()) / tau
        logits = torch.cat([logits, h.masked_fill(~hard_valid, float("-inf"))], 1)
    return F.cross_entropy(logits, torch.arange(len(q), device=q.device), reduction=reduction)


class PrefixTexts:
    """f_T of every proper prefix of the cache's multi-sentence edits, " ".join(sentences[:k]) for
    1 <= k < n, as `prefix_queries` composes them: k = 1 is the first sentence's own row of the
    cache; 2 <= k < n are encoded once here (the frozen text tower, length-sorted batches)."""

    def __init__(self, cache: TrainEmbeddings, backbone: Encoder):
        from .embed_cache import encode_texts_by_length

        strings = json.loads((cache.folder / "texts.json").read_text())
        self.cache, counts, texts = cache, np.maximum(cache.n_sentences - 2, 0), []
        self.off = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
        for i in np.flatnonzero(counts):
            sent = [strings[j] for j in cache.sent_idx[cache.sent_off[i]:cache.sent_off[i + 1]]]
            texts += [" ".join(sent[:k]) for k in range(2, len(sent))]
        self.emb = encode_texts_by_length(backbone, texts) if texts else np.zeros((0, cache.dim), np.float16)

    def embedding(self, i: int, k: int) -> np.ndarray:
        """(D,) float32 f_T of query i's first k sentences (1 <= k < n_i)."""
        n = int(self.cache.n_sentences[i])
        if not 1 <= k < n:
            raise ValueError(f"query {i} has {n} sentences: no proper prefix of {k}")
        if k == 1:
            return self.cache.text(self.cache.sent_idx[self.cache.sent_off[i]])
        return self.emb[self.off[i] + k - 2].astype(np.float32)


class PACETask(CachedHeadTask):
    def __init__(self, cfg: PACESettings, backbone: Towers | None = None):
        self.setup(cfg, backbone)
        if not self.cache.has_target_images:
            raise SystemExit(f"PACE trains on (reference, text, target image) triplets; data={cfg.data!r} has no "
                             "target images (ITT has captions only): use cirr:ROOT, fashioniq:ROOT or lcirr:ROOT")
        self.arch = PACEConfig.from_dict(cfg.to_dict())
        torch.manual_seed(cfg.seed)
        self.model = EMAWrapper(PACENet(self.backbone.dim, self.arch), cfg.ema)
        self.evaluated = PACE(self.backbone, {"arch": self.arch.to_dict()})  # receives the EMA weights
        nsent = self.cache.n_sentences
        self.long_pool = np.flatnonzero(nsent >= 2)
        self.single_pool = np.flatnonzero(nsent == 1)
        if not 0.0 <= cfg.prefix_fraction <= 1.0:
            raise SystemExit(f"prefix_fraction must be in [0, 1], got {cfg.prefix_fraction}")
        if cfg.prefix_target not in ("final", "intermediate"):
            raise SystemExit(f"prefix_target is 'final' or 'intermediate', not {cfg.prefix_target!r}")
        self.prefixes = PrefixTexts(self.cache, self.backbone) if cfg.prefix_fraction > 0 else None
        self.targets = None
        if self.prefixes is not None and cfg.prefix_target == "intermediate":
            from .prefix_targets import PrefixTargets

            self.targets = PrefixTargets(self.cache, self.backbone)

    def pick(self, g: np.random.Generator) -> np.ndarray:
        """The cache rows of one batch: `long_fraction` of it drawn from the multi-sentence
        queries, the rest from the single-sentence ones (all long when there are none)."""
        bs = self.cfg.batch_size
        n_long = min(len(self.long_pool), int(round(bs * self.cfg.long_fraction)))
        if not len(self.single_pool):
            n_long = min(len(self.long_pool), bs)
        return np.concatenate([g.choice(self.long_pool, n_long, replace=False),
                               g.choice(self.single_pool, min(len(self.single_pool), bs - n_long),
                                        replace=False)])

    def batch(self, step: int, rank: int, rng: random.Random) -> dict[str, torch.Tensor]:
        c, g, cfg = self.cache, np_rng(rng), self.cfg
        idx = self.pick(g)
        n = c.n_sentences[idx].copy()
        sents = np.zeros((len(idx), int(n.max()), c.dim), np.float32)
        for r, i in enumerate(idx):
            sents[r, :n[r]] = c.sentences(int(i))
        text, v_t, tkey = c.text(c.edit[idx]), c.image("tgt", idx), c.tgt_key[idx].copy()
        if self.prefixes is not None:  # some long queries read only their first k < n sentences
            for r in np.flatnonzero((n >= 2) & (g.random(len(idx)) < cfg.prefix_fraction)):
                k = int(g.integers(1, n[r]))
                text[r] = self.prefixes.embedding(int(idx[r]), k)
                sents[r, k:] = 0
                n[r] = k
                if self.targets is not None:
                    v_t[r], tkey[r] = self.targets.target(int(idx[r]), k)
        t = lambda a: torch.from_numpy(np.ascontiguousarray(a))  # noqa: E731
        out = {"v_r": t(c.image("ref", idx)), "text": t(text), "sents": t(sents),
               "n": t(step_counts(n, self.arch)), "v_t": t(v_t), "t_key": t(tkey),
               "same": t(tkey[:, None] == tkey[None, :])}
        if 0 < cfg.bank_size < 2 * len(c):  # a random bank each step; else the whole gallery (loss)
            pick = g.choice(2 * len(c), cfg.bank_size, replace=False)  # rows < N: references, else targets
            ref_rows, tgt_rows = pick[pick < len(c)], pick[pick >= len(c)] - len(c)
            out["bank"] = t(np.concatenate([c.image("ref", ref_rows), c.image("tgt", tgt_rows)]))
            out["bank_keys"] = t(np.concatenate([c.ref_key[ref_rows], c.tgt_key[tgt_rows]]))
        return out

    def whole_bank(self) -> tuple[torch.Tensor, torch.Tensor]:
        """Every training image (references and targets) and its scene key, built once."""
        if getattr(self, "_bank", None) is None:
            c, every = self.cache, np.arange(len(self.cache))
            self._bank = (torch.from_numpy(np.concatenate([c.image("ref", every), c.image("tgt", every)])),
                          torch.from_numpy(np.concatenate([c.ref_key, c.tgt_key])))
        return self._bank

    def loss(self, model, batch) -> tuple[torch.Tensor, dict[str, float]]:
        dev = next(self.model.parameters()).device
        b = {k: v.to(dev) for k, v in batch.items()}
        cfg = self.cfg
        tau = cfg.tau
        states = model(b["v_r"], b["text"], b["sents"], b["n"]).float()  # (B, K+1, D)
        bank, keys = (b["bank"], b["bank_keys"]) if "bank" in b else (t.to(dev) for t in self.whole_bank())
        idx, valid = mine_hard_negatives(states.detach(), b["n"], b["v_t"], bank, keys, b["t_key"],
                                         cfg.mine_per_step, cfg.mine_cap)
        hard = bank[idx]  # (B, C, D)
        q_n = final_state(states, b["n"])
        main = info_nce(q_n, b["v_t"], tau, b["same"], hard, valid)
        total, logs = main, {"nce": main.item(), "hard": valid.float().sum(1).mean().item()}
        w = cfg.step_loss
        if w > 0:
            per = torch.stack([info_nce(states[:, k], b["v_t"], tau, b["same"], hard, valid, "none")
                               for k in range(int(b["n"].max()))], 1)  # (B, max n): q_0..q_{n-1}
            live = torch.arange(per.shape[1], device=dev)[None] < b["n"][:, None]
            step_l = (per * live).sum() / live.sum().clamp(min=1)
            total = total + w * step_l
            logs["step_nce"] = step_l.item()
        with torch.no_grad():
            q = F.normalize(q_n, dim=-1)
            logs["acc"] = ((q @ b["v_t"].T).argmax(1) == torch.arange(len(q), device=dev)).float().mean().item()
        logs["loss"] = total.item()
        self.last_logs = logs
        return total, logs


def main(argv: list[str] | None = None) -> dict:
    return cli(PACETask, DEFAULTS, argv, __doc__)


if __name__ == "__main__":
    main()
