"""Train RTD (Byun et al., ICCV 2025) on a world-trained peer: tune a copy of the text tower by
frozen-target text contrastive learning, the peer's φ frozen.

    python -m training.train_rtd --config training/configs/rtd_lincir_tiny.json [key=value ...]

The authors' objective (their `train_text_encoder.py`, `loader.py: CaptionDataset_RTD`), on text
triplets (reference caption c_r, edit c_e, target caption c_t; theirs: CompoDiff's LLM triplets,
here the world's training stream's first `n_train` queries, films included; no image is read):

- *refined batch sampling*: the queries are `"a photo of $ that {c_e}"` for the B triplets and
  `"a photo of $"` for the same B, their frozen targets f_T(c_t) and f_T(c_r): 2B pairs per batch;
- *refined concatenation*: the token is φ(f_T(c_r) + noise_scale·u·n), u ~ U(0, 1) per row,
  n ~ N(0, I), from the *frozen* tower's raw (unnormalised) text feature of the reference caption,
  the same token for both of its queries;
- the loss is `utils.contrastive_loss` (PALAVRA's NT-Xent over the 4B normalised rows, τ) between the
  frozen targets and the tuned tower's queries; only the tuned tower takes gradients (AdamW over its
  parameters, lr 1e-5 in their README, constant, no warmup; no clipping by default).

The peer's prompt and placeholder rule are kept (Pic2Word: `"a photo of * , {edit}"` and `"a photo
of *"`). The exported tower is the best val R@1 of the validations (`text_encoder_best`, which
their README evaluates). Chord λ on val. The token-embedding table stays frozen unless
`tune_token_embedding` (docs/METHODS.md, RTD).
"""
from __future__ import annotations

import random
import time
from dataclasses import dataclass
from itertools import islice
from pathlib import Path
from typing import Any

import numpy as np
import torch

from cir_core.encoder import Towers
from cir_core.methods import create_method, default_checkpoint, get_method_class
from cir_core.methods.pseudoword import fill
from cir_core.text_tower import encode_tokens, trim

from .heads import np_rng
from .loop import LoopConfig
from .registry import CONFIGS, Trainer, register_trainer
from .task import MethodSettings, MethodTask, cli
from .textinv import PhiModule
from .train_searle import nt_xent

PEERS = ("lincir", "pic2word", "searle")


@dataclass
class RTDSettings(MethodSettings):
    """The peer (`base`, its checkpoint), the authors' optimiser and noise, what is tuned."""

    base: str = "lincir"
    base_checkpoint: str | None = None  # default: the shipped assets/methods/<base>
    steps: int = 300
    lr: float = 1e-5
    weight_decay: float = 0.01
    warmup: int = 0
    schedule: str = "constant"
    batch_size: int = 128
    grad_clip: float = 0.0  # --max_grad_norm None
    noise_scale: float = 0.5
    tau: float = 0.07
    tune_token_embedding: bool = False
    keep_best: str = "val_R@1"  # their best-R@1 `text_encoder_best`
    backbone_device: str | None = None
    eval_every: int = 50
    ckpt_every: int = 50
    log_every: int = 10
    out_dir: str = "runs/rtd-lincir"
    export_dir: str | None = "assets/methods/rtd-lincir"


DEFAULTS = RTDSettings()
for _peer in PEERS:
    register_trainer(Trainer(f"rtd-{_peer}", "training.train_rtd", f"{CONFIGS}/rtd_{_peer}_tiny.json",
                             f"rtd-{_peer}", None, "RTDTask", run_dir=f"runs/rtd-{_peer}", smoke=False,
                             stage=3))  # after the peers it tunes


def text_triplets(n: int, seed: int) -> list[tuple[str, str, str]]:
    """(reference caption, edit, target caption) of the first `n` training queries (world and film)."""
    from cir_core.world.films.stream import training_queries

    return [(q.ref_caption, q.text, q.target_caption) for q in islice(training_queries(seed), n)]


class RTDTask(MethodTask):
    """The loop's task: `self.model` wraps the method's weights (φ frozen, the tuned tower
    trainable) with the best-validated state kept (`keep_best`)."""

    def __init__(self, cfg: RTDSettings, backbone: Towers | None = None):
        from cir_core.backbone import load_backbone

        if cfg.base not in PEERS:
            raise SystemExit(f"base must be one of {PEERS}, got {cfg.base!r}")
        self.cfg, self.t0 = cfg, time.time()
        dev = cfg.backbone_device or ("cuda" if torch.cuda.is_available() else "cpu")
        self.backbone = backbone if backbone is not None else load_backbone(cfg.backbone, cfg.pretrained, device=dev)
        self.val  # noqa: B018  (a bad val spec fails before anything is built)
        peer = create_method(cfg.base, self.backbone, cfg.base_checkpoint)
        cls = get_method_class(f"rtd-{cfg.base}")
        arch = {**peer.arch.to_dict(), "tune_token_embedding": cfg.tune_token_embedding}
        self.method = cls(self.backbone, {"arch": arch}, mapper=peer.mapper)
        self.method.mapper.eval().requires_grad_(False)  # φ frozen (`phi.requires_grad_(False)`)
        self.method.tower.train().requires_grad_(True)  # the table is tuned only if it is the tower's own
        self.model = PhiModule(self.method.weights(), 0.0, bool(cfg.keep_best))
        self.evaluated = cls(self.backbone, {"arch": arch}, mapper=peer.mapper)
        self.triplets = text_triplets(cfg.n_train, cfg.data_seed)
        self.base_source = str(cfg.base_checkpoint or default_checkpoint(cfg.base))
        self.step, self.last_logs = 0, {}

    @property
    def device(self) -> torch.device:
        return next(self.model.parameters()).device

    def param_groups(self, cfg: LoopConfig) -> list[dict]:
        params = [p for p in self.method.tower.parameters() if p.requires_grad]
        return [{"params": params, "weight_decay": self.cfg.weight_decay}]  # optimizer_cls(text_encoder_train.parameters())

    def before_step(self, step: int, optimizer: Any) -> None:
        self.step = step

    def batch(self, step: int, rank: int, rng: random.Random) -> dict:
        m, g = self.method, np_rng(rng)
        idx = g.choice(len(self.triplets), size=min(self.cfg.batch_size, len(self.triplets)), replace=False)
        ref, edit, tgt = zip(*(self.triplets[i] for i in idx))
        tok = m.backbone.tokenizer
        return {"queries": m.text.tokenize([fill(m.prompt, e) for e in edit] + [m.empty_prompt] * len(edit)),
                "targets": trim(tok(list(tgt) + list(ref))), "refs": trim(tok(list(ref))),
                "u": torch.from_numpy(g.random(len(ref)).astype(np.float32)),
                "n": torch.from_numpy(g.standard_normal((len(ref), m.backbone.dim)).astype(np.float32))}

    def loss(self, model, batch: dict) -> tuple[torch.Tensor, dict[str, float]]:
        m, dev, x = self.method, self.device, self.cfg
        frozen = m.backbone.model
        with torch.no_grad():
            targets = encode_tokens(frozen, batch["targets"].to(dev)).float()  # [f_T(c_t); f_T(c_r)]
            inp = encode_tokens(frozen, batch["refs"].to(dev)).float()  # raw, as `text_embeds`
            inp = inp + x.noise_scale * batch["u"].to(dev)[:, None] * batch["n"].to(dev)
            token = m.mapper(inp)
        queries = m.text.encode(batch["queries"].to(dev), torch.cat([token, token]))
        loss = nt_xent(targets, queries.float(), x.tau)
        self.last_logs = {"loss": loss.item()}
        return loss, self.last_logs

    # -- validation and export (the base's, with the best-validated tower kept) ------------------
    def eval_method(self) -> Any:
        self.evaluated.weights().load_state_dict(self.model.averaged_state())
        self.evaluated.weights().eval()
        return self.evaluated

    def validate(self) -> dict[str, float]:
        metrics = super().validate()
        self.model.offer_metrics(metrics, self.cfg.keep_best, self.step + 1)
        return metrics

    def export_method(self) -> Any:
        m = self.eval_method()
        if self.cfg.keep_best and int(self.model.best_step) >= 0:
            m.weights().load_state_dict(self.model.best.state_dict())
        return m

    def record(self, metrics: dict[str, float]) -> dict[str, Any]:
        out: dict[str, Any] = {"train_triplets": len(self.triplets), "base_checkpoint": self.base_source,
                               **{f"train_{k}": round(v, 4) for k, v in self.last_logs.items()},
                               "wall_minutes": round((time.time() - self.t0) / 60, 1)}
        if self.cfg.keep_best and int(self.model.best_step) >= 0:
            out.update({"selected_step": int(self.model.best_step), "selected_by": self.cfg.keep_best,
                        f"selected_{self.cfg.keep_best}": round(float(self.model.best_value), 4),
                        "last_step_metrics": dict(metrics)})
            return out
        return {**out, **metrics}

    def default_export(self, out_dir: Path) -> Path:
        return Path(out_dir) / "export"


def main(argv: list[str] | None = None) -> dict:
    return cli(RTDTask, DEFAULTS, argv, __doc__)


if __name__ == "__main__":
    main()
