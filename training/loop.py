"""The one training loop every trainer uses.

A trainer supplies a `TrainTask` (its model, its batches, its loss, its validation, its export); the
loop owns everything else: seeding, AdamW with warmup + cosine, gradient accumulation, bf16
autocast on CUDA, DDP under torchrun, tqdm, periodic validation, and resumable checkpoints
(`<out>/last/`: trainables as safetensors, optimizer state loaded with weights_only=True, a JSON
state; tensors written and shape-checked on resume by `cir_core.checkpoint`, as every checkpoint
is). Batches are a pure function of (seed, step, rank), so a resumed run sees the same data.
"""
from __future__ import annotations

import argparse
import json
import math
import random
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol, TypeVar

import numpy as np
import torch
from tqdm import tqdm

from cir_core import env
from cir_core.checkpoint import check_fit, read_weights, shapes_of, write_weights
from cir_core.config import DictConfig, git_commit
from cir_core.errors import InputError
from cir_core.fileio import atomic_folder, folder_or_aside, loads_json
from cir_core.progress import bar as progress_bar

C = TypeVar("C", bound="LoopConfig")


@dataclass
class LoopConfig(DictConfig):
    """What the loop itself reads. A trainer's settings dataclass extends it with its own typed
    fields (and its own defaults for these), so one flat JSON config fills both."""

    steps: int = 1000
    lr: float = 1e-3
    weight_decay: float = 0.1
    warmup: int = 100
    schedule: str = "cosine"  # cosine | constant (after warmup)
    grad_accum: int = 1
    grad_clip: float = 1.0
    eval_every: int = 500
    ckpt_every: int = 500
    log_every: int = 50
    seed: int = 0
    device: str = "auto"
    precision: str = "auto"  # auto (bf16 on CUDA, fp32 on CPU) | fp32 | bf16
    threads: int = 0  # CPU threads; 0 leaves torch's default
    max_minutes: float = 0.0  # stop (with a checkpoint) after this wall time; 0 = no limit
    out_dir: str = "runs/default"


class TrainTask(Protocol):
    model: torch.nn.Module  # everything trainable lives under this module

    def param_groups(self, cfg: LoopConfig) -> list[dict]: ...
    def batch(self, step: int, rank: int, rng: random.Random) -> Any: ...
    def loss(self, model: torch.nn.Module, batch: Any) -> tuple[torch.Tensor, dict[str, float]]: ...
    def validate(self) -> dict[str, float]: ...
    def export(self, out_dir: Path, metrics: dict[str, float]) -> None: ...
    # optional: before_step(self, step: int, optimizer) -> None, called after the lr is set
    # optional: global_batches = True: every process gets the same rng (one batch for all of them,
    # which the task splits by `self.rank` / `self.world`, set by the loop) instead of its own
    # optional: after_run(self, clock: dict) -> None, called before export with `run_clock`


def seed_everything(seed: int) -> None:
    random.seed(seed)
    np.random.seed(seed % (1 << 32))
    torch.manual_seed(seed)


def _dist() -> tuple[int, int, int]:
    """(rank, world size, local rank) under torchrun; (0, 1, 0) otherwise."""
    world = int(env.read("WORLD_SIZE", "1"))
    if world > 1 and not torch.distributed.is_initialized():
        backend = "nccl" if torch.cuda.is_available() else "gloo"
        torch.distributed.init_process_group(backend)
    return int(env.read("RANK", "0")), world, int(env.read("LOCAL_RANK", "0"))


def lr_factor(step: int, cfg: LoopConfig) -> float:
    if step < cfg.warmup:
        return (step + 1) / cfg.warmup
    if cfg.schedule == "constant":
        return 1.0
    t = (step - cfg.warmup) / max(1, cfg.steps - cfg.warmup)
    return 0.5 * (1 + math.cos(math.pi * min(1.0, t)))


def run_clock(clock: dict, cfg: LoopConfig) -> dict:
    """Wall time and speed over every session of a (resumed) run: `wall_time_s` counts training,
    validation and checkpoints; `steps_per_s` counts optimizer steps over step time only."""
    steps, step_s = clock.get("steps_run", 0), clock.get("step_time_s", 0.0)
    return {"wall_time_s": round(clock.get("wall_time_s", 0.0), 1), "step_time_s": round(step_s, 1),
            "steps": clock.get("step", 0), "steps_run": steps, "sessions": clock.get("sessions", 0),
            "steps_per_s": round(steps / step_s, 4) if step_s else None,
            "threads": cfg.threads or torch.get_num_threads()}


def _save(out: Path, task: TrainTask, opt: torch.optim.Optimizer, step: int, cfg: LoopConfig,
          history: list, clock: dict | None = None) -> None:
    state = {k: v.detach().clone() for k, v in task.model.state_dict().items()}

    def write(folder: Path) -> None:
        write_weights(folder / "model.safetensors", state)
        torch.save(opt.state_dict(), folder / "optimizer.pt")
        torch.save({"torch_rng": torch.get_rng_state()}, folder / "rng.pt")
        (folder / "state.json").write_text(json.dumps(
            {"step": step, "config": cfg.to_dict(), "history": history, "clock": clock or {},
             "git_commit": git_commit()}, indent=1))

    # One step from the old checkpoint to the new: a kill at any instant leaves one whole (the old
    # code removed `last` before renaming the new one in, and a kill between left none).
    out.mkdir(parents=True, exist_ok=True)
    atomic_folder(out / "last", write)


def _last(out: Path) -> Path | None:
    """The resumable checkpoint's folder (`last`, or the one a crash left set aside mid-swap)."""
    return folder_or_aside(Path(out) / "last")


def _saved_state(out: Path) -> dict | None:
    last = _last(out)
    path = last / "state.json" if last is not None else None
    return loads_json(path.read_text()) if path is not None and path.is_file() else None


def saved_step(out: Path) -> int:
    """The step of the resumable checkpoint in run folder `out` (0: none yet)."""
    state = _saved_state(out)
    return int(state["step"]) if state else 0


def _resume(out: Path, task: TrainTask, opt: torch.optim.Optimizer) -> tuple[int, list, dict]:
    last, state = _last(out), _saved_state(out)
    if state is None or last is None:
        return 0, [], {}
    path = last / "model.safetensors"
    expected = shapes_of(task.model.state_dict())  # another architecture in the same out_dir: refused
    task.model.load_state_dict(read_weights(path, lambda shapes: check_fit(
        shapes, expected, str(path), "this run's model (resume it with the settings it was started with)")))
    opt.load_state_dict(torch.load(last / "optimizer.pt", weights_only=True))
    torch.set_rng_state(torch.load(last / "rng.pt", weights_only=True)["torch_rng"])
    return int(state["step"]), list(state.get("history", [])), dict(state.get("clock", {}))


def check_intervals(cfg: LoopConfig) -> None:
    """Refuse, by key, a step count or interval the loop would divide by or never reach."""
    for key in ("steps", "eval_every", "ckpt_every", "log_every", "grad_accum"):
        if getattr(cfg, key) < 1:
            raise SystemExit(f"error: {key} must be a whole number >= 1, got {getattr(cfg, key)}")


def run(task: TrainTask, cfg: LoopConfig, resume: bool = True) -> dict[str, float]:
    """Train `task` for cfg.steps optimizer updates; returns the final validation metrics."""
    check_intervals(cfg)
    rank, world, local = _dist()
    if cfg.threads:
        torch.set_num_threads(cfg.threads)
    seed_everything(cfg.seed + rank)
    dev = cfg.device if cfg.device != "auto" else ("cuda" if torch.cuda.is_available() else "cpu")
    if dev == "cuda":
        dev = f"cuda:{local}"
        torch.cuda.set_device(local)
    use_bf16 = cfg.precision == "bf16" or (cfg.precision == "auto" and dev.startswith("cuda"))
    task.model.to(dev)
    out = Path(cfg.out_dir)
    opt = torch.optim.AdamW(task.param_groups(cfg), lr=cfg.lr, weight_decay=cfg.weight_decay)
    for g in opt.param_groups:
        g["base_lr"] = g["lr"]
    start, history, clock = _resume(out, task, opt) if resume else (0, [], {})
    clock["sessions"] = clock.get("sessions", 0) + 1
    base_wall = clock.get("wall_time_s", 0.0)
    if getattr(task, "global_batches", False):  # the task splits one shared batch by rank itself
        task.rank, task.world = rank, world
    model, wrapped_for = task.model, None
    t0, metrics = time.time(), {}
    bar = progress_bar(range(start, cfg.steps), initial=start, total=cfg.steps, disable=rank != 0,
                       desc=Path(cfg.out_dir).name, dynamic_ncols=True)
    for step in bar:
        t_step = time.time()
        for g in opt.param_groups:
            g["lr"] = g["base_lr"] * lr_factor(step, cfg)
        if hasattr(task, "before_step"):  # e.g. PACT's phases: freeze a group by zeroing its lr
            task.before_step(step, opt)
        if world > 1:  # a fresh DDP whenever the set of trainable parameters changes (PACT's phases)
            trainable = frozenset(n for n, p in task.model.named_parameters() if p.requires_grad)
            if trainable != wrapped_for:
                model, wrapped_for = torch.nn.parallel.DistributedDataParallel(
                    task.model, device_ids=[local] if dev.startswith("cuda") else None), trainable
        model.train()
        logs: dict[str, float] = {}
        for micro in range(cfg.grad_accum):
            shared = getattr(task, "global_batches", False)  # one batch for all processes, or one each
            rng = random.Random(f"{cfg.seed}:{step}:{micro}" + ("" if shared else f":{rank}"))
            batch = task.batch(step, rank, rng)
            with torch.autocast("cuda", dtype=torch.bfloat16, enabled=use_bf16):
                loss, logs = task.loss(model, batch)
            (loss / cfg.grad_accum).backward()
        if cfg.grad_clip:
            torch.nn.utils.clip_grad_norm_(task.model.parameters(), cfg.grad_clip)
        opt.step()
        opt.zero_grad(set_to_none=True)
        done = step + 1
        clock["step_time_s"] = clock.get("step_time_s", 0.0) + time.time() - t_step
        clock["steps_run"], clock["step"] = clock.get("steps_run", 0) + 1, done
        if done % cfg.log_every == 0:
            bar.set_postfix({k: f"{v:.3f}" for k, v in logs.items()})
        timed_out = cfg.max_minutes and (time.time() - t0) > 60 * cfg.max_minutes
        if rank == 0 and (done % cfg.eval_every == 0 or done == cfg.steps or timed_out):
            task.model.eval()
            metrics = task.validate()
            clock["wall_time_s"] = base_wall + time.time() - t0
            speed = {k: run_clock(clock, cfg)[k] for k in ("wall_time_s", "steps_per_s")}
            history.append({"step": done, **metrics, **logs, **speed})
            tqdm.write(json.dumps(history[-1]))
        if rank == 0 and (done % cfg.ckpt_every == 0 or done == cfg.steps or timed_out):
            clock["wall_time_s"] = base_wall + time.time() - t0
            _save(out, task, opt, done, cfg, history, clock)
        if timed_out:
            tqdm.write(f"stopping after {cfg.max_minutes} min at step {done} (resumable)")
            break
    if rank == 0:
        if not metrics:
            task.model.eval()
            metrics = task.validate()
        clock["wall_time_s"] = base_wall + time.time() - t0
        if hasattr(task, "after_run"):
            task.after_run(run_clock(clock, cfg))
        task.export(out, metrics)
    return metrics


def parse_cli(defaults: C, argv: list[str] | None, doc: str | None) -> tuple[C, bool, argparse.Namespace]:
    """Every trainer's command line: `--config FILE`, `--no-resume`, `key=value` overrides.
    Returns (settings of the trainer's own type, resume, parsed args)."""
    ap = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--config", help="JSON file of settings (loop and trainer keys)")
    ap.add_argument("--no-resume", action="store_true", help="ignore a checkpoint in out_dir")
    ap.add_argument("overrides", nargs="*", help="key=value, e.g. steps=200 out_dir=runs/x")
    args = ap.parse_args(argv)
    try:
        cfg = config_from_args(defaults, args.config, args.overrides)
    except InputError as exc:
        raise SystemExit(f"error: {exc}") from None
    return cfg, not args.no_resume, args


def config_from_args(defaults: C, config_file: str | None, overrides: list[str]) -> C:
    """Defaults < JSON config file < `key=value` overrides, as the trainer's settings type; a key
    it does not know is an error naming the known ones (a misspelt setting is never ignored)."""
    data = defaults.to_dict()
    if config_file:
        path = Path(config_file)
        if not path.is_file():
            raise InputError(f"config file not found: {config_file}")
        data.update(loads_json(path.read_text()))
    for ov in overrides:
        key, sep, val = ov.partition("=")
        if not sep:
            raise InputError(f"override {ov!r} is not key=value")
        data[key] = _parse(val)
    return type(defaults).from_dict(data, strict=True)


def _parse(s: str) -> Any:
    try:
        return loads_json(s)
    except ValueError:
        return s
