"""Typed config dataclasses from and to JSON (`DictConfig`), and the checkout's commit that every
checkpoint records. (Paths: `cir_core.paths`; the engine's settings: `cir_core.settings`.)"""
from __future__ import annotations

import subprocess
from dataclasses import MISSING, asdict, fields, is_dataclass
from pathlib import Path
from typing import Any, Mapping, TypeVar

from .errors import InputError
from .paths import REPO_ROOT

C = TypeVar("C", bound="DictConfig")

def git_commit(root: Path = REPO_ROOT) -> str:
    """Short hash of the checkout's HEAD (this one, or the one at `root`), recorded in every
    checkpoint; "unknown" outside git."""
    try:
        return subprocess.check_output(["git", "rev-parse", "--short", "HEAD"], text=True,
                                       stderr=subprocess.DEVNULL, cwd=root).strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def git_dirty(root: Path = REPO_ROOT) -> bool | None:
    """Whether the checkout at `root` has uncommitted changes to tracked files (numbers measured
    on such a tree are not the commit's); None outside git."""
    try:
        out = subprocess.check_output(["git", "status", "--porcelain", "--untracked-files=no"], text=True,
                                      stderr=subprocess.DEVNULL, cwd=root)
    except (OSError, subprocess.CalledProcessError):
        return None
    return bool(out.strip())


class DictConfig:
    """Mixin for the project's typed config dataclasses (method architectures, trainer settings):
    built from a JSON dict and written back as one. A number is cast to the type of the field's
    default (JSON writes 4.0 as 4); `strict` refuses unknown keys (a misspelt hyper-parameter
    must not be silently ignored); `_comment` keys are documentation and always skipped."""

    @classmethod
    def from_dict(cls: type[C], data: Mapping[str, Any], strict: bool = False) -> C:
        if not is_dataclass(cls):
            raise TypeError(f"{cls.__name__} is a DictConfig but not a dataclass")
        known = {f.name: f for f in fields(cls)}
        unknown = sorted(k for k in data if k not in known and not k.startswith("_comment"))
        if strict and unknown:
            raise InputError(f"unknown {cls.__name__} setting(s) {unknown}; known: {sorted(known)}")
        return cls(**{k: _cast(v, known[k]) for k, v in data.items() if k in known})

    def to_dict(self) -> dict[str, Any]:
        if not is_dataclass(self):
            raise TypeError(f"{type(self).__name__} is a DictConfig but not a dataclass")
        return asdict(self)


def _cast(value: Any, field: Any) -> Any:
    default = field.default if field.default is not MISSING else None
    if isinstance(default, bool) or isinstance(value, bool) or value is None:
        return value
    if isinstance(default, float) and isinstance(value, int):
        return float(value)
    if isinstance(default, int) and isinstance(value, float) and value.is_integer():
        return int(value)
    return value
