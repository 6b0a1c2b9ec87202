"""Train SEARLE (Baldrati et al., ICCV 2023) on the world: OTI targets, then φ distillation.

    python -m training.train_searle --config training/configs/searle_tiny.json [key=value ...]

1. Concepts (`src/image_concepts_association.py`): every concept of the dictionary gets the
   normalised mean embedding of the 24 PALAVRA templates filled with it; each image ranks the
   concepts by cosine. Phrases (`src/gpt_phrases_generation.py`): up to 256 per concept. The
   world stands in for Open Images and GPT-Neo: the dictionary is its shapes, colour + shape
   pairs, backgrounds and character names, and a concept's "phrases" are training captions that
   contain it (training/textinv.py).
2. OTI (`src/oti_inversion.py`), per batch of `oti_batch` images: a token w ~ N(0, 0.02²) is
   optimised for `oti_steps` AdamW steps (lr 2e-2, wd 0.01) on
   (λ_cos·(1 − cos(f_T(template with w), v)) + λ_gpt·(1 − cos(f_T(phrase with w for its
   concept), f_T(phrase)))) / (λ_cos + λ_gpt), a random template and a random phrase of the
   image's top-`oti_top_k` concepts per step; the target is w's EMA (decay 0.99). The tokens are
   saved in `<out_dir>/oti/` chunk by chunk (an interrupted run resumes them).
3. φ distillation (`src/train_phi.py`) on the same images, on the shared loop:
   λ_distil·NT-Xent(w_OTI, φ(v), τ 0.25) (`utils.contrastive_loss`) +
   λ_gpt·(1 − cos(f_T(phrase), f_T(phrase with its concept → φ(v)))), concept drawn from the
   image's top-`top_k_concepts`; AdamW lr 1e-4, wd 0.01 on every parameter, constant lr,
   φ dropout 0.5. Chord λ on val.
"""
from __future__ import annotations

import json
import random
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F

from cir_core.encoder import Towers
from cir_core.fileio import atomic_write
from cir_core.methods.textinv import PhiConfig
from cir_core.progress import bar as progress_bar

from .heads import np_rng
from .registry import CONFIGS, Trainer, register_trainer
from .task import cli
from .textinv import (
    TEMPLATES,
    TextInvSettings,
    TextInvTask,
    cache_texts,
    caption_rows,
    concept_embeddings,
    concept_phrases,
    replace_concept,
    top_concepts,
    world_concepts,
)


@dataclass
class SEARLESettings(TextInvSettings, PhiConfig):
    """φ's architecture (SEARLE's Phi), the distillation and the OTI stage (the authors' defaults
    unless the tiny config says otherwise)."""

    steps: int = 800
    lr: float = 1e-4
    weight_decay: float = 0.01
    warmup: int = 0
    schedule: str = "constant"
    batch_size: int = 256
    input_scale: float = 0.0  # 0: the backbone's mean raw image-feature norm, measured at start
    lambda_distil: float = 1.0
    lambda_gpt: float = 0.75
    temperature: float = 0.25
    top_k_concepts: int = 150
    n_oti: int = 2048
    oti_batch: int = 32
    oti_steps: int = 350
    oti_lr: float = 2e-2
    oti_weight_decay: float = 0.01
    oti_top_k: int = 15
    oti_lambda_cos: float = 1.0
    oti_lambda_gpt: float = 0.5
    oti_ema: float = 0.99
    phrases_per_concept: int = 256
    eval_every: int = 400
    ckpt_every: int = 100
    log_every: int = 20
    out_dir: str = "runs/searle"
    export_dir: str | None = "assets/methods/searle"


DEFAULTS = SEARLESettings()
register_trainer(Trainer("searle", "training.train_searle", f"{CONFIGS}/searle_tiny.json", "searle",
                         f"{CONFIGS}/searle_vitl14.json", "SEARLETask", run_dir="runs/searle", smoke=False))


def cosine_loss(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """nn.CosineEmbeddingLoss with target 1: mean(1 − cos)."""
    return (1 - F.cosine_similarity(a, b, dim=-1)).mean()


def nt_xent(v1: torch.Tensor, v2: torch.Tensor, temperature: float) -> torch.Tensor:
    """SEARLE `utils.contrastive_loss` (after PALAVRA): over the 2B normalised rows, each row's
    positive is its pair, its denominator every other row; the same value, in log space."""
    v1, v2 = F.normalize(v1, dim=1), F.normalize(v2, dim=1)
    pos = (v1 * v2).sum(1) / temperature
    joint = torch.cat([v1, v2])
    sim = joint @ joint.T / temperature
    sim = sim.masked_fill(torch.eye(len(joint), dtype=torch.bool, device=sim.device), float("-inf"))
    return -(torch.cat([pos, pos]) - torch.logsumexp(sim, dim=0)).mean()


class SEARLETask(TextInvTask):
    method_name = "searle"

    def __init__(self, cfg: SEARLESettings, backbone: Towers | None = None):
        self.setup(cfg, backbone)
        t0 = time.time()
        c, texts = self.cache, cache_texts(self.cache)
        captions = [texts[i] for i in caption_rows(c)]
        concepts = world_concepts()
        phrases = concept_phrases(captions, concepts, cfg.phrases_per_concept, cfg.data_seed)
        self.concepts = [k for k in concepts if k in phrases]  # filtered: no phrase holds it
        self.phrases = [phrases[k] for k in self.concepts]
        self.images = self._images(cfg.n_oti)
        emb = concept_embeddings(self.backbone, self.concepts)
        k = max(cfg.oti_top_k, cfg.top_k_concepts)
        self.ranked = top_concepts(self.images, emb, min(k, len(self.concepts)))
        # every phrase's frozen embedding, once (the authors re-encode them at every step)
        flat = sorted({p for ps in self.phrases for p in ps})
        self.phrase_row = {p: i for i, p in enumerate(flat)}
        self.phrase_emb = torch.from_numpy(self.backbone.encode_texts(flat))
        self.concept_seconds = round(time.time() - t0, 1)
        t0 = time.time()
        self.oti_tokens = torch.from_numpy(self.oti(Path(cfg.out_dir) / "oti"))
        self.oti_seconds = round(time.time() - t0, 1) + getattr(self, "oti_resumed_seconds", 0.0)

    def _images(self, n: int) -> np.ndarray:
        """The first `n` distinct reference images of the training queries (unit rows)."""
        _, first = np.unique(self.cache.ref_key, return_index=True)
        idx = np.sort(first)[:n]
        if len(idx) < n:
            raise SystemExit(f"n_oti={n} but the embed cache holds {len(idx)} distinct references")
        v = self.cache.image("ref", idx)
        return np.ascontiguousarray(v / np.linalg.norm(v, axis=1, keepdims=True), np.float32)

    def _pairs(self, i: int, k: int) -> list[tuple[int, str]]:
        """(concept, phrase) pairs of image i's top-k concepts, every phrase of each."""
        return [(c, p) for c in self.ranked[i, :k] for p in self.phrases[c]]

    # -- OTI --------------------------------------------------------------------------------------
    def oti_key(self) -> dict:
        x = self.cfg
        return {"backbone": self.backbone.id, "cache": self.cache.folder.name, "n": x.n_oti,
                "batch": x.oti_batch, "steps": x.oti_steps, "lr": x.oti_lr, "wd": x.oti_weight_decay,
                "top_k": x.oti_top_k, "cos": x.oti_lambda_cos, "gpt": x.oti_lambda_gpt, "ema": x.oti_ema,
                "phrases": x.phrases_per_concept, "seed": x.seed, "concepts": len(self.concepts)}

    def oti(self, folder: Path) -> np.ndarray:
        """The EMA OTI token of every image, computed chunk by chunk and saved as it goes."""
        x, key = self.cfg, self.oti_key()
        folder.mkdir(parents=True, exist_ok=True)
        meta_path, tok_path = folder / "meta.json", folder / "tokens.npy"
        done = np.zeros((0, self.method.text.width), np.float32)
        self.oti_resumed_seconds = 0.0
        if meta_path.is_file() and tok_path.is_file():
            meta = json.loads(meta_path.read_text())
            if meta.get("key") == key:
                done = np.load(tok_path)
                self.oti_resumed_seconds = float(meta.get("seconds", 0.0))
        t0 = time.time()
        bar = progress_bar(total=len(self.images), initial=len(done), desc="OTI", unit="image")
        while len(done) < len(self.images):
            start = len(done)
            chunk = np.arange(start, min(start + x.oti_batch, len(self.images)))
            done = np.concatenate([done, self.invert(chunk, np.random.default_rng([x.seed, start]))])
            atomic_write(tok_path, lambda f, done=done: np.save(f, done), True)
            meta = {"key": key, "n_done": len(done), "seconds": round(self.oti_resumed_seconds + time.time() - t0, 1)}
            atomic_write(meta_path, lambda f, meta=meta: f.write(json.dumps(meta)), False)
            bar.update(len(chunk))
        bar.close()
        return done

    def invert(self, chunk: np.ndarray, g: np.random.Generator) -> np.ndarray:
        """OTI for the images `chunk`: EMA tokens (len(chunk), W)."""
        x, text = self.cfg, self.method.text
        dev = self.device
        v = torch.from_numpy(self.images[chunk]).to(dev)
        w = torch.empty(len(chunk), text.width, device=dev)
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(int(g.integers(1 << 31)))
            torch.nn.init.normal_(w, std=0.02)
        w = torch.nn.Parameter(w)
        ema = w.detach().clone()
        opt = torch.optim.AdamW([w], lr=x.oti_lr, weight_decay=x.oti_weight_decay)
        pairs = [self._pairs(int(i), x.oti_top_k) for i in chunk]
        for _ in range(x.oti_steps):
            templates = [TEMPLATES[j].format(" $ ") for j in g.integers(len(TEMPLATES), size=len(chunk))]
            picks = [p[int(g.integers(len(p)))] for p in pairs]
            oti_phrases = [replace_concept(ph, self.concepts[c], 1) for c, ph in picks]
            reg = self.phrase_emb[[self.phrase_row[ph] for _, ph in picks]].to(dev)
            t_feat = text.encode(text.tokenize(templates), w)
            p_feat = text.encode(text.tokenize(oti_phrases), w)
            loss = (x.oti_lambda_cos * cosine_loss(t_feat, v) + x.oti_lambda_gpt * cosine_loss(p_feat, reg)) \
                / (x.oti_lambda_cos + x.oti_lambda_gpt)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            ema = x.oti_ema * ema + (1 - x.oti_ema) * w.detach()
        return ema.cpu().numpy()

    # -- φ distillation ---------------------------------------------------------------------------
    def batch(self, step: int, rank: int, rng: random.Random) -> dict:
        x = self.cfg
        g = np_rng(rng)
        idx = np.sort(g.choice(len(self.images), size=min(x.batch_size, len(self.images)), replace=False))
        k = min(x.top_k_concepts, self.ranked.shape[1])
        concepts = [int(self.ranked[i, g.integers(k)]) for i in idx]
        phrases = [self.phrases[c][int(g.integers(len(self.phrases[c])))] for c in concepts]
        return {"v": torch.from_numpy(self.images[idx]), "oti": self.oti_tokens[idx],
                "reg": self.phrase_emb[[self.phrase_row[p] for p in phrases]],
                "tokens": self.method.text.tokenize([replace_concept(p, self.concepts[c], 0)
                                                     for c, p in zip(concepts, phrases)])}

    def loss(self, model, batch: dict) -> tuple[torch.Tensor, dict[str, float]]:
        x, dev = self.cfg, self.device
        b = {k: v.to(dev) for k, v in batch.items()}
        w = model(b["v"] * float(self.arch.input_scale))
        terms = {}
        if x.lambda_distil > 0:
            terms["distil"] = x.lambda_distil * nt_xent(b["oti"], w, x.temperature)
        if x.lambda_gpt > 0:
            terms["gpt"] = x.lambda_gpt * cosine_loss(b["reg"], self.method.text.encode(b["tokens"], w))
        loss = sum(terms.values())
        self.last_logs = {"loss": loss.item(), **{k: v.item() for k, v in terms.items()}}
        return loss, self.last_logs

    def extra_metrics(self) -> dict[str, Any]:
        return {**super().extra_metrics(), "oti_images": len(self.images), "oti_minutes": round(self.oti_seconds / 60, 1),
                "concepts": len(self.concepts), "concept_seconds": self.concept_seconds}


def main(argv: list[str] | None = None) -> dict:
    return cli(SEARLETask, DEFAULTS, argv, __doc__)


if __name__ == "__main__":
    main()
