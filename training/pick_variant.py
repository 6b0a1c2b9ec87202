"""Choose between a method's recipe and one variant of it on the **val** split, before any test.

    python -m training.pick_variant METHOD VARIANT_EXPORT KEY=VALUE [...] [--metric val_R@10] [--json choices.json]

Both checkpoints were trained with the same seed; the recipe's is the shipped one
(`assets/methods/METHOD`), the variant's was trained with the `KEY=VALUE` overrides into
`VARIANT_EXPORT`. Each export's config records its own val metrics; the variant wins only if it is
strictly better on `--metric` (a tie keeps the recipe). When it wins, its files replace the shipped
checkpoint and its overrides are printed on stdout, one per line, for the further seeds
(`build_assets --set`); otherwise nothing is printed. The choice and both values are appended to
`--json` (a list), so the record of what was chosen, and why, outlives the run.
"""
from __future__ import annotations

import argparse
import json
import shutil
import sys
from pathlib import Path
from typing import Any

from cir_core.errors import InputError

FILES = ("config.json", "model.safetensors")


def val_metric(export: Path, metric: str) -> float:
    """`metric` from an export's config.json (`metrics`), or a clear error naming the file."""
    path = export / "config.json"
    try:
        metrics = json.loads(path.read_text())["metrics"]
    except FileNotFoundError:
        raise InputError(f"{path}: no checkpoint config (was the run trained and exported?)") from None
    except (json.JSONDecodeError, KeyError, TypeError) as exc:
        raise InputError(f"{path}: unreadable config or no 'metrics' ({exc})") from None
    if metric not in metrics:
        raise InputError(f"{path}: no metric {metric!r}; it has {sorted(metrics)[:12]}")
    return float(metrics[metric])


def pick(method: str, variant: Path, overrides: list[str], metric: str = "val_R@10") -> dict[str, Any]:
    """Compare the shipped recipe with the variant on `metric`; install the variant if it wins."""
    from cir_core.methods import default_checkpoint

    shipped = Path(default_checkpoint(method))
    base, var = val_metric(shipped, metric), val_metric(variant, metric)
    # a rerun finds the variant already installed: it stays chosen (its overrides still apply)
    installed = (shipped / FILES[1]).read_bytes() == (variant / FILES[1]).read_bytes()
    won = installed or var > base
    if won and not installed:
        for name in FILES:
            shutil.copy2(variant / name, shipped / name)
    return {"method": method, "metric": metric, "recipe": base, "variant": var, "overrides": overrides,
            "chosen": "variant" if won else "recipe", "variant_export": str(variant)}


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("method")
    ap.add_argument("variant", type=Path, help="the variant's export folder")
    ap.add_argument("overrides", nargs="+", help="the KEY=VALUE settings that made the variant")
    ap.add_argument("--metric", default="val_R@10", help="the val metric that decides (default val_R@10)")
    ap.add_argument("--json", type=Path, help="append the choice to this JSON list")
    args = ap.parse_args(argv)
    try:
        choice = pick(args.method, args.variant, args.overrides, args.metric)
    except InputError as exc:
        sys.exit(f"error: {exc}")
    print(f"{args.method}: recipe {choice['metric']} {choice['recipe']:.4f}, variant {choice['variant']:.4f} "
          f"({' '.join(args.overrides)}) -> {choice['chosen']}", file=sys.stderr)
    if args.json:
        prior = json.loads(args.json.read_text()) if args.json.is_file() else []
        args.json.write_text(json.dumps([*prior, choice], indent=2) + "\n")
    if choice["chosen"] == "variant":
        print("\n".join(args.overrides))


if __name__ == "__main__":
    main()
