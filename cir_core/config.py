"""Project-wide defaults that several modules share."""
from __future__ import annotations

import os
import subprocess
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
ASSETS_DIR = REPO_ROOT / "assets"


def cache_dir() -> Path:
    """Where gallery embeddings are cached: $CIR_CACHE_DIR, else ~/.cache/cir-workbench."""
    return Path(os.environ.get("CIR_CACHE_DIR", Path.home() / ".cache" / "cir-workbench"))


def git_commit() -> str:
    """Short hash of the checkout's HEAD, recorded in every checkpoint; "unknown" outside git."""
    try:
        return subprocess.check_output(["git", "rev-parse", "--short", "HEAD"], text=True,
                                       stderr=subprocess.DEVNULL, cwd=REPO_ROOT).strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
