"""Every environment variable the workbench reads, in one table, and the one function that reads
them (`read`). The engine's and the app's own settings (`CIR_BACKBONE`, `CIR_DB`, ...) are read
through `cir_core.settings` / `ui.settings` from flags first; the rest are here with what they do.
Imports nothing of the project, so any module may use it; `tests/test_layers.py` fails on a read
of `os.environ` anywhere else (setting a process default with `setdefault` is not a read).
"""
from __future__ import annotations

import os
from typing import Mapping, overload

# name -> what it does (docs/APP.md lists the settings; this is the rest)
VARIABLES: dict[str, str] = {
    # the engine's and the app's settings (flags first: cir_core.settings, ui.settings)
    **{f"CIR_{n}": "a setting, also a flag (cir_core/settings.py, ui/settings.py)" for n in (
        "BACKBONE", "PRETRAINED", "CHECKPOINTS", "GALLERY", "WORLD_QUERIES", "METHODS", "DEVICE", "CACHE_DIR",
        "BATCHING", "BATCH_WAIT_MS", "MAX_REQUESTS", "DB", "ANNOTATORS", "DB_REPO", "ANNOTATION_ONLY",
        "TRUSTED_PROXIES", "ALLOWED_ORIGINS", "HOST", "PORT", "EXAMPLES")},
    **{f"CIR_{kind}_REVISION": "the Hub revision of a repo named without @rev" for kind in (
        "BACKBONE", "CHECKPOINTS", "GALLERY", "EMBEDDINGS", "METHODS", "LABELS")},
    "CIR_PROGRESS_INTERVAL": "seconds between a progress bar's lines in a log (default 30)",
    "CIR_LOCAL_HUB": "a folder standing in for the Hugging Face Hub (air-gapped use, tests)",
    "CIR_TEMP_TTL_S": "how long the app keeps a download folder (default 3600 s)",
    "CIR_DB_SNAPSHOT_EVERY": "seconds between annotation DB snapshots (default 300)",
    "CIR_DB_SNAPSHOT_KEEP": "annotation DB snapshots kept in the repo (default 20)",
    "CIR_PSEUDONYM_SALT": "the secret of `db.export --pseudonymise`",
    # others' variables the workbench reads
    "HF_TOKEN": "Hugging Face token (pushes, private repos, DB snapshots)",
    "HF_HUB_OFFLINE": "huggingface_hub's offline switch (the workbench sets it unless a Hub resource is named)",
    "SPACE_ID": "set by Hugging Face Spaces: the app is on a Space",
    "SPACE_HOST": "set by Hugging Face Spaces: the Space's public host (its pages may post to the app)",
    "OAUTH_CLIENT_ID": "set by Spaces with hf_oauth: sign in with Hugging Face",
    "WORLD_SIZE": "torchrun: processes in the group",
    "RANK": "torchrun: this process's rank",
    "LOCAL_RANK": "torchrun: this process's GPU on its node",
    "GRADIO_TEMP_DIR": "Gradio's upload and cache folder (the app sets its own unless given)",
}


# name prefix -> what its variables do (one variable per field of a config)
FAMILIES: dict[str, str] = {
    "CIR_CIREVL_": "CIReVL's configuration, one variable per CIReVLConfig field (docs/METHODS.md, CIReVL)",
}


@overload
def read(name: str, default: str, env: Mapping[str, str] | None = None) -> str: ...
@overload
def read(name: str, default: None = None, env: Mapping[str, str] | None = None) -> str | None: ...


def read(name: str, default: str | None = None, env: Mapping[str, str] | None = None) -> str | None:
    """The value of environment variable `name` (None or `default` when unset or blank). Only
    variables in `VARIABLES` may be read: a new one is declared there, with what it does."""
    if name not in VARIABLES and not name.startswith(tuple(FAMILIES)):
        raise KeyError(f"environment variable {name} is not declared in cir_core/env.py")
    value = (os.environ if env is None else env).get(name)
    return default if value is None or not value.strip() else value


def secret(name: str, env: Mapping[str, str] | None = None) -> str | None:
    """The value of a variable whose NAME is itself a setting (an API key's variable, e.g.
    OPENAI_API_KEY or what `--api-key-env` names): keys never enter a config or a command line."""
    value = (os.environ if env is None else env).get(name)
    return value if value else None
