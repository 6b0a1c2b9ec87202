"""Where the trained methods' `<method>/` checkpoint folders come from: the shipped folder, a local
folder or a Hugging Face Hub repo."""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

from ..appconfig import DEFAULT_CHECKPOINTS, is_hub_repo_id
from ..errors import CheckpointError
from .common import method_label


@dataclass
class CheckpointSource:
    """Where `<method>/` checkpoint folders live, or why there is nowhere to look."""

    spec: str | None
    folder: Path | None
    error: str | None = None

    def folder_for(self, name: str) -> Path:
        if self.folder is None:
            raise CheckpointError(f"{method_label(name)}: {self.error}")
        return self.folder / name


def resolve_checkpoints(spec: str | None, names: Sequence[str]) -> CheckpointSource:
    """`None` → the shipped `assets/methods`; a local folder; or a Hub repo id (`org/name` or
    `hf-hub:org/name`) fetched with `huggingface_hub.snapshot_download` (only the `<method>/`
    folders named). Never raises: a failed fetch is recorded and reported per method."""
    if not spec:
        return CheckpointSource(None, DEFAULT_CHECKPOINTS)
    path = Path(spec).expanduser()
    if path.is_dir():
        return CheckpointSource(spec, path)
    if not is_hub_repo_id(spec):
        return CheckpointSource(spec, None, f"checkpoint folder {path} not found")
    repo = spec.removeprefix("hf-hub:")
    try:
        from huggingface_hub import snapshot_download

        folder = snapshot_download(repo, allow_patterns=[f"{n}/*" for n in names])
        return CheckpointSource(spec, Path(folder))
    except Exception as exc:  # offline, unknown repo, auth: all reported the same way
        from huggingface_hub import constants
        from huggingface_hub.errors import LocalEntryNotFoundError, RepositoryNotFoundError

        if constants.HF_HUB_OFFLINE:
            why = "HF_HUB_OFFLINE is set and the repo is not in the local Hugging Face cache"
        elif isinstance(exc, LocalEntryNotFoundError):
            why = "it is not in the local Hugging Face cache and the Hub could not be reached"
        elif isinstance(exc, RepositoryNotFoundError):
            why = "no such repository, or it is private (set HF_TOKEN)"
        else:
            why = f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else 'no detail'}"
        return CheckpointSource(spec, None, f"could not fetch checkpoints ({', '.join(names)}) "
                                            f"from Hub repo '{repo}': {why}")

