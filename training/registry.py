"""The trainer entry type and the register: each trainer module registers its own entries
(`register_trainer(Trainer(...))` at import). This module imports no trainer; the catalogue that
imports them all, lists them and prints the table is `training.trainers`
(`python -m training.trainers`), so that the tools that read the list (`build_assets`,
`gpu_smoke`) sit above the trainers instead of in a circle with them.
"""
from __future__ import annotations

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
    stage: int = 2  # build order: 0 the backbone, 1 what is built from it, 2 the methods

    def main(self, argv: list[str]) -> Any:
        return importlib.import_module(self.module).main(argv)

    def task_class(self) -> type:
        if self.task is None:
            raise ValueError(f"trainer {self.name!r} names no TrainTask")
        return getattr(importlib.import_module(self.module), self.task)


_TRAINERS: dict[str, Trainer] = {}


def register_trainer(t: Trainer) -> Trainer:
    """Add `t` (the same module registering again, e.g. once as `__main__`, just replaces it)."""
    if t.name in _TRAINERS and _TRAINERS[t.name].module != t.module:
        raise ValueError(f"trainer {t.name!r} registered twice ({_TRAINERS[t.name].module}, {t.module})")
    _TRAINERS[t.name] = t
    return t


def unregister_trainer(name: str) -> None:
    _TRAINERS.pop(name, None)


def registered() -> dict[str, Trainer]:
    """The entries registered so far, by name, in registration order (import
    `training.trainers` first for all of them)."""
    return dict(_TRAINERS)
