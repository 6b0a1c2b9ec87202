"""Train Pic2Word's mapper (Saito et al., CVPR 2023) on the world's images alone.

    python -m training.train_pic2word --config training/configs/pic2word_tiny.json [key=value ...]

The published objective (google-research/composed_image_retrieval `src/trainer.py:
get_loss_img2text`): the frozen image tower gives v; IM2TEXT maps it to a token w; the frozen
text tower reads "a photo of" with w appended (`get_text_features`, `encode_text_img`: our
"a photo of *" with w at `*`, the same sequence); the loss is CLIP's symmetric contrastive loss
between the normalised image and text features over the batch, at the backbone's own (frozen)
logit scale. Only images are used: the embed cache's reference and target image embeddings of
the training queries (no edit text, no caption, no triplet). AdamW with the authors' split
(no weight decay on biases), betas (0.9, 0.98), eps 1e-6 (`src/params.py`, ViT defaults),
lr 1e-4, wd 0.1 (README), warmup then cosine (`scheduler.py: cosine_lr`). Chord λ on val.
"""
from __future__ import annotations

import random
from dataclasses import dataclass

import numpy as np
import torch
import torch.nn.functional as F

from cir_core.encoder import Towers
from cir_core.methods.pic2word import Pic2WordConfig

from .heads import np_rng
from .registry import CONFIGS, Trainer, register_trainer
from .task import cli
from .textinv import TextInvSettings, TextInvTask


@dataclass
class Pic2WordSettings(TextInvSettings, Pic2WordConfig):
    """The loop's and heads' settings, IM2TEXT's architecture, the optimiser (the authors')."""

    steps: int = 3000
    lr: float = 1e-4
    weight_decay: float = 0.1
    warmup: int = 150
    schedule: str = "cosine"
    batch_size: int = 128
    beta1: float = 0.9
    beta2: float = 0.98
    eps: float = 1e-6
    decay_biases: bool = False
    input_scale: float = 0.0  # 0: the backbone's mean raw image-feature norm, measured at start
    eval_every: int = 1000
    ckpt_every: int = 250
    log_every: int = 50
    out_dir: str = "runs/pic2word"
    export_dir: str | None = "assets/methods/pic2word"


DEFAULTS = Pic2WordSettings()
register_trainer(Trainer("pic2word", "training.train_pic2word", f"{CONFIGS}/pic2word_tiny.json", "pic2word",
                         f"{CONFIGS}/pic2word_vitl14.json", "Pic2WordTask", run_dir="runs/pic2word", smoke=False))


def symmetric_clip_loss(image: torch.Tensor, text: torch.Tensor, scale: torch.Tensor | float) -> torch.Tensor:
    """(CE(s·I·Tᵀ) + CE(s·T·Iᵀ)) / 2 over normalised rows, positives on the diagonal."""
    image, text = F.normalize(image, dim=-1), F.normalize(text, dim=-1)
    labels = torch.arange(len(image), device=image.device)
    logits = scale * image @ text.T
    return (F.cross_entropy(logits, labels) + F.cross_entropy(logits.T, labels)) / 2


class Pic2WordTask(TextInvTask):
    method_name = "pic2word"

    def __init__(self, cfg: Pic2WordSettings, backbone: Towers | None = None):
        self.setup(cfg, backbone)
        c = self.cache
        self.images = np.concatenate([c.ref_img, c.tgt_img])  # float16 unit rows, as stored
        self.prompt = self.method.text.tokenize([self.method.empty_prompt])  # "a photo of *"
        self.scale = float(self.backbone.model.logit_scale.exp())  # frozen, as the authors'

    def batch(self, step: int, rank: int, rng: random.Random) -> torch.Tensor:
        idx = np_rng(rng).choice(len(self.images), size=min(self.cfg.batch_size, len(self.images)), replace=False)
        v = self.images[np.sort(idx)].astype(np.float32)
        return torch.from_numpy(v / np.linalg.norm(v, axis=1, keepdims=True))

    def loss(self, model, batch: torch.Tensor) -> tuple[torch.Tensor, dict[str, float]]:
        v = batch.to(self.device)
        token = model(v * float(self.arch.input_scale))  # IM2TEXT on the (raw-scale) image feature
        text = self.method.text.encode(self.prompt.expand(len(v), -1), token)
        loss = symmetric_clip_loss(v, text, self.scale)
        self.last_logs = {"loss": loss.item()}
        return loss, self.last_logs


def main(argv: list[str] | None = None) -> dict:
    return cli(Pic2WordTask, DEFAULTS, argv, __doc__)


if __name__ == "__main__":
    main()
