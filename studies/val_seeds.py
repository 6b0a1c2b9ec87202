"""Seed means of a method's candidate recipes on a val benchmark, side by side: the numbers the
choices in docs/experiments/ are judged by.

    python -m studies.val_seeds --method pace recipe=r0.json,r1.json,r2.json hinge=h0.json,... \\
        [--trainer-metric val_R@1] [--json out.json]

Each file is one seed's `cir_core.eval --json` report (with `--progression` for the progression
row). Per group: each seed's and the mean ± std of the prefix progression (`step_improved_or_held`,
cosine), R@10 and R@1 (cosine), and `--trainer-metric`s read from the checkpoint's own config.json
(the report records its folder); each later group's mean minus the first group's. Reports of
another benchmark, split, query count, gallery or backbone than the first are refused by file and
key, so every mean is over the same queries.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

import numpy as np

from cir_core.errors import InputError
from cir_core.report_header import write_report

SAME = ("benchmark", "split", "n_queries", "gallery_size", "backbone")


def read_seed(path: Path, method: str, trainer_metrics: tuple[str, ...] = ()) -> dict[str, float]:
    """One report's numbers for `method`; an InputError names the file and the missing key."""
    try:
        rep = json.loads(path.read_text())
        row = rep["results"][method]["cosine"]
        out = {"R@10": 100 * row["R@10"], "R@1": 100 * row["R@1"]}
    except (OSError, ValueError) as e:
        raise InputError(f"{path}: not a readable eval report ({e})") from e
    except KeyError as e:
        raise InputError(f"{path}: no {method}/cosine result (missing key {e})") from e
    prog = rep.get("extra", {}).get(method, {}).get("cosine", {}).get("progression", {}).get("prefix")
    if prog is not None:
        out["progression"] = 100 * prog["step_improved_or_held"]
    if trainer_metrics:
        folder = rep.get("checkpoints", {}).get(method)
        if folder is None:
            raise InputError(f"{path}: no checkpoint folder for {method} (made before reports recorded it); "
                             "re-run cir_core.eval to read --trainer-metric")
        folder = f"assets/methods/{method}" if folder == "shipped" else folder
        cfg = Path(folder) / "config.json"
        try:
            metrics = json.loads(cfg.read_text())["metrics"]
            out.update({m: 100 * metrics[m] for m in trainer_metrics})
        except (OSError, ValueError, KeyError) as e:
            raise InputError(f"{cfg} (checkpoint of {path}): no trainer metric {e}") from e
    return out


def same_instrument(paths: list[Path]) -> None:
    """Refuse reports that were not measured on the first one's benchmark, by file and key."""
    first = json.loads(paths[0].read_text())
    for p in paths[1:]:
        rep = json.loads(p.read_text())
        for k in SAME:
            if rep.get(k) != first.get(k):
                raise InputError(f"{p}: {k} is {rep.get(k)!r}, but {paths[0]} has {first.get(k)!r}")


def summarise(groups: dict[str, list[Path]], method: str, trainer_metrics: tuple[str, ...] = ()) -> dict[str, Any]:
    """Per group: seeds, mean and std (ddof 1) of every number; later groups' mean differences."""
    same_instrument([p for ps in groups.values() for p in ps])
    out: dict[str, Any] = {"method": method, "groups": {}}
    for name, paths in groups.items():
        seeds = [read_seed(p, method, trainer_metrics) for p in paths]
        keys = [k for k in seeds[0] if all(k in s for s in seeds)]
        out["groups"][name] = {"files": [str(p) for p in paths], "seeds": seeds,
                               "mean": {k: round(float(np.mean([s[k] for s in seeds])), 2) for k in keys},
                               "std": {k: round(float(np.std([s[k] for s in seeds], ddof=1)), 2) if len(seeds) > 1
                                       else None for k in keys}}
    first, *rest = out["groups"].values()
    for g in rest:
        g["minus_first"] = {k: round(v - first["mean"][k], 2) for k, v in g["mean"].items() if k in first["mean"]}
    return out


def lines(rep: dict[str, Any]) -> list[str]:
    out = []
    for name, g in rep["groups"].items():
        per = "; ".join(f"{k} " + " / ".join(f"{s[k]:.1f}" for s in g["seeds"]) for k in g["mean"])
        sd = g["std"]  # None for one seed: no spread to print, not a spread of 0
        mean = ", ".join(f"{k} {v:.2f}" + ("" if sd[k] is None else f" ± {sd[k]:.2f}") for k, v in g["mean"].items())
        diff = ", ".join(f"{k} {v:+.2f}" for k, v in g.get("minus_first", {}).items())
        out.append(f"{name} ({len(g['seeds'])} seeds): {mean}" + (f"; minus the first: {diff}" if diff else ""))
        out.append(f"  per seed: {per}")
    return out


def _group(text: str) -> tuple[str, list[Path]]:
    name, sep, files = text.partition("=")
    if not sep or not name or not files:
        raise argparse.ArgumentTypeError(f"a group is NAME=REPORT[,REPORT...], not {text!r}")
    return name, [Path(f) for f in files.split(",") if f]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m studies.val_seeds", description=__doc__.split("\n\n")[0])
    ap.add_argument("groups", nargs="+", type=_group, metavar="NAME=REPORT,...")
    ap.add_argument("--method", required=True)
    ap.add_argument("--trainer-metric", action="append", default=[], help="e.g. val_R@1 (repeatable)")
    ap.add_argument("--json", type=Path)
    a = ap.parse_args(argv)
    groups = dict(a.groups)
    if len(groups) < len(a.groups):
        ap.error("a group name is given twice")
    try:
        rep = summarise(groups, a.method, tuple(a.trainer_metric))
    except InputError as e:
        ap.error(str(e))
    print("\n".join(lines(rep)))
    if a.json:
        write_report(a.json, rep)
    return 0


if __name__ == "__main__":
    sys.exit(main())
