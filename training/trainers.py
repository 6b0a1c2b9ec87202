"""Every trainer, by name: what `build_assets`, `gpu_smoke`, `ablations.sh` and `rebuild.sh` read.

    python -m training.trainers                 # the table
    python -m training.trainers config dice     # the shipped recipe's path (ablations.sh)

An entry (`training.registry.Trainer`) says which module trains it (`python -m MODULE --config
CONFIG`), which registered method its checkpoint is, its paper-scale config for the GPU smoke
check, its `TrainTask` class and the data its batches read. Each trainer module registers its own
entries at import; this catalogue imports them (as timm's `models/__init__` imports each model
file), so a new trainer is its file, its config and one line below —
`tests/test_trainer_base.py` fails naming any module that registers a trainer and is missing here.
"""
from __future__ import annotations

import argparse

# Alphabetical: the registration order, which breaks ties within a build stage.
from . import (  # noqa: F401
    cirevl_lambda,
    embed_cache,
    ship_gallery,
    train_backbone,
    train_dice,
    train_lincir,
    train_pace,
    train_pact,
    train_pic2word,
    train_rtd,
    train_searle,
)
from .registry import Trainer, registered


def list_trainers() -> list[str]:
    """Trainer names in build order: by stage, then in registration order."""
    table = registered()
    order = list(table)
    return sorted(order, key=lambda n: (table[n].stage, order.index(n)))


def get_trainer(name: str) -> Trainer:
    table = registered()
    if name not in table:
        raise KeyError(f"unknown trainer {name!r}; registered: {', '.join(table)}")
    return table[name]


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
