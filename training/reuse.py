"""A checkpoint trained elsewhere, taken instead of training again (`build_assets --reuse DIR`).

A rebuild may span machines and sessions: its run folders stay behind, its exported checkpoints
can travel (committed, copied). A method's export in DIR is reused only when it was trained on
the backbone installed now (the checkpoint's backbone id) with this recipe: every setting of the
recipe file and of the command line as the checkpoint's `training` record has it. Anything else is
trained, and the reason is printed.
"""
from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any, Sequence

from cir_core.fileio import atomic_write_path, loads_json


def _value(text: str) -> Any:
    try:
        return loads_json(text)
    except ValueError:
        return text  # a path or a name: compared as written


def wanted_settings(config: str | None, overrides: Sequence[str]) -> dict[str, Any]:
    """The settings a run of `config` with `key=value` overrides asks for (comments left out)."""
    want = {k: v for k, v in loads_json(Path(config).read_text()).items() if not k.startswith("_")} if config else {}
    for kv in overrides:
        key, _, text = kv.partition("=")
        want[key] = _value(text)
    return want


def why_not(candidate: Path, want: dict[str, Any], backbone_id: str) -> str | None:
    """None when `candidate` (a method checkpoint folder) may stand for this run; else why not."""
    cfg_path = candidate / "config.json"
    if not cfg_path.is_file() or not (candidate / "model.safetensors").is_file():
        return f"{candidate} holds no checkpoint"
    cfg = loads_json(cfg_path.read_text())
    if cfg.get("backbone") != backbone_id:
        return f"{candidate} was trained on {cfg.get('backbone')}, not {backbone_id}"
    got = cfg.get("training") or {}
    differ = sorted(k for k, v in want.items() if k not in ("export_dir", "out_dir") and got.get(k) != v)
    if differ:
        return f"{candidate} was trained with other settings: " + ", ".join(
            f"{k}={got.get(k)!r} (recipe {want[k]!r})" for k in differ[:4])
    return None


def reuse(candidate: Path, dest: Path) -> None:
    """Copy the checkpoint folder `candidate` to `dest`, each file replaced whole."""
    dest.mkdir(parents=True, exist_ok=True)
    for f in sorted(candidate.iterdir()):
        if f.is_file():
            atomic_write_path(dest / f.name, lambda tmp, f=f: shutil.copyfile(f, tmp))


def current_backbone_id(spec: str, pretrained: str | None = None) -> str:
    """The id of the backbone `spec` names now (loads it: a second or two for the tiny one)."""
    from cir_core.backbone import load_backbone

    return load_backbone(spec, pretrained).id
