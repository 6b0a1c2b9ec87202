"""Rebuild every shipped asset from scratch, in dependency order.

    python -m training.build_assets [--only backbone,...] [--fresh]

1. backbone: the tiny open_clip model trained on the world (training/configs/backbone_tiny.json)
   → assets/backbone/cir-tiny-vit/ (open_clip local-dir: config + safetensors).
Later steps (the four methods) train on top of it and are added here as they land.
Each step resumes from its run folder unless --fresh is given.
"""
from __future__ import annotations

import argparse
import shutil
from pathlib import Path

from cir_core.config import REPO_ROOT

CONFIGS = REPO_ROOT / "training" / "configs"
STEPS = {
    "backbone": ("training.train_backbone", CONFIGS / "backbone_tiny.json", "runs/backbone"),
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
        module, config, run_dir = STEPS[name]
        if args.fresh and Path(run_dir).exists():
            shutil.rmtree(run_dir)
        print(f"== {name}: python -m {module} --config {config.relative_to(REPO_ROOT)}")
        importlib.import_module(module).main(["--config", str(config)])


if __name__ == "__main__":
    main()
