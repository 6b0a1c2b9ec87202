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
default: the recipe (docs/METHODS.md). `progress_loss` > 0 (needs `prefix_fraction` > 0) adds, for
each such prefix row, a hinge on the prefix of k + 1 sentences (also composed from scratch): the
final target's log-probability against the whole training gallery must not fall when sentence
k + 1 is added (`progress_hinge`), which is what the prefix progression counts.
`direction_loss` > 0 (needs `prefix_target=intermediate`) adds, for the same rows with k + 1 < n,
1 − cos between the query's step (prefix k + 1 minus prefix k, each normalised) and the drawn
step (the image after k + 1 edits minus the image after k; `direction_step`): the step a
composer that draws what it reads would take (`training.progression_oracle`).
`step_negative` w > 0 (needs `prefix_target=intermediate`) adds to each multi-sentence row's
negatives of q_n the image drawn before its last sentence read (`step_negatives`): a row cut to
k sentences gets the image after k − 1 edits (the reference when k = 1), a whole row of n the one
after n − 1, counted w times (log w on its logit); none of these is in the mining bank, so without
it the model never has to tell "the same character, place and company, the old pose" from the new.
`prefix_target=nested` trains a prefix row cut to k sentences against every drawn state that
has read them: the images after k, k + 1, ..., n − 1 edits and the final target, each a positive
of its own against the same negatives (the row's other positives are left out of each one's
denominator, `nested_nce`), so the query of k sentences sits among the states that satisfy them,
and that set narrows onto the final target as k grows, which is what the prefix progression ranks.
`spare_final` (with `prefix_target=intermediate`) keeps a prefix row's own final target out of its
negatives (mined or in the batch): it satisfies every prefix of its text, so the prefix
progression ranks it, while the recipe may mine it against the row's intermediate target.
"""
from __future__ import annotations

import json
import random
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F

from cir_core.methods.pace import PACE, PACEConfig, PACENet, final_state, step_counts

from .heads import EMAWrapper, np_rng
from .registry import CONFIGS, Trainer, register_trainer
from .task import CachedHeadTask, HeadSettings, cli


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
    prefix_target: str = "final"  # what a prefix is trained to find: the final target | intermediate | nested
    progress_loss: float = 0.0  # weight of the k -> k+1 hinge on the prefix rows (0: off, the recipe)
    direction_loss: float = 0.0  # weight of the k -> k+1 step-direction loss on the prefix rows (0: off)
    step_negative: float = 0.0  # copies of the image before the last sentence read, a negative of q_n (0: off)
    spare_final: bool = False  # a prefix row's own final target is never one of its negatives (it satisfies the prefix)


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
    the positive's key (the same scene; pos_keys (B,), or (B, P): any of a row's P keys) are never
    returned."""
    states, positives, bank = states.float(), positives.float(), bank.float()
    B, K1, _ = states.shape
    M = bank.shape[0]
    same = None
    if bank_keys is not None and pos_keys is not None:
        keys = pos_keys.reshape(B, -1)
        same = (bank_keys[None, :, None] == keys[:, None, :]).any(-1)
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


def progress_hinge(before: torch.Tensor, after: torch.Tensor, target: torch.Tensor, t_key: torch.Tensor,
                   bank: torch.Tensor, bank_keys: torch.Tensor, tau: float) -> torch.Tensor:
    """mean relu(lp(before) − lp(after)): lp(q) the log-probability of `target` (B, D) among itself
    and the bank (M, D) under q (B, D) at temperature tau, bank entries with the target's key
    (B,) left out. Zero when adding a sentence (before → after) never lowers the target's lp."""
    def lp(q: torch.Tensor) -> torch.Tensor:
        q = F.normalize(q.float(), dim=-1)
        pos = (q * target.float()).sum(-1, keepdim=True) / tau
        neg = (q @ bank.float().T / tau).masked_fill(bank_keys[None, :] == t_key[:, None], float("-inf"))
        return pos[:, 0] - torch.logsumexp(torch.cat([pos, neg], 1), 1)

    return F.relu(lp(before) - lp(after)).mean()


def direction_step(before: torch.Tensor, after: torch.Tensor, drawn_before: torch.Tensor,
                   drawn_after: torch.Tensor) -> torch.Tensor:
    """mean (1 − cos(norm(after) − norm(before), drawn_after − drawn_before)), rows (B, D): zero
    when each query step points where the drawn images step. A row whose drawn step is zero
    (k + 1 edits drawn as the same image) adds nothing."""
    q = F.normalize(after.float(), dim=-1) - F.normalize(before.float(), dim=-1)
    d = drawn_after.float() - drawn_before.float()
    live = d.norm(dim=-1) > 1e-6
    if not live.any():
        return q.sum() * 0
    return (1 - F.cosine_similarity(q[live], d[live], dim=-1, eps=1e-8)).mean()


def batch_logits(q: torch.Tensor, targets: torch.Tensor, tau: float, same: torch.Tensor | None = None,
                 hard: torch.Tensor | None = None, hard_valid: torch.Tensor | None = None,
                 hard_bias: torch.Tensor | None = None, diagonal: bool = True) -> torch.Tensor:
    """(B, B + C) logits of unit q (B, D): the batch's targets (B, D), those `same` (B, B) marks as
    the row's scene left out, then the valid extra negatives hard (B, C, D), each raised by
    hard_bias (B, C) when given (log w: the negative counted w times). Row b's own target (the
    diagonal) is kept, or with diagonal=False left out; what is left out is -inf."""
    eye = torch.eye(len(q), dtype=torch.bool, device=q.device)
    logits = q @ targets.float().T / tau
    drop = None if same is None else same & ~eye
    if not diagonal:
        drop = eye if drop is None else drop | eye
    if drop is not None:
        logits = logits.masked_fill(drop, float("-inf"))
    if hard is not None and hard.shape[1]:
        h = torch.einsum("bd,bcd->bc", q, hard.float()) / tau
        if hard_bias is not None:
            h = h + hard_bias
        logits = torch.cat([logits, h.masked_fill(~hard_valid, float("-inf"))], 1)
    return logits


def info_nce(q: torch.Tensor, targets: torch.Tensor, tau: float, same: torch.Tensor | None = None,
             hard: torch.Tensor | None = None, hard_valid: torch.Tensor | None = None,
             reduction: str = "mean", hard_bias: torch.Tensor | None = None) -> torch.Tensor:
    """InfoNCE of q (B, D) against the batch's targets (B, D) (row b's positive is target b), the
    other targets unless `same` and the valid `hard` ones as negatives (`batch_logits`)."""
    q = F.normalize(q.float(), dim=-1)
    logits = batch_logits(q, targets, tau, same, hard, hard_valid, hard_bias)
    return F.cross_entropy(logits, torch.arange(len(q), device=q.device), reduction=reduction)


def nested_nce(q: torch.Tensor, targets: torch.Tensor, pos: torch.Tensor, pos_valid: torch.Tensor, tau: float,
               same: torch.Tensor | None = None, hard: torch.Tensor | None = None,
               hard_valid: torch.Tensor | None = None) -> torch.Tensor:
    """InfoNCE with several positives per row, each against the same negatives (`batch_logits`
    without the diagonal) and not against the row's other positives: the mean over a row's valid
    positives pos (B, P, D) of −log(e^{s_p} / (e^{s_p} + Σ e^{s_neg})), then over rows. A row whose
    only positive is its own target (column 0) is `info_nce`'s row."""
    q = F.normalize(q.float(), dim=-1)
    s = torch.einsum("bd,bpd->bp", q, pos.float()) / tau
    neg = torch.logsumexp(batch_logits(q, targets, tau, same, hard, hard_valid, diagonal=False), 1, keepdim=True)
    per = (torch.logaddexp(s, neg) - s).masked_fill(~pos_valid, 0.0)
    return (per.sum(1) / pos_valid.sum(1)).mean()


class PrefixTexts:
    """f_T of every proper prefix of the cache's multi-sentence edits, " ".join(sentences[:k]) for
    1 <= k < n, as `prefix_queries` composes them: k = 1 is the first sentence's own row of the
    cache; 2 <= k < n are encoded once here (the frozen text tower, length-sorted batches)."""

    def __init__(self, cache: Any, backbone: Any):
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
    def __init__(self, cfg: PACESettings, backbone: Any = None):
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
        if cfg.prefix_target not in ("final", "intermediate", "nested"):
            raise SystemExit(f"prefix_target is 'final', 'intermediate' or 'nested', not {cfg.prefix_target!r}")
        if cfg.progress_loss < 0 or (cfg.progress_loss > 0 and cfg.prefix_fraction == 0):
            raise SystemExit(f"progress_loss must be >= 0 and needs prefix_fraction > 0, got {cfg.progress_loss} "
                             f"with prefix_fraction {cfg.prefix_fraction}")
        if cfg.direction_loss < 0 or (cfg.direction_loss > 0 and (cfg.prefix_fraction == 0
                                                                  or cfg.prefix_target != "intermediate")):
            raise SystemExit(f"direction_loss must be >= 0 and needs prefix_fraction > 0 and prefix_target=intermediate "
                             f"(the drawn images after k and k + 1 edits), got {cfg.direction_loss} with prefix_fraction "
                             f"{cfg.prefix_fraction}, prefix_target {cfg.prefix_target!r}")
        if cfg.spare_final and (cfg.prefix_fraction == 0 or cfg.prefix_target != "intermediate"):
            raise SystemExit("spare_final needs prefix_fraction > 0 and prefix_target=intermediate (with final targets "
                             "the final target is the prefix rows' positive already)")
        if cfg.step_negative < 0 or (cfg.step_negative > 0 and (cfg.prefix_fraction == 0
                                                                or cfg.prefix_target != "intermediate")):
            raise SystemExit(f"step_negative must be >= 0 and needs prefix_fraction > 0 and prefix_target=intermediate "
                             f"(the drawn images before the last sentence read), got {cfg.step_negative} with "
                             f"prefix_fraction {cfg.prefix_fraction}, prefix_target {cfg.prefix_target!r}")
        self.prefixes = PrefixTexts(self.cache, self.backbone) if cfg.prefix_fraction > 0 else None
        self.targets = None
        if self.prefixes is not None and cfg.prefix_target in ("intermediate", "nested"):
            from .prefix_targets import PrefixTargets

            self.targets = PrefixTargets(self.cache, self.backbone)

    def batch(self, step: int, rank: int, rng: random.Random) -> dict[str, torch.Tensor]:
        c, g, cfg = self.cache, np_rng(rng), self.cfg
        bs = cfg.batch_size
        n_long = min(len(self.long_pool), int(round(bs * cfg.long_fraction)))
        if not len(self.single_pool):
            n_long = min(len(self.long_pool), bs)
        idx = np.concatenate([g.choice(self.long_pool, n_long, replace=False),
                              g.choice(self.single_pool, min(len(self.single_pool), bs - n_long),
                                       replace=False)])
        n, n_whole = c.n_sentences[idx].copy(), c.n_sentences[idx]
        sents = np.zeros((len(idx), int(n.max()), c.dim), np.float32)
        for r, i in enumerate(idx):
            sents[r, :n[r]] = c.sentences(int(i))
        text, v_t, tkey = c.text(c.edit[idx]), c.image("tgt", idx), c.tgt_key[idx].copy()
        cuts: list[tuple[int, int]] = []  # (row, k) of the rows cut to a prefix
        if self.prefixes is not None:  # some long queries read only their first k < n sentences
            for r in np.flatnonzero((n >= 2) & (g.random(len(idx)) < cfg.prefix_fraction)):
                k = int(g.integers(1, n[r]))
                cuts.append((int(r), k))
                text[r] = self.prefixes.embedding(int(idx[r]), k)
                sents[r, k:] = 0
                n[r] = k
                if self.targets is not None:
                    v_t[r], tkey[r] = self.targets.target(int(idx[r]), k)
        t = lambda a: torch.from_numpy(np.ascontiguousarray(a))  # noqa: E731
        out = {"v_r": t(c.image("ref", idx)), "text": t(text), "sents": t(sents),
               "n": t(step_counts(n, self.arch)), "v_t": t(v_t), "t_key": t(tkey),
               "same": t(tkey[:, None] == tkey[None, :])}
        if cfg.prefix_target == "nested" and cuts:  # every drawn state that has read the prefix is a positive
            pos, pkey, pval = self.nested_positives(idx, cuts, v_t, tkey)
            out.update(pos=t(pos), pos_key=t(pkey), pos_valid=t(pval),
                       same=t((pkey[:, :, None] == tkey[None, None, :]).any(1)))
        if cfg.spare_final:  # the final target satisfies every prefix of its text: never its rows' negative
            fkey = c.tgt_key[idx].copy()
            out.update(f_key=t(fkey), same=t((tkey[:, None] == tkey[None, :]) | (fkey[:, None] == tkey[None, :])))
        if cfg.step_negative > 0:
            img, key, live = self.step_negatives(idx, n_whole, cuts)
            out.update(s_neg=t(img), s_valid=t(live & (key != tkey)))  # a no-op last edit is no negative
        if (cfg.progress_loss > 0 or cfg.direction_loss > 0) and cuts:
            out.update({k: t(v) for k, v in self.next_prefixes(idx, cuts).items()})
            out["p_vk"] = t(v_t[out["p_rows"].numpy()])  # the drawn image after k edits
        if 0 < cfg.bank_size < 2 * len(c):  # a random bank each step; else the whole gallery (loss)
            pick = g.choice(2 * len(c), cfg.bank_size, replace=False)  # rows < N: references, else targets
            ref_rows, tgt_rows = pick[pick < len(c)], pick[pick >= len(c)] - len(c)
            out["bank"] = t(np.concatenate([c.image("ref", ref_rows), c.image("tgt", tgt_rows)]))
            out["bank_keys"] = t(np.concatenate([c.ref_key[ref_rows], c.tgt_key[tgt_rows]]))
        return out

    def nested_positives(self, idx: np.ndarray, cuts: list[tuple[int, int]], v_t: np.ndarray,
                         tkey: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Per batch row, (images (B, P, D), keys (B, P), valid (B, P)): column 0 the row's own
        positive (`v_t`, `tkey`); a row cut to k of n sentences adds the drawn images after
        k + 1, ..., n − 1 edits and the final target (P = the longest such list). Padding repeats
        column 0 with valid False."""
        c = self.cache
        extra = {r: [self.targets.target(int(idx[r]), j) for j in range(k + 1, int(c.n_sentences[idx[r]]))]
                 + [(c.image("tgt", idx[r:r + 1])[0], int(c.tgt_key[idx[r]]))] for r, k in cuts}
        P = 1 + max(len(v) for v in extra.values())
        img = np.repeat(v_t[:, None], P, 1)
        key = np.repeat(tkey[:, None], P, 1)
        valid = np.zeros((len(idx), P), bool)
        valid[:, 0] = True
        for r, more in extra.items():
            for j, (im, kk) in enumerate(more, 1):
                img[r, j], key[r, j], valid[r, j] = im, kk, True
        return img, key, valid

    def step_negatives(self, idx: np.ndarray, n_whole: np.ndarray,
                       cuts: list[tuple[int, int]]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Per batch row, (image (B, D), key (B,), live (B,)): the drawn image before the last
        sentence the row reads: after k − 1 edits for a row cut to k (the reference, k = 1), after
        n − 1 for a whole row of n >= 2; single-sentence rows have none (live False)."""
        c = self.cache
        img, key = np.zeros((len(idx), c.dim), np.float32), np.zeros(len(idx), np.int64)
        live = n_whole >= 2
        last = {r: k for r, k in cuts}
        for r in np.flatnonzero(live):
            i, k = int(idx[r]), last.get(int(r), int(n_whole[r]))
            if k == 1:
                img[r], key[r] = c.image("ref", np.array([i]))[0], c.ref_key[i]
            else:
                img[r], key[r] = self.targets.target(i, k - 1)
        return img, key, live

    def next_prefixes(self, idx: np.ndarray, cuts: list[tuple[int, int]]) -> dict[str, np.ndarray]:
        """For each row cut to k sentences, the prefix of k + 1 (the whole text when k + 1 = n),
        composed from scratch as the prefix protocol composes it, the final target and (with
        intermediate targets) the drawn image after k + 1 edits; when k + 1 = n, the one after k, so
        `direction_step` leaves the row out: a film's final target is another keyframe of another
        shot, not the reference redrawn, and its difference from the drawn prefix is not the step)."""
        c = self.cache
        rows = np.array([r for r, _ in cuts], np.int64)
        ks = np.array([k + 1 for _, k in cuts], np.int64)
        sents = np.zeros((len(cuts), int(ks.max()), c.dim), np.float32)
        text = np.zeros((len(cuts), c.dim), np.float32)
        for j, (r, k) in enumerate(cuts):
            i = int(idx[r])
            sents[j, :k + 1] = c.sentences(i)[:k + 1]
            text[j] = self.prefixes.embedding(i, k + 1) if k + 1 < c.n_sentences[i] else c.text(c.edit[i])
        out = {"p_rows": rows, "p_text": text, "p_sents": sents, "p_n": step_counts(ks, self.arch),
               "p_vt": c.image("tgt", idx[rows]), "p_key": c.tgt_key[idx[rows]].copy()}
        if self.targets is not None:  # k + 1 = n: the drawn step is left out (the target is another keyframe)
            out["p_vk1"] = np.stack([self.targets.target(int(idx[r]), k + 1 if k + 1 < c.n_sentences[idx[r]] else k)[0]
                                     for r, k in cuts])
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
        spared = torch.stack([b["t_key"], b["f_key"]], 1) if "f_key" in b else b.get("pos_key", b["t_key"])
        idx, valid = mine_hard_negatives(states.detach(), b["n"], b["v_t"], bank, keys, spared,
                                         cfg.mine_per_step, cfg.mine_cap)
        hard = bank[idx]  # (B, C, D)
        q_n = final_state(states, b["n"])
        bias = None
        if "s_neg" in b:  # the image before the last sentence read, counted step_negative times
            hard, valid = torch.cat([hard, b["s_neg"][:, None]], 1), torch.cat([valid, b["s_valid"][:, None]], 1)
            bias = torch.zeros(valid.shape, device=dev)
            bias[:, -1] = float(np.log(cfg.step_negative))
        if "pos" in b:
            main = nested_nce(q_n, b["v_t"], b["pos"], b["pos_valid"], tau, b["same"], hard, valid)
        else:
            main = info_nce(q_n, b["v_t"], tau, b["same"], hard, valid, hard_bias=bias)
        total, logs = main, {"nce": main.item(), "hard": valid.float().sum(1).mean().item()}
        w = cfg.step_loss
        if w > 0:
            per = torch.stack([info_nce(states[:, k], b["v_t"], tau, b["same"], hard, valid, "none")
                               for k in range(int(b["n"].max()))], 1)  # (B, max n): q_0..q_{n-1}
            live = torch.arange(per.shape[1], device=dev)[None] < b["n"][:, None]
            step_l = (per * live).sum() / live.sum().clamp(min=1)
            total = total + w * step_l
            logs["step_nce"] = step_l.item()
        if "p_rows" in b:
            after = final_state(model(b["v_r"][b["p_rows"]], b["p_text"], b["p_sents"], b["p_n"]).float(), b["p_n"])
            if cfg.progress_loss > 0:
                prog = progress_hinge(q_n[b["p_rows"]], after, b["p_vt"], b["p_key"], bank, keys, tau)
                total = total + cfg.progress_loss * prog
                logs["progress"] = prog.item()
            if cfg.direction_loss > 0:
                turn = direction_step(q_n[b["p_rows"]], after, b["p_vk"], b["p_vk1"])
                total = total + cfg.direction_loss * turn
                logs["direction"] = turn.item()
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
