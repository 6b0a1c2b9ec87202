"""Artifact repos: push method checkpoints, backbones, gallery embeddings and galleries to Hugging
Face Hub repos and pull them back, pinned to a revision and verified against a sha256 manifest.
It sits below everything that loads what it fetches (the backbone loader pins `hf-hub:org/name@rev`
through it); the command line and a gallery's own push and pull are `cir_core.hub`.

    python -m cir_core.hub push methods assets/methods org/cir-methods --tag v1
    python -m cir_core.hub pull methods org/cir-methods@v1 --out ckpts
    python -m cir_core.hub push gallery frames/ org/my-frames --backbone ViT-L-14 --pretrained openai

A spec is `org/name` or `hf-hub:org/name`, optionally `@revision` (branch, tag or commit sha);
`--revision` or `CIR_<KIND>_REVISION` pins it otherwise. When the Hub cannot be reached, a pull
uses the cached snapshot of that revision and says so; tests run against `FolderStore`.
"""
from __future__ import annotations

import logging
import os
import re
import shutil
import tempfile
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Callable, Mapping, Sequence

from cir_core import env as environment

from ..fileio import atomic_write_path
from .base import NotCached, NotFound, Revision, StorageError, Store, Unreachable, matches
from .folder import FolderStore
from .hf import HFStore
from .manifest import (
    KINDS,
    MANIFEST,
    LayoutCheck,
    build_manifest,
    check_layout,
    check_policy,
    list_files,
    verify_snapshot,
)

log = logging.getLogger(__name__)

REPO_TYPE = {"methods": "model", "backbone": "model", "embeddings": "dataset", "gallery": "dataset",
             "labels": "dataset"}
REVISION_ENV = {"methods": "CIR_CHECKPOINTS_REVISION", "backbone": "CIR_BACKBONE_REVISION",
                "embeddings": "CIR_EMBEDDINGS_REVISION", "gallery": "CIR_GALLERY_REVISION",
                "labels": "CIR_LABELS_REVISION"}
_NAME = r"[A-Za-z0-9](?:[A-Za-z0-9._-]{0,94}[A-Za-z0-9])?"
_REPO_RE = re.compile(rf"^{_NAME}/{_NAME}$")
_SHA_RE = re.compile(r"^[0-9a-f]{40}$")

__all__ = ["RepoRef", "parse_spec", "push", "pull", "fetch", "fetch_file", "default_backend", "REVISION_ENV"]


@dataclass(frozen=True)
class RepoRef:
    """A Hub repo and the revision asked for (None: the default branch)."""

    repo_id: str
    revision: str | None = None

    def __str__(self) -> str:
        return f"{self.repo_id}@{self.revision}" if self.revision else self.repo_id


def split_spec(spec: str) -> tuple[str, str | None]:
    """('org/name', 'rev' or None) from 'hf-hub:org/name@rev'; no validation, imports nothing."""
    repo, sep, rev = spec.strip().removeprefix("hf-hub:").partition("@")
    return repo, (rev if sep else None)


def parse_spec(spec: str, revision: str | None = None) -> RepoRef:
    """`org/name[@rev]` (or `hf-hub:…`) plus an optional separate `revision`; StorageError if malformed
    or if the two revisions disagree."""
    repo, rev = split_spec(spec)
    if not _REPO_RE.match(repo) or "--" in repo or ".." in repo:
        raise StorageError(f"bad Hub repo id {spec!r}: expected org/name (letters, digits, '-', '_', '.'), "
                       "optionally followed by @revision, e.g. my-org/cir-methods@v1")
    if rev is not None and not rev.strip():
        raise StorageError(f"bad Hub spec {spec!r}: nothing after '@' (give a branch, tag or commit sha)")
    if rev and revision and rev != revision:
        raise StorageError(f"{spec!r} pins revision {rev!r} but --revision says {revision!r}: give one")
    rev = rev or revision or None
    if rev and (rev.startswith("-") or ".." in rev or any(c.isspace() for c in rev)):
        raise StorageError(f"bad revision {rev!r} in {spec!r}")
    return RepoRef(repo, rev)


def default_backend() -> Store:
    """`FolderStore` when CIR_LOCAL_HUB names a folder (air-gapped use, demos), else the Hub."""
    local = (environment.read("CIR_LOCAL_HUB") or "").strip()
    if local:
        return FolderStore(local, Path(local) / ".cache")
    return HFStore()


@dataclass
class Fetched:
    """A verified snapshot: where its files are, which commit they are, and any offline note."""

    ref: RepoRef
    commit: str
    folder: Path
    files: list[str] = field(default_factory=list)
    note: str | None = None  # set when the Hub was unreachable and the cache was used


def fetch(kind: str, ref: RepoRef, backend: Store | None = None,
          patterns: Sequence[str] | None = None) -> tuple[Revision, str | None]:
    """The snapshot of `ref`: online, else the cached one with a note saying so. StorageError with
    the fix when neither works."""
    backend = backend or default_backend()
    allow = sorted({*patterns, MANIFEST}) if patterns else None
    return _online_or_cached(kind, ref, lambda cached: backend.snapshot_download(
        ref.repo_id, repo_type=REPO_TYPE[kind], revision=ref.revision, allow_patterns=allow,
        local_files_only=cached))


def fetch_file(kind: str, ref: RepoRef, path: str, backend: Store | None = None) -> tuple[Revision, str | None]:
    """One file of `ref` (`Revision.path / path`), online, else from the cache with a note, as
    `fetch`; pass a commit sha as the revision to read one consistent snapshot file by file."""
    backend = backend or default_backend()
    return _online_or_cached(kind, ref, lambda cached: backend.fetch_file(
        ref.repo_id, path, repo_type=REPO_TYPE[kind], revision=ref.revision, local_files_only=cached))


def _online_or_cached(kind: str, ref: RepoRef,
                      get: Callable[[bool], Revision]) -> tuple[Revision, str | None]:
    """`get(False)` (online); when the store is unreachable, `get(True)` (the cache) and a note."""
    rev = ref.revision or "main"
    try:
        return get(False), None
    except NotFound as exc:
        raise StorageError(f"Hub repo {ref.repo_id}: {exc}") from None
    except Unreachable as exc:
        why = str(exc)
    try:
        snap = get(True)
    except NotCached:
        raise StorageError(
            f"cannot fetch {kind} from Hub repo {ref.repo_id} at revision {rev}: the Hub is unreachable "
            f"({why}) and the local cache has no snapshot of it. Fix: connect once and run "
            f"`python -m cir_core.hub pull {kind} {ref}` (on a Space: list it in preload_from_hub), "
            "or point at a local folder instead") from None
    note = (f"offline: using the cached snapshot of {ref.repo_id} at revision {rev} "
            f"(commit {snap.commit[:12]}) from {snap.path}")
    log.warning(note)
    return snap, note


def pull(kind: str, spec: str, out: str | os.PathLike | None = None, *, revision: str | None = None,
         patterns: Sequence[str] | None = None, backend: Store | None = None,
         require_manifest: bool = True, env: Mapping[str, str] | None = None,
         layout: LayoutCheck | None = None) -> Fetched:
    """Fetch `spec` (revision: `@rev` > `revision` > CIR_<KIND>_REVISION > main), verify every file
    against the manifest, check the layout, and copy into `out` if given (else use it in place).
    `require_manifest=False` (third-party open_clip repos) verifies a manifest only if present.
    `layout`: the kind's own layout check where this layer has none (a gallery's is
    `cir_core.hub.gallery.check_gallery_layout`)."""
    _check_kind(kind)
    ref = parse_spec(spec, revision or (environment.read(REVISION_ENV[kind], env=env) or "").strip() or None)
    where = f"Hub repo {ref}"
    if not require_manifest and patterns is None:
        patterns = ["*.json", "*.safetensors", "*.npy"]  # never fetch a pickle in the first place
    snap, note = fetch(kind, ref, backend, patterns)
    if (snap.path / MANIFEST).is_file() or require_manifest:
        files = verify_snapshot(snap.path, kind, where, list(patterns) if patterns else None)
    else:
        files = [f for f in list_files(snap.path) if matches(f, patterns)]
        log.warning("%s has no %s: pinned to commit %s but its files are not sha256-verified",
                    where, MANIFEST, snap.commit[:12])
    files = [f for f in files if matches(f, patterns)]
    check_layout(snap.path, kind, files, where, layout)
    folder = snap.path
    if out is not None:
        folder = Path(out).expanduser()
        for f in files:
            dst = folder / f
            dst.parent.mkdir(parents=True, exist_ok=True)
            # a reader sees the old file or the new one, whole
            atomic_write_path(dst, partial(shutil.copyfile, snap.path / f))
    return Fetched(ref, snap.commit, folder, files, note)


@dataclass
class Pushed:
    ref: RepoRef
    commit: str
    files: list[str]
    tag: str | None = None


def push(kind: str, folder: str | os.PathLike, spec: str, *, revision: str | None = None,
         tag: str | None = None, include: Sequence[str] | None = None, message: str | None = None,
         backend: Store | None = None, progress: bool = False, layout: LayoutCheck | None = None) -> Pushed:
    """Upload `folder`'s files (those matching `include`) plus a fresh manifest as one commit on
    the branch of `spec` (`@branch` or `revision`; default main), then `tag` it if asked. Checks
    everything before uploading anything; `layout` as in `pull`."""
    _check_kind(kind)
    from ..config import git_commit

    ref = parse_spec(spec, revision)
    branch = ref.revision or "main"
    if _SHA_RE.match(branch):
        raise StorageError(f"cannot push to commit {branch}: name a branch (and --tag to pin it)")
    src = Path(folder).expanduser()
    if not src.is_dir():
        raise StorageError(f"{kind} folder {src} not found")
    files = [f for f in list_files(src) if matches(f, include)]
    where = f"{kind} folder {src}"
    check_policy(files, where, kind)
    check_layout(src, kind, files, where, layout)
    backend = backend or default_backend()
    with tempfile.TemporaryDirectory(prefix="cir-hub-") as tmp:
        stage = Path(tmp)
        for f in _progress(files, progress, "staging"):
            (stage / f).parent.mkdir(parents=True, exist_ok=True)
            try:  # a hard link costs nothing for multi-GB weights; copy across file systems
                os.link(src / f, stage / f)
            except OSError:
                shutil.copyfile(src / f, stage / f)
        import json

        manifest = build_manifest(stage, kind, files, git_commit())
        (stage / MANIFEST).write_text(json.dumps(manifest, indent=1, sort_keys=True), encoding="utf-8")
        commit = backend.upload_folder(ref.repo_id, stage, repo_type=REPO_TYPE[kind], branch=branch,
                                       message=message or f"cir_core.hub push {kind} ({len(files)} files)")
    if tag:
        backend.create_tag(ref.repo_id, tag, commit, repo_type=REPO_TYPE[kind])
    return Pushed(RepoRef(ref.repo_id, branch), commit, files, tag)


def _check_kind(kind: str) -> None:
    if kind not in KINDS:
        raise StorageError(f"unknown kind {kind!r}: one of {', '.join(KINDS)}")


def _progress(items: list[str], on: bool, desc: str):
    if not on:
        return items
    from ..progress import bar

    return bar(items, desc=desc, unit="file")
