"""Train LinCIR (Gu et al., CVPR 2024) on the world's captions alone (self-masking projection).

    python -m training.train_lincir --config training/configs/lincir_tiny.json [key=value ...]

The published objective (navervision/lincir `train_phi.py`, `loader.py`): a caption c is cleaned
(lower case, no '$'); its keywords (spaCy runs of NOUN / PROPN / ADJ / DET) are all replaced by
the pseudo-word `$` (`CaptionDataset`); t = f_T(c) (the frozen text tower's projected, *not*
normalised features) plus noise u·n, u ~ U(0, 1) per caption, n ~ N(0, I)
(`input_features += 1.0 * torch.rand(B)[:, None] * torch.randn(...)`); φ maps it to a token
that stands at *every* `$`; the loss is MSE(f_T(masked caption with φ(t + u·n)), f_T(c)).
No images anywhere: the captions are the reference, target and negative captions of the embed
cache's training queries (their image embeddings are never read), the keywords come from the
world's closed vocabulary (training/textinv.py). AdamW lr 1e-4, wd 0.01 on every parameter,
constant lr with no warmup, φ dropout 0.5, batch 512 (README: 8 × 64). The exported φ is the one
with the best val R@1 among the periodic validations (`phi_best`, which their README evaluates;
`keep_best`). Chord λ on val.
"""
from __future__ import annotations

import random
from dataclasses import dataclass

import numpy as np
import torch
import torch.nn.functional as F

from cir_core.encoder import Towers
from cir_core.methods.pseudoword import EMPTY_PROMPT
from cir_core.methods.textinv import PhiConfig
from cir_core.text_tower import trim

from .heads import np_rng
from .registry import CONFIGS, Trainer, register_trainer
from .task import cli
from .textinv import TextInvSettings, TextInvTask, cache_texts, caption_rows, clean_caption, mask_keywords


@dataclass
class LinCIRSettings(TextInvSettings, PhiConfig):
    """φ's architecture (LinCIR's Phi), the optimiser and the noise (the authors' defaults)."""

    steps: int = 1000
    lr: float = 1e-4
    weight_decay: float = 0.01
    warmup: int = 0
    schedule: str = "constant"
    batch_size: int = 512
    input_scale: float = 0.0  # 0: the backbone's mean raw image-feature norm (what φ reads at inference)
    noise_std: float = 1.0  # n ~ N(0, noise_std²·I), scaled by u ~ U(0, 1) per caption
    l2_normalize: bool = False  # `--l2_normalize`: φ reads normalised features (then input_scale = 1)
    keep_best: str = "val_R@1"  # train_phi.py keeps `phi_best`, the best CIRR-val R@1 of its validations
    eval_every: int = 50
    ckpt_every: int = 100
    log_every: int = 20
    out_dir: str = "runs/lincir"
    export_dir: str | None = "assets/methods/lincir"


DEFAULTS = LinCIRSettings()
register_trainer(Trainer("lincir", "training.train_lincir", f"{CONFIGS}/lincir_tiny.json", "lincir",
                         f"{CONFIGS}/lincir_vitl14.json", "LinCIRTask", run_dir="runs/lincir", smoke=False))
FALLBACK = EMPTY_PROMPT  # loader.py: "a photo of $", the prompt when no `$` survives tokenisation


class LinCIRTask(TextInvTask):
    method_name = "lincir"

    def __init__(self, cfg: LinCIRSettings, backbone: Towers | None = None):
        if cfg.l2_normalize:
            cfg.input_scale = 1.0  # φ then reads unit features at inference too
        self.setup(cfg, backbone)
        texts = cache_texts(self.cache)
        self.captions = [clean_caption(texts[i]) for i in caption_rows(self.cache)]

    def masked_tokens(self, masked: list[str]) -> torch.Tensor:
        """Tokens of the masked captions; a row whose `$` was cut by truncation becomes FALLBACK."""
        text = self.method.text
        ok = [bool((row == text.id).any()) for row in text.tokenizer(masked)]
        return text.tokenize([m if good else FALLBACK for m, good in zip(masked, ok)])

    def batch(self, step: int, rank: int, rng: random.Random) -> dict:
        g = np_rng(rng)
        idx = g.choice(len(self.captions), size=min(self.cfg.batch_size, len(self.captions)), replace=False)
        caps = [self.captions[i] for i in idx]
        masked = [mask_keywords(c, rng) for c in caps]
        text = self.method.text
        return {"tokens": trim(text.tokenizer(caps)), "masked": self.masked_tokens(masked),
                "u": torch.from_numpy(g.random(len(caps)).astype(np.float32)),
                "n": torch.from_numpy(g.standard_normal((len(caps), self.backbone.dim)).astype(np.float32))}

    def loss(self, model, batch: dict) -> tuple[torch.Tensor, dict[str, float]]:
        x, dev, text = self.cfg, self.device, self.method.text
        with torch.no_grad():
            target = text.encode_plain(batch["tokens"]).float()  # f_T(c): projected, not normalised
        inp = target + x.noise_std * batch["u"].to(dev)[:, None] * batch["n"].to(dev)
        if x.l2_normalize:
            inp = F.normalize(inp, dim=-1)
        pred = text.encode(batch["masked"], model(inp))
        loss = F.mse_loss(pred.float(), target, reduction="mean")
        self.last_logs = {"loss": loss.item(), "target_norm": target.norm(dim=-1).mean().item()}
        return loss, self.last_logs


def main(argv: list[str] | None = None) -> dict:
    return cli(LinCIRTask, DEFAULTS, argv, __doc__)


if __name__ == "__main__":
    main()
