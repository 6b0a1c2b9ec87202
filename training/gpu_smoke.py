"""GPU smoke check: a few hundred real training steps of each trainer, synthetic data, timed.

    python -m training.gpu_smoke [--steps 200] [--model ViT-L-14] [--batch N] [--only pact,dice,pace]
    python -m training.gpu_smoke --model cir-tiny-vit --steps 2 --batch 8      # CPU sanity check

For each trainer this builds its real Task from its `training/configs/<trainer>_vitl14.json`
(so the ViT-L/14 hyper-parameters and batch sizes are the shipped ones) on a random-init backbone
(`load_backbone(model, pretrained=None)`: no download), swaps only the data for synthetic data of
the right shapes, and trains it through `training.loop.run` itself: AdamW, the trainer's own
`before_step` (PACT's phases, DiCE/PACE's EMA), bf16 autocast on CUDA, gradient clipping, the
final checkpoint (into a temporary folder). Validation and export are skipped.

  dice, pace  an in-memory embed cache (`TrainEmbeddings` with random unit rows in float16, as
              on disk); the trainers' own `batch()` gathers from it exactly as from a real cache.
  pact        a batch source in place of StreamSource/CacheSource: edit texts (so prompt lengths)
              and negative-caption counts from the world's first queries, random unit v_r and
              caption embeddings, i.e. what `data=cache` feeds. `--pact-stream` also runs what
              `data=stream` adds on the GPU: the frozen ViT image tower on B random images and the
              frozen text tower on the B target + negative captions every step (rendering, which
              runs on CPU workers, is not included). Phases split as the config's (1/4 identity).

One JSON line per trainer on stdout (progress bars go to stderr):
  {"trainer", "model", "device", "steps", "batch", "steps_per_s", "samples_per_s",
   "peak_mem_gb", "final_loss", ...}
steps_per_s leaves out the first min(10, steps // 10) steps (CUDA start-up); peak_mem_gb is
torch.cuda.max_memory_allocated (GiB, backbone included, reset per trainer), null on CPU.
A trainer that fails prints {"trainer", "error"} and the exit status is 1.
"""
from __future__ import annotations

import argparse
import contextlib
import gc
import importlib
import json
import random
import sys
import tempfile
import time
import traceback
from itertools import islice
from pathlib import Path
from typing import Any
from unittest import mock

import numpy as np
import torch

from cir_core.encoder import Towers

from . import task as method_task
from .loop import config_from_args, run
from .registry import Trainer
from .trainers import get_trainer, list_trainers

REPO = Path(__file__).resolve().parent.parent


def default_trainers() -> list[str]:
    """Every registered trainer with a paper-scale config (one per network)."""
    return [n for n in list_trainers() if get_trainer(n).gpu_config and get_trainer(n).smoke]


def paper_batch(name: str) -> int:
    """The batch size of the trainer's paper-scale config."""
    return int(json.loads((REPO / get_trainer(name).gpu_config).read_text())["batch_size"])


def unit_rows(g: np.random.Generator, n: int, d: int, dtype=np.float32) -> np.ndarray:
    x = g.standard_normal((n, d), dtype=np.float32)
    return (x / np.linalg.norm(x, axis=1, keepdims=True)).astype(dtype)


def synthetic_cache(n: int, dim: int, seed: int = 0, long_fraction: float = 0.6):
    """A `TrainEmbeddings` held in memory: n queries, 2n distinct texts, random unit rows
    (float16, as stored), 60% "long" queries of 2-10 sentences, 0-3 negatives each."""
    from .embed_cache import TrainEmbeddings

    g = np.random.default_rng(seed)
    c = TrainEmbeddings.__new__(TrainEmbeddings)  # its loader reads a folder: fill the fields instead
    n_texts = 2 * n
    n_sent = np.where(g.random(n) < long_fraction, g.integers(2, 11, n), 1)
    n_neg = g.integers(0, 4, n)
    text = lambda k: g.integers(0, n_texts, k).astype(np.int32)  # noqa: E731
    c.folder, c.n, c.dim = Path("synthetic"), n, dim
    c.meta = {"backbone": "synthetic", "dim": dim, "n": n}
    c.ref_img, c.tgt_img = unit_rows(g, n, dim, np.float16), unit_rows(g, n, dim, np.float16)
    c.texts = unit_rows(g, n_texts, dim, np.float16)
    c.ref_caption, c.edit, c.target_caption = text(n), text(n), text(n)
    c.neg_idx, c.neg_off = text(int(n_neg.sum())), np.concatenate([[0], np.cumsum(n_neg)]).astype(np.int64)
    c.sent_idx, c.sent_off = text(int(n_sent.sum())), np.concatenate([[0], np.cumsum(n_sent)]).astype(np.int64)
    c.edit_type = g.integers(0, 6, n).astype(np.int8)
    c.ref_key, c.tgt_key = g.integers(0, n // 2, n), g.integers(0, n // 2, n)  # some shared scenes
    return c


class SyntheticPACTSource:
    """PACT's batch source (see pact_data) on synthetic embeddings; texts from the world."""

    def __init__(self, backbone: Towers, stream_gpu: bool = False, autocast: bool = False, n_texts: int = 96):
        from cir_core.world import query_stream

        qs = list(islice(query_stream(0), n_texts))
        self.edits = [q.text for q in qs]
        self.captions = [[q.target_caption, *q.negatives] for q in qs]
        self.backbone, self.stream_gpu, self.autocast = backbone, stream_gpu, autocast

    def draw(self, rng: random.Random, b: int, captions: bool) -> tuple:
        g = np.random.default_rng(rng.getrandbits(64))
        rows = g.integers(0, len(self.edits), b)
        edits = [self.edits[i] for i in rows]
        texts = [self.captions[i][0] for i in rows] + [t for i in rows for t in self.captions[i][1:]]
        bb = self.backbone
        if self.stream_gpu:  # the frozen encodes StreamSource runs every step (bf16 as it does)
            size = bb.image_size
            with torch.inference_mode(), torch.autocast("cuda", dtype=torch.bfloat16, enabled=self.autocast):
                refs = torch.cat([bb.model.encode_image(torch.randn(min(256, b - i), 3, size, size,
                                                                    device=bb.device)).float()
                                  for i in range(0, b, 256)])
                refs = torch.nn.functional.normalize(refs, dim=-1).cpu().numpy()
                caps = bb.encode_texts(texts) if captions else None
        else:
            refs = unit_rows(g, b, bb.dim)
            caps = unit_rows(g, len(texts), bb.dim) if captions else None
        if not captions:
            return refs, edits, None, None
        return refs, edits, caps, list(range(len(texts)))  # distinct texts: no masked columns


def _smoke_class(base: type) -> type:
    """`base` with timing hooks; validation and export do nothing."""

    class Smoke(base):
        warm, t0, t1, final_loss, cuda = 0, None, None, None, None

        def sync(self) -> None:
            if self.cuda:
                torch.cuda.synchronize(self.cuda)

        def before_step(self, step: int, optimizer: Any) -> None:
            if step == self.warm:
                self.sync()
                self.t0 = time.perf_counter()
            super().before_step(step, optimizer)

        def loss(self, model, batch):
            loss, logs = super().loss(model, batch)
            self.final_loss = float(logs.get("loss", loss.item()))
            return loss, logs

        def validate(self) -> dict[str, float]:  # the loop calls it right after the last step
            if self.t1 is None:
                self.sync()
                self.t1 = time.perf_counter()
            return {}

        def export(self, out_dir: Path, metrics: dict[str, float]) -> None:
            pass

    Smoke.__name__ = f"Smoke{base.__name__}"
    return Smoke


def on_synthetic_cache(task_cls: type, cfg: Any, backbone: Towers, args: argparse.Namespace) -> Any:
    """A head on the embed cache, with an in-memory synthetic cache instead."""
    n = max(4096, 4 * cfg.batch_size, getattr(cfg, "bank_size", 0) // 2 + 1)
    cache = synthetic_cache(n, backbone.dim, cfg.seed, getattr(cfg, "long_fraction", 0.6))
    with mock.patch.object(method_task, "load_inputs", lambda c, bb=None: (backbone, cache)):
        return task_cls(cfg, backbone)


def on_synthetic_captions(task_cls: type, cfg: Any, backbone: Towers, args: argparse.Namespace) -> Any:
    """A trainer on (reference, edit, captions) batches (PACT), with SyntheticPACTSource instead."""
    task = task_cls(cfg, backbone=backbone)
    bf16 = str(backbone.device).startswith("cuda") and cfg.precision in ("auto", "bf16")
    task.source = SyntheticPACTSource(backbone, args.pact_stream, bf16)
    return task


SYNTHETIC = {"embed-cache": on_synthetic_cache, "caption-stream": on_synthetic_captions}


def build_task(trainer: str, backbone: Towers, args: argparse.Namespace, dev: str, out: Path):
    """(task, cfg, batch): the trainer's real TrainTask and settings from its paper-scale config,
    on synthetic data of the kind its registry entry names."""
    t: Trainer = get_trainer(trainer)
    steps = int(args.steps)
    batch = int(args.batch or paper_batch(trainer))
    ov = {"steps": steps, "device": dev, "out_dir": str(out / trainer), "eval_every": steps + 1,
          "ckpt_every": steps + 1, "log_every": max(1, steps // 20), "threads": int(args.threads),
          "batch_size": batch, "backbone": args.model, "pretrained": None, "render_workers": 0,
          "val_queries": 0, "val": "world", "data": {"embed-cache": "world", "caption-stream": "stream"}[t.data],
          **(t.scale(steps) if t.scale else {})}
    if not dev.startswith("cuda"):
        ov["precision"] = "auto"  # fp32: the configs ask for bf16 autocast, which is CUDA's
    mod = importlib.import_module(t.module)
    overrides = [f"{k}={json.dumps(v)}" for k, v in ov.items()]
    cfg = config_from_args(mod.DEFAULTS, str(REPO / t.gpu_config), overrides)
    task = SYNTHETIC[t.data](_smoke_class(t.task_class()), cfg, backbone, args)
    task.warm = min(10, steps // 10)
    task.cuda = dev if dev.startswith("cuda") else None
    return task, cfg, batch


def smoke_one(trainer: str, backbone: Towers, args: argparse.Namespace, dev: str, out: Path) -> dict:
    cuda = dev.startswith("cuda")
    gc.collect()
    if cuda:
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats(dev)
    t_start = time.perf_counter()
    task, cfg, batch = build_task(trainer, backbone, args, dev, out)
    t_built = time.perf_counter()
    with contextlib.redirect_stdout(sys.stderr):  # the loop's log lines; stdout is for the JSON
        run(task, cfg, resume=False)
    timed = cfg.steps - task.warm
    sps = timed / (task.t1 - task.t0) if timed > 0 and task.t1 and task.t1 > task.t0 else None
    rec = {"trainer": trainer, "model": args.model,
           "device": f"{dev} ({torch.cuda.get_device_name(dev)})" if cuda else dev,
           "steps": cfg.steps, "batch": batch,
           "steps_per_s": round(sps, 3) if sps else None,
           "samples_per_s": round(sps * batch, 1) if sps else None,
           "peak_mem_gb": round(torch.cuda.max_memory_allocated(dev) / 2 ** 30, 2) if cuda else None,
           "final_loss": None if task.final_loss is None else round(task.final_loss, 4),
           "timed_steps": timed, "setup_s": round(t_built - t_start, 1),
           "total_s": round(time.perf_counter() - t_start, 1), "precision": "bf16" if cuda and
           cfg.precision in ("auto", "bf16") else "fp32"}
    scale = get_trainer(trainer).scale
    rec.update({k: getattr(cfg, k) for k in (scale(cfg.steps) if scale else {})})
    if get_trainer(trainer).data == "caption-stream":
        rec["data"] = "stream-gpu" if args.pact_stream else "cache"
    del task
    return rec


def main(argv: list[str] | None = None) -> list[dict]:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--steps", type=int, default=200, help="optimizer steps per trainer")
    ap.add_argument("--model", default="ViT-L-14", help="open_clip architecture, random init")
    ap.add_argument("--batch", type=int, default=0,
                    help="batch size for every trainer (default: each paper-scale config's)")
    ap.add_argument("--only", default=",".join(default_trainers()),
                    help="comma-separated subset of " + ",".join(default_trainers()))
    ap.add_argument("--device", default="auto", help="auto (cuda if available) | cuda | cpu")
    ap.add_argument("--threads", type=int, default=0, help="torch CPU threads (0: torch's default)")
    ap.add_argument("--pact-stream", action="store_true",
                    help="PACT: also run the frozen per-step encodes of data=stream on the device")
    args = ap.parse_args(argv)
    chosen = [t.strip() for t in args.only.split(",") if t.strip()]
    smokeable = [n for n in list_trainers() if get_trainer(n).gpu_config and get_trainer(n).data in SYNTHETIC]
    bad = sorted(set(chosen) - set(smokeable))
    if bad or not chosen:
        ap.error(f"--only takes a comma-separated subset of {','.join(smokeable)}; got {args.only!r}")
    if args.steps < 1:
        ap.error("--steps must be at least 1")
    dev = args.device if args.device != "auto" else ("cuda" if torch.cuda.is_available() else "cpu")
    if dev == "cuda":
        dev = "cuda:0"
        torch.cuda.set_device(0)
    if args.threads:
        torch.set_num_threads(args.threads)

    from cir_core.backbone import load_backbone, random_init_on_purpose

    t0 = time.perf_counter()
    with random_init_on_purpose():  # random init is the point (no download): not a failed load
        backbone = load_backbone(args.model, pretrained=None, device=dev)
    print(f"backbone {backbone.id} on {dev}: {time.perf_counter() - t0:.1f} s", file=sys.stderr)
    records = []
    with tempfile.TemporaryDirectory(prefix="gpu-smoke-") as tmp:
        for trainer in chosen:
            try:
                rec = smoke_one(trainer, backbone, args, dev, Path(tmp))
            except Exception as exc:  # report and go on: one OOM should not hide the others
                traceback.print_exc(file=sys.stderr)
                rec = {"trainer": trainer, "model": args.model, "error": f"{type(exc).__name__}: {exc}"}
            records.append(rec)
            print(json.dumps(rec), flush=True)
    return records


if __name__ == "__main__":
    sys.exit(1 if any("error" in r for r in main()) else 0)
