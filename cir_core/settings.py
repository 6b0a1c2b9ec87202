"""What a retrieval engine is built from: `EngineConfig`, and the one set of command-line flags
(each with a `CIR_*` environment variable) that the app, the eval CLI, the figure CLI, pooling and
the benches share through `add_engine_args`.

Precedence: flag > environment variable > default. The default is fully offline: the generated
world's test gallery, the shipped tiny backbone and the shipped method checkpoints. Importing this
module imports nothing heavy (no torch, no huggingface_hub), so a CLI can set `HF_HUB_OFFLINE`
from it (`apply_offline_default`) before anything reads that variable.

| flag | env | default |
| --- | --- | --- |
| `--backbone` | `CIR_BACKBONE` | the shipped `local-dir:assets/backbone/cir-tiny-vit` |
| `--pretrained` | `CIR_PRETRAINED` | none (an open_clip tag or a weights file) |
| `--checkpoints` | `CIR_CHECKPOINTS` | `assets/methods` (a folder of `<method>/`, or a Hub repo id `org/name[@rev]`) |
| `--checkpoint M=DIR` | | one method's checkpoint folder, over `--checkpoints` (repeatable) |
| (in the spec: `@rev`) | `CIR_CHECKPOINTS_REVISION`, `CIR_BACKBONE_REVISION` | the revision a Hub spec without `@rev` is pinned to |
| `--gallery` | `CIR_GALLERY` | `world` (or an image folder, a JSONL/CSV manifest, an index folder, `movienet:ROOT`, a Hub gallery `hf:org/name[@rev]`) |
| (in the spec: `@rev`) | `CIR_GALLERY_REVISION` | the revision an `hf:` gallery without `@rev` is pinned to |
| `--world-queries` | `CIR_WORLD_QUERIES` | 1000 (the world gallery holds ~8 images per query) |
| `--methods` | `CIR_METHODS` | the consumer's default (the app: every method registered as a column, then the baseline) |
| `--device` | `CIR_DEVICE` | `cpu` |
| `--cache-dir` | `CIR_CACHE_DIR` | `~/.cache/cir-workbench` (gallery embeddings) |
| `--batching` | `CIR_BATCHING` | on: concurrent requests share their text, upload and method forwards (`cir_core.batching`) |
| `--batch-wait-ms` | `CIR_BATCH_WAIT_MS` | 5: the longest a request waits for others in flight to join its batch |
| `--max-requests` | `CIR_MAX_REQUESTS` | 32: requests answered at once; the next is told "busy, N ahead of you" |
"""
from __future__ import annotations

import argparse
import os
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any, Mapping, TypeVar

from .errors import InputError

E = TypeVar("E", bound="EngineConfig")
MAX_REQUESTS = 32  # compare requests in flight at once; the next one is told it is busy
TRUE, FALSE = ("1", "true", "yes", "on"), ("0", "false", "no", "off", "")


@dataclass
class EngineConfig:
    """The backbone, the gallery, the methods and where their checkpoints are."""

    backbone: str | None = None  # None: the shipped one (random-init tiny if not built yet)
    pretrained: str | None = None
    checkpoints: str | None = None  # None: the shipped assets/methods
    method_checkpoints: dict[str, str] = field(default_factory=dict)  # method -> folder, over `checkpoints`
    gallery: str = "world"
    world_queries: int = 1000
    methods: tuple[str, ...] | None = None  # None: the consumer's default
    device: str = "cpu"
    cache_dir: str | None = None
    examples: int = 6
    batching: bool = True
    batch_wait_ms: float = 5.0
    max_requests: int = MAX_REQUESTS

    def uses_hub(self) -> bool:
        """Whether anything here must come from the Hugging Face Hub (then stay online)."""
        b = self.backbone or ""
        return (b.startswith("hf-hub:") or is_hub_repo_id(self.checkpoints) or self.gallery.startswith("hf:")
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


ENGINE_ENV = {"backbone": "CIR_BACKBONE", "pretrained": "CIR_PRETRAINED", "checkpoints": "CIR_CHECKPOINTS",
              "gallery": "CIR_GALLERY", "world_queries": "CIR_WORLD_QUERIES", "methods": "CIR_METHODS",
              "device": "CIR_DEVICE", "cache_dir": "CIR_CACHE_DIR", "batching": "CIR_BATCHING",
              "batch_wait_ms": "CIR_BATCH_WAIT_MS", "max_requests": "CIR_MAX_REQUESTS"}


BACKBONE_HELP = "open_clip name (ViT-L-14), local-dir:PATH or hf-hub:ORG/REPO[@REV]"


def add_backbone_args(ap: argparse.ArgumentParser | argparse._ArgumentGroup, default: str | None = None,
                      required: bool = False, pretrained: bool = True, many: bool = False) -> None:
    """The backbone flags every CLI shares: --backbone (an open_clip spec) and --pretrained (a tag
    or a weights file). `many`: repeatable, one per backbone (pairs by position)."""
    more = " (repeatable)" if many else ""
    shown = f"; default {default}" if default else ""
    ap.add_argument("--backbone", required=required, action="append" if many else "store",
                    default=[] if many else default, help=f"{BACKBONE_HELP}{more}{shown}")
    if pretrained:
        ap.add_argument("--pretrained", action="append" if many else "store", default=[] if many else None,
                        help=f"open_clip pretrained tag (openai) or a weights file{more}; default: none (random "
                             "init for a bare name)")


def add_device_arg(ap: argparse.ArgumentParser | argparse._ArgumentGroup, default: str | None = "cpu") -> None:
    """--device: cpu, cuda or cuda:N (`auto`/None where the CLI picks cuda when it is there)."""
    ap.add_argument("--device", default=default,
                    help=f"cpu, cuda or cuda:N (default: {default or 'cuda when available'})")


def add_seed_arg(ap: argparse.ArgumentParser | argparse._ArgumentGroup, default: int = 0, what: str = "") -> None:
    """--seed: the CLI's random draws (`what` says which)."""
    ap.add_argument("--seed", type=int, default=default, help=f"seed{' of ' + what if what else ''} ({default})")


def add_cache_arg(ap: argparse.ArgumentParser | argparse._ArgumentGroup, flag: str = "--cache-dir") -> None:
    """The embedding cache's folder (default: $CIR_CACHE_DIR, else ~/.cache/cir-workbench)."""
    ap.add_argument(flag, type=Path, default=None, help="embedding cache folder (default: $CIR_CACHE_DIR, else "
                    "~/.cache/cir-workbench)")


def add_engine_args(ap: argparse.ArgumentParser, gallery: bool = True,
                    methods_help: str = "the app's columns and baseline") -> argparse.ArgumentParser:
    """The engine's flags on `ap` (`gallery=False` leaves out --gallery/--world-queries, for CLIs
    that take their gallery from a benchmark)."""
    g = ap.add_argument_group("engine (each flag also reads the environment variable in brackets)")
    g.add_argument("--backbone", help=f"{BACKBONE_HELP} [CIR_BACKBONE; CIR_BACKBONE_REVISION]; default: the "
                   "shipped tiny backbone")
    g.add_argument("--pretrained", help="open_clip pretrained tag (openai) or a weights file [CIR_PRETRAINED]")
    g.add_argument("--checkpoints", help="folder holding <method>/ checkpoint folders, or a Hub repo id "
                   "org/name[@branch|tag|sha] [CIR_CHECKPOINTS; CIR_CHECKPOINTS_REVISION]; default: assets/methods")
    g.add_argument("--checkpoint", action="append", default=[], metavar="METHOD=DIR",
                   help="load METHOD from DIR instead (repeatable; ablations)")
    if gallery:
        g.add_argument("--gallery", help="'world' (the generated test benchmark), an image folder, a "
                       "JSONL/CSV manifest, an index folder (python -m cir_core.index build), "
                       "movienet:ROOT, or a Hub gallery hf:org/name[@rev] (python -m cir_core.hub push "
                       "gallery) [CIR_GALLERY; CIR_GALLERY_REVISION]")
        g.add_argument("--world-queries", type=int, help="size of the world benchmark: queries; the gallery "
                       "holds ~8 images each [CIR_WORLD_QUERIES] (default 1000)")
    g.add_argument("--methods", nargs="+", help=f"method names, space- or comma-separated [CIR_METHODS]; "
                   f"default: {methods_help}")
    g.add_argument("--device", help="cpu or cuda [CIR_DEVICE]")
    g.add_argument("--cache-dir", help="gallery embedding cache [CIR_CACHE_DIR]")
    g.add_argument("--batching", help="on/off: concurrent requests share their text, upload and method "
                   "forwards in batches [CIR_BATCHING] (default on)")
    g.add_argument("--batch-wait-ms", help="the longest a request waits for the others in flight to join "
                   "its batch [CIR_BATCH_WAIT_MS] (default 5)")
    g.add_argument("--max-requests", help="requests answered at once; the next is told it is busy "
                   f"[CIR_MAX_REQUESTS] (default {MAX_REQUESTS})")
    return ap


def engine_argv(cfg: EngineConfig) -> list[str]:
    """The flags that rebuild `cfg`'s engine from a command line (the inverse of `settings_from`
    for what differs from the defaults; devices and caches are the runner's own)."""
    base = EngineConfig()
    argv: list[str] = []
    for name in ("backbone", "pretrained", "checkpoints", "gallery", "world_queries"):
        value = getattr(cfg, name)
        if value is not None and value != getattr(base, name):
            argv += [f"--{name.replace('_', '-')}", str(value)]
    for method, folder in sorted(cfg.method_checkpoints.items()):
        argv += ["--checkpoint", f"{method}={folder}"]
    return argv


def settings_from(cls: type[E], args: argparse.Namespace, env: Mapping[str, str] | None = None,
                  env_names: Mapping[str, str] = ENGINE_ENV) -> E:
    """A `cls` (EngineConfig or a subclass) from parsed flags, then `env` (default os.environ)
    for flags left unset, then the defaults. Integers and method lists are parsed here; a bad
    value is an `InputError` naming the flag and its variable."""
    env = os.environ if env is None else env
    cfg = cls()
    names = {f.name for f in fields(cls)}
    for name, var in env_names.items():
        value = getattr(args, name, None)
        if value is None and env.get(var, "").strip():
            value = env[var].strip()
        if value is None or name not in names:
            continue
        setattr(cfg, name, _parse(name, var, value))
    cfg.method_checkpoints = dict(checkpoint_pair(p) for p in getattr(args, "checkpoint", None) or [])
    _pin_revisions(cfg, env)
    if cfg.world_queries < 1:
        raise InputError(f"--world-queries must be >= 1, got {cfg.world_queries}")
    return cfg


def checkpoint_pair(text: str) -> tuple[str, str]:
    """One --checkpoint METHOD=DIR as (method, folder); an InputError names a malformed one."""
    name, sep, folder = text.partition("=")
    if not sep or not name or not folder:
        raise InputError(f"--checkpoint takes METHOD=DIR, got {text!r}")
    return name, folder


def _parse(name: str, var: str, value: Any) -> Any:
    if name == "methods":
        items = value if isinstance(value, (list, tuple)) else [value]
        names = tuple(m.strip() for v in items for m in str(v).split(",") if m.strip())
        if not names:
            raise InputError(f"{var}/--methods names no method: {value!r}")
        return names
    flag = f"{var}/--{name.replace('_', '-')}"
    if name in ("world_queries", "port", "max_requests"):
        try:
            n = int(value)
        except ValueError:
            raise InputError(f"{flag} must be an integer, got {value!r}") from None
        if name == "max_requests" and n < 1:
            raise InputError(f"{flag} must be >= 1, got {n}")
        return n
    if name == "batch_wait_ms":
        try:
            ms = float(value)
        except ValueError:
            ms = float("nan")
        if not 0 <= ms <= 1000:
            raise InputError(f"{flag} must be a number of milliseconds in 0..1000, got {value!r}")
        return ms
    if name == "batching":
        return parse_flag(value, flag)
    return value


def parse_flag(value: object, name: str) -> bool:
    """An on/off setting from a flag (True) or a variable ('1', 'true', 'yes', 'on' / '0', ...)."""
    if isinstance(value, bool):
        return value
    v = str(value).strip().lower()
    if v in TRUE:
        return True
    if v in FALSE:
        return False
    raise InputError(f"{name} must be 1/0, true/false, yes/no or on/off, got {value!r}")


def _pin_revisions(cfg: EngineConfig, env: Mapping[str, str]) -> None:
    """A revision variable pins a Hub spec that does not pin itself (`org/name@rev` wins)."""
    for name, var in (("checkpoints", "CIR_CHECKPOINTS_REVISION"), ("backbone", "CIR_BACKBONE_REVISION")):
        spec, rev = getattr(cfg, name), env.get(var, "").strip()
        if rev and spec and "@" not in spec and (spec.startswith("hf-hub:") or
                                                  (name == "checkpoints" and is_hub_repo_id(spec))):
            setattr(cfg, name, f"{spec}@{rev}")


def engine_config(argv: list[str] | None = None, env: Mapping[str, str] | None = None,
                  gallery: bool = True) -> EngineConfig:
    """An EngineConfig from `argv` alone (tests and scripts; the CLIs parse their own parsers)."""
    ap = add_engine_args(argparse.ArgumentParser(add_help=False), gallery)
    return settings_from(EngineConfig, ap.parse_args(argv or []), env)


def apply_offline_default(uses_hub: bool) -> None:
    """Offline unless the settings name a Hub resource: without HF_HUB_OFFLINE a missing pretrained
    tag spends ~47 s in network retries before failing. Also no analytics and matplotlib's Agg
    backend. A value the user set wins."""
    if not uses_hub:
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("GRADIO_ANALYTICS_ENABLED", "False")
    # Gradio asks matplotlib for its backend around every request; with none set that resolves
    # it by importing pyplot (~0.5 s of the first request here). Nothing here draws on a screen:
    # the figures render through Agg. A value the user set wins.
    os.environ.setdefault("MPLBACKEND", "agg")
