"""Rebuild every shipped asset from scratch, in dependency order (the trainer registry's).

    python -m training.build_assets [--only backbone,...] [--fresh]

The steps are `training.trainers`' trainers, in order: the tiny open_clip backbone trained on
the world → assets/backbone/cir-tiny-vit/; the embed cache (frozen embeddings of 20k training
queries, not shipped, that DiCE, PACE and PACT's targets train on); then every method →
assets/methods/<name>/ (config.json + model.safetensors), each with its Chord λ chosen on val.
Each step resumes from its run folder unless --fresh is given. `--seeds 0,1,2` trains every method
once per seed: seed 0 is the shipped checkpoint, seed s > 0 goes to runs/seeds/<method>/s<s>/
(`training.seed_report` evaluates them all and writes the mean ± std tables and the intervals).
`--set key=value` (repeatable) overrides a recipe setting of every step named, e.g. the
val-chosen variant of a method for its further seeds (`training.pick_variant`). `--reuse DIR`
takes a method's checkpoint from DIR/<name> (seed s > 0: DIR/<name>-s<s>) instead of training it
when it was trained on the installed backbone with this recipe (`training.reuse`): a rebuild
continued on another machine.
"""
from __future__ import annotations

import argparse
import shutil
from pathlib import Path

from .trainers import get_trainer, list_trainers


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--only", default=",".join(list_trainers()),
                    help=f"comma-separated subset of {list_trainers()}")
    ap.add_argument("--fresh", action="store_true", help="delete each step's run folder first")
    ap.add_argument("--seeds", default="0", help="comma-separated training seeds for the methods (0: shipped)")
    ap.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                    help="override a recipe setting of every step named (repeatable)")
    ap.add_argument("--reuse", metavar="DIR", help="checkpoints trained elsewhere: reuse what fits (training.reuse)")
    args = ap.parse_args(argv)
    seeds = [int(x) for x in args.seeds.split(",") if x.strip()]
    names = [s.strip() for s in args.only.split(",") if s.strip()]
    unknown = [n for n in names if n not in list_trainers()]
    if unknown:
        raise SystemExit(f"unknown step(s) {unknown}; steps: {list_trainers()}")
    bad = [kv for kv in args.set if "=" not in kv or kv.startswith("=")]
    if bad:
        raise SystemExit(f"--set takes key=value, got {bad}")
    for name in names:
        t = get_trainer(name)
        for seed in seeds if t.method else [0]:
            overrides = list(args.set) + seed_overrides(t, seed)
            argv_ = (["--config", t.config] if t.config else []) + list(t.args) + overrides
            run_dir = f"runs/seeds/{t.name}/s{seed}/run" if seed else t.run_dir
            if args.fresh and run_dir and Path(run_dir).exists():
                shutil.rmtree(run_dir)
            if args.reuse and t.method and reused(t, seed, overrides, Path(args.reuse)):
                continue
            print(f"== {name} (seed {seed}): python -m {t.module} {' '.join(argv_)}", flush=True)
            t.main(argv_)


def reused(t, seed: int, overrides: list[str], folder: Path) -> bool:
    """Whether `folder` held a checkpoint that stands for this run (copied into its export dir)."""
    from cir_core.paths import DEFAULT_BACKBONE_DIR

    from .reuse import current_backbone_id, reuse, wanted_settings, why_not

    want = wanted_settings(t.config, overrides)
    candidate = folder / (t.name if not seed else f"{t.name}-s{seed}")
    spec = str(want.get("backbone") or f"local-dir:{DEFAULT_BACKBONE_DIR}")
    why = why_not(candidate, want, current_backbone_id(spec, want.get("pretrained")))
    if why:
        print(f"== {t.name} (seed {seed}): not reused: {why}", flush=True)
        return False
    dest = Path(want.get("export_dir") or seed_export(t.name, seed))
    reuse(candidate, dest)
    print(f"== {t.name} (seed {seed}): reused {candidate} -> {dest} (same backbone, same recipe)", flush=True)
    return True


def seed_overrides(t, seed: int) -> list[str]:
    """A method's run for `seed`: seed 0 as configured (the shipped checkpoint), another seed in
    its own run and export folders."""
    if not seed:
        return []
    return [f"seed={seed}", f"out_dir=runs/seeds/{t.name}/s{seed}/run", f"export_dir={seed_export(t.name, seed)}"]


def seed_export(method: str, seed: int) -> Path:
    """Where seed `seed`'s checkpoint of `method` is (seed 0: the shipped one)."""
    from cir_core.methods import default_checkpoint

    return default_checkpoint(method) if not seed else Path("runs/seeds") / method / f"s{seed}" / "export"


if __name__ == "__main__":
    main()
