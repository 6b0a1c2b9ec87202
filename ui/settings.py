"""The app's settings: the engine's (`cir_core.settings`) plus what only the app has — the
annotation database and its snapshot repo, the annotators' sign-in file, host and port.

| flag | env | default |
| --- | --- | --- |
| (every engine flag) | `CIR_*` | see `cir_core/settings.py` |
| `--db` | `CIR_DB` | `annotations.sqlite` (the annotation tab's database) |
| `--db-repo` | `CIR_DB_REPO` | none: a Hub dataset repo (or `file:///dir`) the annotation DB is snapshotted to and restored from |
| `--annotators` | `CIR_ANNOTATORS` | none: a file of `name:password` lines turns on Gradio's login page |
| `--annotation-only` | `CIR_ANNOTATION_ONLY` | off: on, the app has only the Annotate tab and the viewer's own Results (no Compare, no Figures, no method rates), so annotators cannot unblind a pair |
| `--trusted-proxies` | `CIR_TRUSTED_PROXIES` | none: comma-separated addresses or networks (`10.0.0.0/8`) of reverse proxies whose `X-Forwarded-For` names the client; from anyone else the header is ignored |
| `--allowed-origins` | `CIR_ALLOWED_ORIGINS` | none: comma-separated origins (`https://annotate.example.org`) whose pages may post to the app besides its own host (a proxy that rewrites the Host header); every other cross-site POST is refused |
| `--host` | `CIR_HOST` | Gradio's (127.0.0.1, or `GRADIO_SERVER_NAME`) |
| `--port` | `CIR_PORT` | Gradio's (7860, or `GRADIO_SERVER_PORT`) |

Importing this module imports nothing heavy, so `app.py` can set `HF_HUB_OFFLINE` before
gradio or huggingface_hub read it.
"""
from __future__ import annotations

import argparse
from dataclasses import dataclass
from typing import Mapping, Sequence

from cir_core import settings as engine_settings
from cir_core.errors import InputError
from cir_core.settings import ENGINE_ENV, EngineConfig, add_engine_args, parse_flag, settings_from

APP_ENV = {**ENGINE_ENV, "db": "CIR_DB", "annotators": "CIR_ANNOTATORS", "db_repo": "CIR_DB_REPO",
           "annotation_only": "CIR_ANNOTATION_ONLY", "trusted_proxies": "CIR_TRUSTED_PROXIES",
           "allowed_origins": "CIR_ALLOWED_ORIGINS", "host": "CIR_HOST", "port": "CIR_PORT"}


@dataclass
class AppConfig(EngineConfig):
    """The engine's settings and the app's own."""

    db: str = "annotations.sqlite"
    annotators: str | None = None
    db_repo: str | None = None
    annotation_only: bool = False
    trusted_proxies: str | None = None
    allowed_origins: str | None = None
    host: str | None = None
    port: int | None = None

    def uses_hub(self) -> bool:
        # Snapshots of the annotation DB go to a Hub dataset repo (file:// is a folder).
        return super().uses_hub() or bool(self.db_repo and not self.db_repo.startswith("file://"))


def build_parser(add_help: bool = True) -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(description="CIR workbench (Gradio app). Every flag also reads an "
                                 "environment variable, given in brackets.", add_help=add_help)
    add_engine_args(ap)
    g = ap.add_argument_group("app")
    g.add_argument("--db", help="annotation database: a SQLite file, or a SQLAlchemy URL such as "
                   "postgresql://user:pass@host/db for several app replicas on one server [CIR_DB]")
    g.add_argument("--db-repo", help="Hub dataset repo (owner/name) or file:///dir keeping snapshots of "
                   "the annotation DB; restored at start when the DB file is absent [CIR_DB_REPO]")
    g.add_argument("--annotators", help="file of 'name:password' (or 'name:sha256:<hex>') lines: "
                   "sign-in for the Annotate tab via Gradio's login page [CIR_ANNOTATORS]")
    g.add_argument("--annotation-only", action="store_const", const="1", default=None,
                   help="an annotation campaign: only the Annotate tab and each annotator's own "
                   "Results (no Compare or Figures tab, no method rates), so nobody can see which "
                   "method retrieved a pair [CIR_ANNOTATION_ONLY=1]")
    g.add_argument("--trusted-proxies", help="comma-separated addresses or networks (10.0.0.0/8) of "
                   "the reverse proxies in front of the app: only their X-Forwarded-For names the "
                   "client (sign-in limits, logs); default none [CIR_TRUSTED_PROXIES]")
    g.add_argument("--allowed-origins", help="comma-separated origins (https://annotate.example.org) "
                   "whose pages may send requests to the app besides its own host, e.g. behind a "
                   "proxy that rewrites the Host header; cross-site POSTs from anywhere else are "
                   "refused [CIR_ALLOWED_ORIGINS]")
    g.add_argument("--host", help="server name, 0.0.0.0 to listen on all interfaces [CIR_HOST]")
    g.add_argument("--port", type=int, help="server port [CIR_PORT]")
    return ap


def from_args(argv: Sequence[str] | None = None, env: Mapping[str, str] | None = None,
              known_only: bool = True) -> AppConfig:
    """Settings from `argv` (default: sys.argv; unknown flags are ignored when `known_only`,
    so `gradio app.py` reload mode and test runners pass through) and `env` (os.environ)."""
    ap = build_parser()
    args = ap.parse_known_args(argv)[0] if known_only else ap.parse_args(argv)
    try:
        cfg = settings_from(AppConfig, args, env, APP_ENV)
        cfg.annotation_only = parse_flag(cfg.annotation_only, "CIR_ANNOTATION_ONLY/--annotation-only")
        parse_proxies(cfg.trusted_proxies)
        parse_origins(cfg.allowed_origins)
        return cfg
    except InputError as exc:
        raise SystemExit(f"error: {exc}") from None


def parse_proxies(value: str | None) -> list[str]:
    """The trusted proxies' addresses and networks, normalised; InputError names a bad entry
    (uvicorn would take it silently as a literal that never matches)."""
    import ipaddress

    out = []
    for item in (value or "").split(","):
        item = item.strip()
        if not item:
            continue
        try:
            out.append(str(ipaddress.ip_network(item, strict=False)))
        except ValueError:
            raise InputError(f"CIR_TRUSTED_PROXIES/--trusted-proxies: {item!r} is not an IP address "
                             "or network (e.g. 10.0.0.5 or 10.0.0.0/8)") from None
    return out


def parse_origins(value: str | None) -> tuple[str, ...]:
    """The extra allowed origins (`scheme://host[:port]`); InputError names a bad entry."""
    import urllib.parse

    out = []
    for item in (value or "").split(","):
        item = item.strip()
        if not item:
            continue
        u = urllib.parse.urlsplit(item)
        if u.scheme not in ("http", "https") or not u.hostname or u.path not in ("", "/"):
            raise InputError(f"CIR_ALLOWED_ORIGINS/--allowed-origins: {item!r} is not an origin "
                             "(scheme://host[:port], e.g. https://annotate.example.org)")
        out.append(item)
    return tuple(out)


def apply_offline_default(cfg: AppConfig) -> None:
    """`HF_HUB_OFFLINE=1` unless the settings name a Hub resource (see cir_core.settings)."""
    engine_settings.apply_offline_default(cfg.uses_hub())
