"""The trainers by name: what `build_assets`, `gpu_smoke` and `ablations.sh` read.

    python -m training.registry                 # the table
    python -m training.registry config dice     # the shipped recipe's path (ablations.sh)

An entry says which module trains it (`python -m MODULE --config CONFIG`), which registered method
its checkpoint is (`cir_core.methods`), its paper-scale config for the GPU smoke check, its
`TrainTask` class and the data its batches read (so the smoke check can stand synthetic data in).
Each trainer module registers its own entries (`register_trainer(Trainer(...))` at import); the
registry imports every module of the `training` package once, on first use, so a new trainer is
one file and a config: nothing else changes.
"""
from __future__ import annotations

import argparse
import importlib
import pkgutil
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
    stage: int = 2  # build order: 0 the backbone, 1 what is built from it, 2 the methods

    def main(self, argv: list[str]) -> Any:
        return importlib.import_module(self.module).main(argv)

    def task_class(self) -> type:
        if self.task is None:
            raise ValueError(f"trainer {self.name!r} names no TrainTask")
        return getattr(importlib.import_module(self.module), self.task)


_TRAINERS: dict[str, Trainer] = {}
_discovered = False


def register_trainer(t: Trainer) -> Trainer:
    """Add `t` (the same module registering again, e.g. once as `__main__`, just replaces it)."""
    if t.name in _TRAINERS and _TRAINERS[t.name].module != t.module:
        raise ValueError(f"trainer {t.name!r} registered twice ({_TRAINERS[t.name].module}, {t.module})")
    _TRAINERS[t.name] = t
    return t


def unregister_trainer(name: str) -> None:
    _TRAINERS.pop(name, None)


def _discover() -> None:
    """Import every module of the training package once: each registers its own trainers."""
    global _discovered
    if _discovered:
        return
    _discovered = True
    package = importlib.import_module(__package__)
    for m in sorted(m.name for m in pkgutil.iter_modules(package.__path__)):
        importlib.import_module(f"{__package__}.{m}")


def list_trainers() -> list[str]:
    """Trainer names in build order: by stage, then in registration order."""
    _discover()
    order = list(_TRAINERS)
    return sorted(order, key=lambda n: (_TRAINERS[n].stage, order.index(n)))


def get_trainer(name: str) -> Trainer:
    _discover()
    if name not in _TRAINERS:
        raise KeyError(f"unknown trainer {name!r}; registered: {', '.join(_TRAINERS)}")
    return _TRAINERS[name]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("what", nargs="?", choices=("list", "module", "config", "gpu-config", "method"), default="list")
    ap.add_argument("name", nargs="?")
    a = ap.parse_args(argv)
    # Under `python -m training.registry` this file runs as __main__; the trainers register in
    # the module `training.registry`, so ask that one.
    reg = importlib.import_module("training.registry")
    if a.what == "list":
        for n in reg.list_trainers():
            t = reg.get_trainer(n)
            print(f"{n:14} {t.module:26} {t.config or '-':40} method={t.method or '-'}")
        return 0
    if not a.name:
        ap.error(f"{a.what} needs a trainer name")
    t = reg.get_trainer(a.name)
    value = {"module": t.module, "config": t.config, "gpu-config": t.gpu_config, "method": t.method}[a.what]
    if value is None:
        ap.error(f"trainer {a.name!r} has no {a.what}")
    print(value)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
