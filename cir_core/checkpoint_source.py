"""Where the trained methods' `<method>/` checkpoint folders come from: the shipped folder, a local
folder or a Hugging Face Hub repo pinned to a revision. Read by the engine and the evaluation CLI
(a module of its own, so the evaluation needs nothing of the engine)."""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

from .errors import CheckpointError, CIRError
from .methods import method_label
from .paths import DEFAULT_CHECKPOINTS
from .settings import is_hub_repo_id


@dataclass
class CheckpointSource:
    """Where `<method>/` checkpoint folders live, or why there is nowhere to look."""

    spec: str | None
    folder: Path | None
    error: str | None = None
    note: str | None = None  # e.g. "offline: using the cached snapshot of ..." (also logged)
    overrides: dict[str, str] = field(default_factory=dict)  # method -> its own folder (--checkpoint)

    def folder_for(self, name: str) -> Path:
        if name in self.overrides:
            return Path(self.overrides[name]).expanduser()
        if self.folder is None:
            raise CheckpointError(f"{method_label(name)}: {self.error}")
        return self.folder / name


def resolve_checkpoints(spec: str | None, names: Sequence[str], backend: Any = None,
                        overrides: dict[str, str] | None = None) -> CheckpointSource:
    """`None` → the shipped `assets/methods`; a local folder; or a Hub repo (`org/name`,
    `hf-hub:org/name`, either with `@revision`; else CIR_CHECKPOINTS_REVISION) fetched and
    sha256-verified by `cir_core.storage.repo.pull` (only the `<method>/` folders named; the cached
    snapshot when the Hub is unreachable, noted in the log). `overrides` name one method's own
    folder. Never raises: a failed fetch is recorded and reported per method."""
    source = _resolve(spec, [n for n in names if n not in (overrides or {})], backend)
    source.overrides = dict(overrides or {})
    return source


def _resolve(spec: str | None, names: Sequence[str], backend: Any) -> CheckpointSource:
    if not spec:
        return CheckpointSource(None, DEFAULT_CHECKPOINTS)
    path = Path(spec).expanduser()
    if path.is_dir():
        return CheckpointSource(spec, path)
    if not is_hub_repo_id(spec):
        return CheckpointSource(spec, None, f"checkpoint folder {path} not found")
    from .storage.repo import pull, split_spec

    try:
        got = pull("methods", spec, patterns=[f"{n}/*" for n in names], backend=backend)
        return CheckpointSource(spec, got.folder, note=got.note)
    except CIRError as exc:  # offline and not cached, unknown repo or revision, failed verification
        return CheckpointSource(spec, None, f"could not fetch checkpoints ({', '.join(names)}) "
                                            f"from Hub repo '{split_spec(spec)[0]}': {exc}")
