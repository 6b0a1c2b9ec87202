"""Rebuild every shipped asset from scratch, in dependency order (the trainer registry's).

    python -m training.build_assets [--only backbone,...] [--fresh]

The steps are `training.registry`'s trainers, in order: the tiny open_clip backbone trained on
the world → assets/backbone/cir-tiny-vit/; the embed cache (frozen embeddings of 20k training
queries, not shipped, that DiCE, PACE and PACT's targets train on); then every method →
assets/methods/<name>/ (config.json + model.safetensors), each with its Chord λ chosen on val.
Each step resumes from its run folder unless --fresh is given.
"""
from __future__ import annotations

import argparse
import shutil
from pathlib import Path

from .registry import get_trainer, list_trainers


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--only", default=",".join(list_trainers()),
                    help=f"comma-separated subset of {list_trainers()}")
    ap.add_argument("--fresh", action="store_true", help="delete each step's run folder first")
    args = ap.parse_args(argv)
    names = [s.strip() for s in args.only.split(",") if s.strip()]
    unknown = [n for n in names if n not in list_trainers()]
    if unknown:
        raise SystemExit(f"unknown step(s) {unknown}; steps: {list_trainers()}")
    for name in names:
        t = get_trainer(name)
        if args.fresh and t.run_dir and Path(t.run_dir).exists():
            shutil.rmtree(t.run_dir)
        argv_ = (["--config", t.config] if t.config else []) + list(t.args)
        print(f"== {name}: python -m {t.module} {' '.join(argv_)}", flush=True)
        t.main(argv_)


if __name__ == "__main__":
    main()
