"""Rebuild every shipped asset from scratch, in dependency order.

    python -m training.build_assets [--only backbone,...] [--fresh]

1. backbone: the tiny open_clip model trained on the world (training/configs/backbone_tiny.json)
   → assets/backbone/cir-tiny-vit/ (open_clip local-dir: config + safetensors).
2. embed-cache: frozen embeddings of 20k training queries under that backbone (not shipped;
   DiCE, PACE and PACT's targets train on it).
3. dice, pace, pact, compose-only → assets/methods/<name>/ (config.json + model.safetensors),
   each with its Chord λ chosen on the val split.
Each training step resumes from its run folder unless --fresh is given.
"""
from __future__ import annotations

import argparse
import shutil
from pathlib import Path

from cir_core.config import REPO_ROOT

CONFIGS = REPO_ROOT / "training" / "configs"
STEPS = {
    "backbone": ("training.train_backbone", ["--config", CONFIGS / "backbone_tiny.json"], "runs/backbone"),
    "embed-cache": ("training.embed_cache", ["--n", "20000", "--threads", "1"], None),
    "dice": ("training.train_dice", ["--config", CONFIGS / "dice_tiny.json"], "runs/dice"),
    "pace": ("training.train_pace", ["--config", CONFIGS / "pace_tiny.json"], "runs/pace"),
    "pact": ("training.train_pact", ["--config", CONFIGS / "pact_tiny.json"], "runs/pact"),
    "compose-only": ("training.train_pact", ["--config", CONFIGS / "compose_only_tiny.json"],
                     "runs/compose-only"),
}


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--only", default=",".join(STEPS), help=f"comma-separated subset of {list(STEPS)}")
    ap.add_argument("--fresh", action="store_true", help="delete each step's run folder first")
    args = ap.parse_args(argv)
    import importlib

    for name in [s.strip() for s in args.only.split(",") if s.strip()]:
        if name not in STEPS:
            raise SystemExit(f"unknown step {name!r}; steps: {list(STEPS)}")
        module, argv_, run_dir = STEPS[name]
        if args.fresh and run_dir and Path(run_dir).exists():
            shutil.rmtree(run_dir)
        argv_ = [str(a.relative_to(REPO_ROOT)) if isinstance(a, Path) else a for a in argv_]
        print(f"== {name}: python -m {module} {' '.join(argv_)}", flush=True)
        importlib.import_module(module).main(argv_)


if __name__ == "__main__":
    main()
