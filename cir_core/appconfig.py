"""The app's settings: command-line flags, each with an environment variable for Spaces.

Precedence: flag > environment variable > default. The default is fully offline: the generated
world's test gallery, the shipped tiny backbone and the shipped method checkpoints. Importing this
module imports nothing heavy (no torch, no huggingface_hub), so `app.py` can set `HF_HUB_OFFLINE`
from it before anything reads that variable.

| flag | env | default |
| --- | --- | --- |
| `--backbone` | `CIR_BACKBONE` | the shipped `local-dir:assets/backbone/cir-tiny-vit` |
| `--pretrained` | `CIR_PRETRAINED` | none (an open_clip tag or a weights file) |
| `--checkpoints` | `CIR_CHECKPOINTS` | `assets/methods` (a folder of `<method>/`, or a Hub repo id `org/name[@rev]`) |
| (in the spec: `@rev`) | `CIR_CHECKPOINTS_REVISION`, `CIR_BACKBONE_REVISION` | the branch, tag or commit sha a Hub checkpoint repo / `hf-hub:` backbone is pinned to when its spec has no `@rev` |
| `--gallery` | `CIR_GALLERY` | `world` (or an image folder, a JSONL/CSV manifest, an index folder, `movienet:ROOT`) |
| `--world-queries` | `CIR_WORLD_QUERIES` | 1000 (the world gallery holds ~8 images per query) |
| `--db` | `CIR_DB` | `annotations.sqlite` (the annotation tab's database) |
| `--db-repo` | `CIR_DB_REPO` | none: a Hub dataset repo (or `file:///dir`) the annotation DB is snapshotted to and restored from |
| `--annotators` | `CIR_ANNOTATORS` | none: a file of `name:password` lines turns on Gradio's login page |
| `--host` | `CIR_HOST` | Gradio's (127.0.0.1, or `GRADIO_SERVER_NAME`) |
| `--port` | `CIR_PORT` | Gradio's (7860, or `GRADIO_SERVER_PORT`) |
| `--device` | `CIR_DEVICE` | `cpu` |
| `--cache-dir` | `CIR_CACHE_DIR` | `~/.cache/cir-workbench` (gallery embeddings) |
"""
from __future__ import annotations

import argparse
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

from .config import REPO_ROOT

DEFAULT_BACKBONE_DIR = REPO_ROOT / "assets" / "backbone" / "cir-tiny-vit"
DEFAULT_BACKBONE = f"local-dir:{DEFAULT_BACKBONE_DIR}"
DEFAULT_CHECKPOINTS = REPO_ROOT / "assets" / "methods"
# The four trained methods, one result column each (the app's reason to exist), and one baseline.
COLUMNS = ("pact", "dice", "pace", "compose-only")
BASELINE = "sum"


@dataclass
class AppConfig:
    backbone: str | None = None  # None: the shipped one (random-init tiny if not built yet)
    pretrained: str | None = None
    checkpoints: str | None = None  # None: the shipped assets/methods
    gallery: str = "world"
    world_queries: int = 1000
    db: str = "annotations.sqlite"
    annotators: str | None = None
    db_repo: str | None = None
    host: str | None = None
    port: int | None = None
    device: str = "cpu"
    cache_dir: str | None = None
    columns: tuple[str, ...] = COLUMNS
    baseline: str | None = BASELINE
    examples: int = 6

    def uses_hub(self) -> bool:
        """Whether anything here must come from the Hugging Face Hub (then stay online)."""
        b = self.backbone or ""
        return (b.startswith("hf-hub:") or is_hub_repo_id(self.checkpoints)
                # Snapshots of the annotation DB go to a Hub dataset repo (file:// is a folder).
                or bool(self.db_repo and not self.db_repo.startswith("file://"))
                or (self.pretrained is not None and not Path(self.pretrained).expanduser().exists()
                    and not b.startswith("local-dir:")))


def is_hub_repo_id(spec: str | None) -> bool:
    """'hf-hub:org/name' or 'org/name' (either may end in '@revision') that is not an existing
    local path."""
    if not spec:
        return False
    if spec.startswith("hf-hub:"):
        return True
    repo = spec.partition("@")[0]  # a revision may hold '/' (refs/pr/1); a repo id never holds '@'
    p = Path(spec).expanduser()
    return (not p.exists() and repo.count("/") == 1 and not repo.startswith((".", "/", "~"))
            and all(part.strip() for part in repo.split("/")))


_ENV = {"backbone": "CIR_BACKBONE", "pretrained": "CIR_PRETRAINED", "checkpoints": "CIR_CHECKPOINTS",
        "gallery": "CIR_GALLERY", "world_queries": "CIR_WORLD_QUERIES", "db": "CIR_DB",
        "annotators": "CIR_ANNOTATORS", "db_repo": "CIR_DB_REPO",
        "host": "CIR_HOST", "port": "CIR_PORT", "device": "CIR_DEVICE", "cache_dir": "CIR_CACHE_DIR"}


def build_parser(add_help: bool = True) -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(description="CIR workbench (Gradio app). Every flag also reads an "
                                 "environment variable, given in brackets.", add_help=add_help)
    ap.add_argument("--backbone", help="open_clip name (ViT-L-14), local-dir:PATH or hf-hub:ORG/REPO[@REV] "
                    "[CIR_BACKBONE; CIR_BACKBONE_REVISION]; default: the shipped tiny backbone")
    ap.add_argument("--pretrained", help="open_clip pretrained tag (openai) or a weights file [CIR_PRETRAINED]")
    ap.add_argument("--checkpoints", help="folder holding <method>/ checkpoint folders, or a Hub repo id "
                    "org/name[@branch|tag|sha] [CIR_CHECKPOINTS; CIR_CHECKPOINTS_REVISION]; default: assets/methods")
    ap.add_argument("--gallery", help="'world' (the generated test benchmark), an image folder, a "
                    "JSONL/CSV manifest, an index folder (python -m cir_core.index build) or "
                    "movienet:ROOT [CIR_GALLERY]")
    ap.add_argument("--world-queries", type=int, help="size of the world benchmark: queries; the gallery "
                    "holds ~8 images each [CIR_WORLD_QUERIES] (default 1000)")
    ap.add_argument("--db", help="SQLite path for annotations [CIR_DB]")
    ap.add_argument("--db-repo", help="Hub dataset repo (owner/name) or file:///dir keeping snapshots of "
                    "the annotation DB; restored at start when the DB file is absent [CIR_DB_REPO]")
    ap.add_argument("--annotators", help="file of 'name:password' (or 'name:sha256:<hex>') lines: "
                    "sign-in for the Annotate tab via Gradio's login page [CIR_ANNOTATORS]")
    ap.add_argument("--host", help="server name, 0.0.0.0 to listen on all interfaces [CIR_HOST]")
    ap.add_argument("--port", type=int, help="server port [CIR_PORT]")
    ap.add_argument("--device", help="cpu or cuda [CIR_DEVICE]")
    ap.add_argument("--cache-dir", help="gallery embedding cache [CIR_CACHE_DIR]")
    return ap


def from_args(argv: Sequence[str] | None = None, env: dict | None = None,
              known_only: bool = True) -> AppConfig:
    """Settings from `argv` (default: sys.argv; unknown flags are ignored when `known_only`,
    so `gradio app.py` reload mode and test runners pass through) and `env` (os.environ)."""
    env = os.environ if env is None else env
    ap = build_parser()
    args = ap.parse_known_args(argv)[0] if known_only else ap.parse_args(argv)
    cfg = AppConfig()
    for name, var in _ENV.items():
        value = getattr(args, name, None)
        if value is None and env.get(var, "").strip():
            value = env[var].strip()
        if value is None:
            continue
        if name in ("world_queries", "port"):
            try:
                value = int(value)
            except ValueError:
                raise SystemExit(f"{var}/--{name.replace('_', '-')} must be an integer, got {value!r}")
        setattr(cfg, name, value)
    # A revision variable pins a Hub spec that does not pin itself (`org/name@rev` wins).
    for name, var in (("checkpoints", "CIR_CHECKPOINTS_REVISION"), ("backbone", "CIR_BACKBONE_REVISION")):
        spec, rev = getattr(cfg, name), env.get(var, "").strip()
        if rev and spec and "@" not in spec and (spec.startswith("hf-hub:") or
                                                  (name == "checkpoints" and is_hub_repo_id(spec))):
            setattr(cfg, name, f"{spec}@{rev}")
    if cfg.world_queries < 1:
        raise SystemExit(f"--world-queries must be >= 1, got {cfg.world_queries}")
    return cfg


def apply_offline_default(cfg: AppConfig) -> None:
    """Offline unless the settings name a Hub resource: without HF_HUB_OFFLINE a missing pretrained
    tag spends ~47 s in network retries before failing. A value the user set wins."""
    if not cfg.uses_hub():
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("GRADIO_ANALYTICS_ENABLED", "False")
