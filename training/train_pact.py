"""Train PACT (or one of its Table 3 ablations, compose-only included) on the world or on ITT triplets.

    python -m training.train_pact --config training/configs/pact_tiny.json [key=value ...]

Phase 1, identity (`identity_steps`, φ only): q_∅ = f_T("a photo of $") retrieves its own v_r
among the batch. Phase 2, joint (`joint_steps`, φ + text LoRA), by `objective`:
  full            L_compose + w_p·L_preserve + w_r·L_replay
  compose         L_compose                      (compose-only)
  preserve        w_p·L_preserve + w_r·L_replay
  compose+visual  L_compose + α·(1 − cos(q, v_r))
L_compose: InfoNCE of q over the batch's target captions plus every negative caption (frozen
original text tower, computed once per batch). L_preserve: InfoNCE of q over the batch's v_r.
L_replay: phase 1's loss on a microbatch. At the end Chord's λ is chosen on the val split.
Data: `data=stream` draws fresh queries from the world's train stream every batch (rendered and
encoded now); `data=cache` draws rows of the embed cache DiCE/PACE train on (the first `n_train`
queries of the same stream, encoded once): the same data, about twice as fast on a CPU;
`data=itt:FILE image_root=DIR` trains on ITT triplets (training/build_itt), embedded once.
`steps` defaults to identity_steps + joint_steps; a smaller `steps` stops early (resumable).
"""
from __future__ import annotations

import json
import random
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from cir_core.backbone import load_backbone
from cir_core.encoder import Towers
from cir_core.methods import get_method_class
from cir_core.methods.pact_model import PACTComposer, PACTConfig
from cir_core.paths import DEFAULT_CHECKPOINTS

from .loop import LoopConfig, lr_factor
from .pact_data import CacheSource, StreamSource
from .registry import CONFIGS, Trainer, register_trainer
from .task import MethodSettings, MethodTask, cli

OBJECTIVES = ("full", "compose", "preserve", "compose+visual")
@dataclass
class PACTSettings(MethodSettings, PACTConfig):
    """The PACT trainer's settings: the loop's and every method trainer's (backbone, data, val,
    λ search, export), the architecture (`PACTConfig`), the two phases and the objective
    (Table 3's configurations). Paper defaults."""

    steps: int = 1333  # identity_steps + joint_steps unless set
    lr: float = 1e-4
    weight_decay: float = 0.001
    warmup: int = 0
    eval_every: int = 500
    ckpt_every: int = 100
    out_dir: str = "runs/pact"
    method: str | None = None  # default: compose-only for objective "compose", else pact
    objective: str = "full"
    identity_steps: int = 333
    joint_steps: int = 1000
    identity_lr: float = 1e-4
    mapper_lr: float = 3e-5
    lora_lr: float = 1e-5
    identity_warmup: int = 20
    joint_warmup: int = 50
    replay_batch: int = 32
    temperature: float = 0.05
    learn_temperature: bool = False
    temperature_lr: float = 1e-3
    preserve_weight: float = 1.0
    replay_weight: float = 1.0
    visual_weight: float = 1.0
    val_queries: int = 200
    val_lambda: float = 0.34  # the λ of the periodic validation line (the export chooses its own)
    data: str = "stream"  # stream | cache (the world's stream, rendered each batch / encoded once) | itt:FILE


DEFAULTS = PACTSettings()


def scale_pact_phases(steps: int) -> dict[str, int]:
    """PACT's two phases in the paper's proportion (333 : 1000), for a run of `steps`."""
    ident = max(1, round(steps / 4)) if steps > 1 else steps
    return {"identity_steps": ident, "joint_steps": steps - ident}


register_trainer(Trainer("pact", "training.train_pact", f"{CONFIGS}/pact_tiny.json", "pact", f"{CONFIGS}/pact_vitl14.json",
                         "PACTTask", "caption-stream", run_dir="runs/pact", scale=scale_pact_phases))
register_trainer(Trainer("compose-only", "training.train_pact", f"{CONFIGS}/compose_only_tiny.json", "compose-only",
                         f"{CONFIGS}/compose_only_vitl14.json", "PACTTask", "caption-stream",
                         run_dir="runs/compose-only", scale=scale_pact_phases, smoke=False))

REPORTED = ("R@1", "R@10", "identity@1", "edit@1")


class PACTTrainModule(nn.Module):
    """What the loop trains and checkpoints: the composer (φ + LoRA) and the log-temperature."""

    def __init__(self, composer: PACTComposer, temperature: float, learn: bool):
        super().__init__()
        self.composer = composer
        self.log_scale = nn.Parameter(torch.tensor(float(np.log(1 / temperature))), requires_grad=learn)

    def forward(self, batch: dict, objective: str, w: dict) -> tuple[torch.Tensor, dict[str, float]]:
        """The loss of this process's rows (`batch["rows"]`; every row without DDP) against the
        whole batch's keys (every v_r, every caption): under DDP, the average over processes of
        these per-process means is the one-process loss of the whole batch."""
        dev = self.log_scale.device
        b = {k: v.to(dev) if isinstance(v, torch.Tensor) else v for k, v in batch.items()}
        scale = self.log_scale.exp().clamp(max=100)
        ref, rows = b["ref"], b["rows"]

        def identity(sel: torch.Tensor, total: int) -> torch.Tensor:
            """q_∅ of rows `sel` (this process's share of `total` rows) retrieves its v_r among all:
            the sum over the share / (total / world), whose mean over processes is the mean."""
            if not len(sel):
                return torch.zeros((), device=dev)
            q0 = F.normalize(self.composer(ref[sel], b["empty_tokens"][sel]), dim=-1)
            return F.cross_entropy(scale * q0 @ ref.T, sel, reduction="sum") / (total / b["world"])

        if b["phase"] == 1:
            loss = identity(rows, len(ref))
            return loss, {"loss": loss.item(), "identity": loss.item()}
        q = F.normalize(self.composer(ref[rows], b["tokens"][rows]), dim=-1)
        terms: dict[str, torch.Tensor] = {}
        if objective in ("full", "compose", "compose+visual"):
            logits = (scale * q @ b["captions"].T).masked_fill(b["caption_mask"][rows], float("-inf"))
            terms["compose"] = F.cross_entropy(logits, rows)
        if objective in ("full", "preserve"):
            terms["preserve"] = w["preserve"] * F.cross_entropy(scale * q @ ref.T, rows)
            if w["replay_n"] > 0:
                terms["replay"] = w["replay"] * identity(b["replay"], b["n_replay"])
        if objective == "compose+visual":
            terms["visual"] = w["visual"] * (1 - (q * ref[rows]).sum(-1)).mean()
        loss = sum(terms.values())
        return loss, {"loss": loss.item(), **{k: v.item() for k, v in terms.items()}}


class PACTTask(MethodTask):
    def __init__(self, cfg: PACTSettings, backbone: Towers | None = None):
        self.cfg = x = cfg
        if x.objective not in OBJECTIVES:
            raise SystemExit(f"objective must be one of {OBJECTIVES}, got {x.objective!r}")
        x.method = x.method or ("compose-only" if x.objective == "compose" else "pact")
        if (x.method == "compose-only") != (x.objective == "compose"):
            raise SystemExit(f"method {x.method!r} does not match objective {x.objective!r}")
        dev = cfg.device if cfg.device != "auto" else ("cuda" if torch.cuda.is_available() else "cpu")
        self.backbone = backbone or load_backbone(x.backbone, x.pretrained, device=dev)
        self.arch = PACTConfig.from_dict(x.to_dict())
        self.n_id, self.n_joint = x.identity_steps, x.joint_steps
        with torch.random.fork_rng(devices=[]):  # φ / LoRA init depend on the seed only
            torch.manual_seed(cfg.seed)
            composer = PACTComposer(self.backbone, self.arch)
        self.model = PACTTrainModule(composer, x.temperature, x.learn_temperature)
        if x.data == "cache" or ":" in x.data:  # a real source: CacheSource says if it lacks captions
            self.source = CacheSource(self.backbone, x.n_train, x.data_seed, x.cache_root, x.render_workers,
                                      "world" if x.data == "cache" else x.data, x.image_root)
        elif x.data == "stream":
            # frozen encodes in bf16 where the loop trains in bf16 (ViT-L images: most of a step)
            bf16 = str(self.backbone.device).startswith("cuda") and cfg.precision in ("auto", "bf16")
            self.source = StreamSource(self.backbone, x.render_workers, bf16)
        else:
            raise SystemExit(f"data must be 'stream', 'cache' or 'itt:FILE', got {x.data!r}")
        self.weights = {"preserve": x.preserve_weight, "replay": x.replay_weight,
                        "visual": x.visual_weight, "replay_n": x.replay_batch}

    # -- optimisation ---------------------------------------------------------------------------
    def param_groups(self, cfg: LoopConfig) -> list[dict]:
        c = self.model.composer
        groups = [{"params": c.mapper_parameters(), "name": "mapper", "lr": self.cfg.identity_lr},
                  {"params": c.lora_parameters(), "name": "lora", "lr": 0.0}]
        if self.model.log_scale.requires_grad:
            groups.append({"params": [self.model.log_scale], "name": "temperature",
                           "lr": self.cfg.temperature_lr, "weight_decay": 0.0})
        return groups

    def phase(self, step: int) -> int:
        return 1 if step < self.n_id else 2

    def before_step(self, step: int, optimizer: torch.optim.Optimizer) -> None:
        """Per-phase lrs (warmup + the loop's schedule within each phase). In phase 1 the LoRA
        factors take no gradient at all, so AdamW keeps no state for them until phase 2."""
        phase = self.phase(step)
        first, n, warm = (0, self.n_id, "identity_warmup") if phase == 1 else \
            (self.n_id, self.n_joint, "joint_warmup")
        x = self.cfg
        factor = lr_factor(step - first, replace(x, steps=n, warmup=getattr(x, warm)))
        base = {"mapper": x.identity_lr if phase == 1 else x.mapper_lr,
                "lora": 0.0 if phase == 1 else x.lora_lr, "temperature": x.temperature_lr}
        for g in optimizer.param_groups:
            g["lr"] = float(base[g["name"]]) * factor
        for p in self.model.composer.lora_parameters():
            p.requires_grad_(phase == 2)

    # -- data -----------------------------------------------------------------------------------
    global_batches = True  # the loop gives every process the same rng: one batch, split by rows

    def batch(self, step: int, rank: int, rng: random.Random) -> dict:
        """The whole batch of B training queries, drawn from `rng` alone (see pact_data), with
        their frozen embeddings (v_r, and in phase 2 the target + negative captions through the
        original tower, no LoRA); `rows`: the ones this process composes (its 1/world share),
        `replay`: its share of the identity replay microbatch (the batch's first `replay_batch`)."""
        phase = self.phase(step)
        captions = phase == 2 and self.cfg.objective != "preserve"
        world = getattr(self, "world", 1)
        bs = self.cfg.batch_size
        if bs % world:
            raise SystemExit(f"batch_size {bs} must be a multiple of the number of processes ({world})")
        refs, edits, caps, cap_ids = self.source.draw(rng, bs, captions)
        c = self.model.composer
        local = np.arange(rank * bs // world, (rank + 1) * bs // world)
        n_replay = min(self.weights["replay_n"], bs)
        out = {"phase": phase, "ref": torch.from_numpy(refs), "rows": torch.from_numpy(local), "world": world,
               "replay": torch.from_numpy(local[local < n_replay]), "n_replay": n_replay,
               "empty_tokens": c.tokenize([""] * len(refs), empty=True)}
        if phase == 2:
            out["tokens"] = c.tokenize(edits)
        if captions:
            out["captions"] = torch.from_numpy(caps)
            # a column holding query i's own target text (equal ids) elsewhere is no negative for it
            col = torch.as_tensor(cap_ids)
            mask = col[None, :] == col[: len(refs), None]
            mask[torch.arange(len(refs)), torch.arange(len(refs))] = False
            out["caption_mask"] = mask
        return out

    def loss(self, model: nn.Module, batch: dict) -> tuple[torch.Tensor, dict[str, float]]:
        return model(batch, self.cfg.objective, self.weights)

    # -- validation and export (training.task: λ on val, the checkpoint) -----------------------------
    def _method(self, chord_lambda: float):
        cls = get_method_class(self.cfg.method)
        return cls(self.backbone, {"arch": self.arch.to_dict(), "chord_lambda": chord_lambda},
                   composer=self.model.composer)

    def eval_method(self):
        self.model.eval()
        return self._method(self.cfg.val_lambda)

    def _scores(self, lam: float) -> dict[str, dict]:
        """Val metrics with cosine and with Chord(λ), the composer in eval mode."""
        m = self.eval_method()
        c = self.val.queries(m)
        return {"cos": self.val.metrics(m, c, None)[0], "chord": self.val.metrics(m, c, lam)[0]}

    def validate(self) -> dict[str, float]:
        if self.val is None:
            return {}
        by = self._scores(self.cfg.val_lambda)
        return {f"val_{s}_{k}": round(m[k], 4) for s, m in by.items() for k in REPORTED if k in m}

    def final_metrics(self, method) -> dict:
        final = self._scores(method.chord_lambda)
        return {"val_cosine": final["cos"], "val_chord": final["chord"]}

    def checkpoint_extra(self) -> dict:
        return {"objective": self.cfg.objective}

    def total_steps(self) -> int:
        return self.n_id + self.n_joint  # `steps` below it stops early (resumable), exporting nothing

    def default_export(self, out_dir: Path) -> Path:
        """assets/methods/<name> for the two shipped methods; the run folder for other ablations."""
        if (self.cfg.method, self.cfg.objective) in (("pact", "full"), ("compose-only", "compose")):
            return DEFAULT_CHECKPOINTS / self.cfg.method
        return Path(out_dir) / "export"


def default_steps(cfg: PACTSettings, args) -> None:
    """`steps` defaults to identity_steps + joint_steps (unless set on the command line or in the
    config file); more than that is an error."""
    total = cfg.identity_steps + cfg.joint_steps
    explicit = any(o.startswith("steps=") for o in args.overrides) or (
        args.config and "steps" in json.loads(Path(args.config).read_text()))
    if not explicit:
        cfg.steps = total
    elif cfg.steps > total:
        raise SystemExit(f"steps={cfg.steps} exceeds identity_steps + joint_steps = {total}")


def main(argv: list[str] | None = None) -> dict[str, float]:
    """`python -m training.train_pact` or `torchrun --nproc_per_node N -m training.train_pact`:
    under torchrun `batch_size` is the global batch, split evenly over the processes."""
    return cli(PACTTask, DEFAULTS, argv, __doc__, prepare=default_steps)


if __name__ == "__main__":
    main()
