"""The trainers by name: what `build_assets`, `gpu_smoke` and `ablations.sh` read.

    python -m training.registry                 # the table
    python -m training.registry config dice     # the shipped recipe's path (ablations.sh)

An entry says which module trains it (`python -m MODULE --config CONFIG`), which registered method
its checkpoint is (`cir_core.methods`), its paper-scale config for the GPU smoke check, its
`TrainTask` class and the data its batches read (so the smoke check can stand synthetic data in).
A new trainer registers an entry here (or at run time, with `register_trainer`); nothing else
changes.
"""
from __future__ import annotations

import argparse
import importlib
from dataclasses import dataclass
from typing import Any, Callable

CONFIGS = "training/configs"


@dataclass(frozen=True)
class Trainer:
    name: str
    module: str  # its `main(argv)` trains; `python -m MODULE`
    config: str | None = None  # the shipped recipe, relative to the repo root
    method: str | None = None  # the registered method its checkpoint is
    gpu_config: str | None = None  # paper-scale settings (training/gpu_smoke.py)
    task: str | None = None  # the TrainTask class in `module`
    data: str | None = None  # what its batches read: "embed-cache" | "caption-stream" (gpu_smoke fakes it)
    args: tuple[str, ...] = ()  # more command-line arguments for build_assets
    run_dir: str | None = None  # its resumable run folder (build_assets --fresh deletes it)
    scale: Callable[[int], dict[str, Any]] | None = None  # settings that fit the recipe to N steps
    smoke: bool = True  # in gpu_smoke's default set (False: same network and loop as another)

    def main(self, argv: list[str]) -> Any:
        return importlib.import_module(self.module).main(argv)

    def task_class(self) -> type:
        if self.task is None:
            raise ValueError(f"trainer {self.name!r} names no TrainTask")
        return getattr(importlib.import_module(self.module), self.task)


_TRAINERS: dict[str, Trainer] = {}


def register_trainer(t: Trainer) -> Trainer:
    if t.name in _TRAINERS and _TRAINERS[t.name] != t:
        raise ValueError(f"trainer {t.name!r} registered twice")
    _TRAINERS[t.name] = t
    return t


def unregister_trainer(name: str) -> None:
    _TRAINERS.pop(name, None)


def list_trainers() -> list[str]:
    """Trainer names in build order (each after what it needs)."""
    return list(_TRAINERS)


def get_trainer(name: str) -> Trainer:
    if name not in _TRAINERS:
        raise KeyError(f"unknown trainer {name!r}; registered: {', '.join(_TRAINERS)}")
    return _TRAINERS[name]


def _pact_phases(steps: int) -> dict[str, int]:
    """PACT's two phases in the paper's proportion (333 : 1000)."""
    ident = max(1, round(steps / 4)) if steps > 1 else steps
    return {"identity_steps": ident, "joint_steps": steps - ident}


for _t in (
    Trainer("backbone", "training.train_backbone", f"{CONFIGS}/backbone_tiny.json", run_dir="runs/backbone"),
    Trainer("embed-cache", "training.embed_cache", args=("--n", "20000", "--threads", "1")),
    Trainer("dice", "training.train_dice", f"{CONFIGS}/dice_tiny.json", "dice", f"{CONFIGS}/dice_vitl14.json",
            "DiCETask", "embed-cache", run_dir="runs/dice"),
    Trainer("pace", "training.train_pace", f"{CONFIGS}/pace_tiny.json", "pace", f"{CONFIGS}/pace_vitl14.json",
            "PACETask", "embed-cache", run_dir="runs/pace"),
    Trainer("pact", "training.train_pact", f"{CONFIGS}/pact_tiny.json", "pact", f"{CONFIGS}/pact_vitl14.json",
            "PACTTask", "caption-stream", run_dir="runs/pact", scale=_pact_phases),
    Trainer("compose-only", "training.train_pact", f"{CONFIGS}/compose_only_tiny.json", "compose-only",
            f"{CONFIGS}/compose_only_vitl14.json", "PACTTask", "caption-stream", run_dir="runs/compose-only",
            scale=_pact_phases, smoke=False),
):
    register_trainer(_t)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("what", nargs="?", choices=("list", "module", "config", "gpu-config", "method"), default="list")
    ap.add_argument("name", nargs="?")
    a = ap.parse_args(argv)
    if a.what == "list":
        for n in list_trainers():
            t = get_trainer(n)
            print(f"{n:14} {t.module:26} {t.config or '-':40} method={t.method or '-'}")
        return 0
    if not a.name:
        ap.error(f"{a.what} needs a trainer name")
    t = get_trainer(a.name)
    value = {"module": t.module, "config": t.config, "gpu-config": t.gpu_config, "method": t.method}[a.what]
    if value is None:
        ap.error(f"trainer {a.name!r} has no {a.what}")
    print(value)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
