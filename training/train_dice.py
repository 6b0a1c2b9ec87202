"""Train DiCE (seed 001 §III-C) on the frozen-embedding cache of the world's training queries.

    python -m training.train_dice --config training/configs/dice_tiny.json [key=value ...]

Each sample (z_r^img, z_r^txt, z_e, z_t) is used twice, once per reference modality. Losses:
  align  1 − cos(ẑ, z_t)
  delta  1 − cos(ẑ − z_r^img, z_t − z_r^txt)        (ẑ unit-normalised first, see below)
  ctr    InfoNCE of ẑ against the batch's target captions, τ = 0.07
weighted 1 / 1 / 0.2 (`w_align`, `w_delta`, `w_ctr`: 0 drops a loss, the paper's ablations).
AdamW lr 5e-3, wd 0.05, warmup then constant, EMA of the weights (`ema`, 0 disables); the
exported checkpoint holds the EMA weights and the Chord λ chosen on val.
"""
from __future__ import annotations

import random
from dataclasses import dataclass

import torch
import torch.nn.functional as F

from cir_core.encoder import Towers
from cir_core.methods.dice import DiCE, DiCEConfig, DiCENet

from .heads import EMAWrapper, np_rng
from .registry import CONFIGS, Trainer, register_trainer
from .task import CachedHeadTask, HeadSettings, cli


@dataclass
class DiCESettings(HeadSettings, DiCEConfig):
    """The DiCE trainer's settings: the loop's and the heads' (paper defaults: 20k steps, 4k
    warmup, batch 512; dice_vitl14.json keeps those, dice_tiny.json scales down), the
    architecture (`DiCEConfig`), and the losses."""

    steps: int = 20000
    lr: float = 5e-3
    weight_decay: float = 0.05
    warmup: int = 4000
    schedule: str = "constant"
    eval_every: int = 2000
    ckpt_every: int = 1000
    out_dir: str = "runs/dice"
    export_dir: str | None = "assets/methods/dice"
    w_align: float = 1.0
    w_delta: float = 1.0
    w_ctr: float = 0.2
    tau: float = 0.07
    delta_ref: str = "img"  # img | own (the reference modality of each instance)
    delta_normalise: bool = True


DEFAULTS = DiCESettings()
register_trainer(Trainer("dice", "training.train_dice", f"{CONFIGS}/dice_tiny.json", "dice", f"{CONFIGS}/dice_vitl14.json",
                         "DiCETask", "embed-cache", run_dir="runs/dice"))


def dice_losses(z_hat: torch.Tensor, z_img: torch.Tensor, z_txt: torch.Tensor, z_t: torch.Tensor,
                tau: float = 0.07, same_target: torch.Tensor | None = None,
                delta_ref: torch.Tensor | None = None, normalise: bool = True) -> dict[str, torch.Tensor]:
    """The three DiCE losses for R instances over B samples (R a multiple of B: instance r is
    sample r mod B). z_hat (R, D); z_img, z_txt, z_t (B, D). `same_target` (B, B) marks pairs of
    samples with the same target caption (not negatives of each other); `delta_ref` (R, D)
    replaces z_r^img in the delta residual ("own" reference per instance)."""
    z_hat = z_hat.float()
    reps = len(z_hat) // len(z_t)
    tile = lambda x: x.repeat(reps, 1)  # noqa: E731
    zt = tile(z_t)
    align = 1 - F.cosine_similarity(z_hat, zt, dim=-1).mean()
    zh = F.normalize(z_hat, dim=-1) if normalise else z_hat
    base = tile(z_img) if delta_ref is None else delta_ref
    delta = 1 - F.cosine_similarity(zh - base, zt - tile(z_txt), dim=-1).mean()
    logits = F.normalize(z_hat, dim=-1) @ F.normalize(z_t, dim=-1).T / tau  # (R, B)
    labels = torch.arange(len(z_t), device=z_t.device).repeat(reps)
    if same_target is not None:
        off = same_target & ~torch.eye(len(z_t), dtype=torch.bool, device=z_t.device)
        logits = logits.masked_fill(off.repeat(reps, 1), float("-inf"))
    ctr = F.cross_entropy(logits, labels)
    return {"align": align, "delta": delta, "ctr": ctr}


class DiCETask(CachedHeadTask):
    def __init__(self, cfg: DiCESettings, backbone: Towers | None = None):
        self.setup(cfg, backbone)
        arch = DiCEConfig.from_dict(cfg.to_dict())
        torch.manual_seed(cfg.seed)  # the init is part of the run: same seed, same weights
        self.model = EMAWrapper(DiCENet(self.backbone.dim, arch), cfg.ema)
        self.evaluated = DiCE(self.backbone, {"arch": arch.to_dict()})  # receives the EMA weights

    def batch(self, step: int, rank: int, rng: random.Random) -> dict[str, torch.Tensor]:
        """A batch of cache rows. On image-target data (CIRR, FashionIQ: no captions) the target is
        the target image and the reference's "caption" view is its image (docs/METHODS.md)."""
        c, bs = self.cache, self.cfg.batch_size
        idx = np_rng(rng).choice(len(c), size=min(bs, len(c)), replace=False)
        keys = c.target_caption[idx] if c.has_target_captions else c.tgt_key[idx]
        z_t = c.text(keys) if c.has_target_captions else c.image("tgt", idx)
        z_txt = c.text(c.ref_caption[idx]) if c.has_ref_captions else c.image("ref", idx)
        return {"z_img": torch.from_numpy(c.image("ref", idx)), "z_txt": torch.from_numpy(z_txt),
                "z_e": torch.from_numpy(c.text(c.edit[idx])), "z_t": torch.from_numpy(z_t),
                "same": torch.from_numpy(keys[:, None] == keys[None, :])}

    def loss(self, model, batch) -> tuple[torch.Tensor, dict[str, float]]:
        dev = next(self.model.parameters()).device
        b = {k: v.to(dev) for k, v in batch.items()}
        z_r = torch.cat([b["z_img"], b["z_txt"]])  # both reference modalities, as in the paper
        z_hat = model(z_r, torch.cat([b["z_e"], b["z_e"]]))
        cfg = self.cfg
        own = z_r if cfg.delta_ref == "own" else None
        parts = dice_losses(z_hat, b["z_img"], b["z_txt"], b["z_t"], cfg.tau, b["same"], own, cfg.delta_normalise)
        weights = {"align": cfg.w_align, "delta": cfg.w_delta, "ctr": cfg.w_ctr}
        total = sum(weights[k] * v for k, v in parts.items())
        self.last_logs = {"loss": total.item(), **{k: v.item() for k, v in parts.items()}}
        return total, self.last_logs


def main(argv: list[str] | None = None) -> dict:
    return cli(DiCETask, DEFAULTS, argv, __doc__)


if __name__ == "__main__":
    main()
