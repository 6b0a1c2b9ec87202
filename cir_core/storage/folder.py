"""`FolderStore`: a Hub in a plain folder (tests, air-gapped use, drills), as a `Store`."""
from __future__ import annotations

import hashlib
import os
import shutil
import threading
from pathlib import Path
from typing import Mapping, Sequence

from ..fileio import atomic_folder, sha256_file
from .base import NotCached, NotFound, Revision, StorageError, Unreachable, is_plain_path, matches


def _tree_digest(files: dict[str, str], parent: str) -> str:
    h = hashlib.sha1(parent.encode())
    for rel in sorted(files):
        h.update(f"\n{rel}\0{files[rel]}".encode())
    return h.hexdigest()


def _copy_tree(src: Path, dst: Path, patterns: Sequence[str] | None = None) -> None:
    for p in sorted(src.rglob("*")):
        rel = p.relative_to(src).as_posix()
        if p.is_file() and matches(rel, patterns):
            (dst / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(p, dst / rel)


class FolderStore:
    """A Hub in a folder, with a cache beside it that mimics the Hugging Face cache.

    Layout: `root/<repo_type>s/<org>/<name>/commits/<sha>/…` (one full tree per commit) and
    `…/refs/heads/<branch>`, `…/refs/tags/<tag>` (each holds a sha). A commit's tree appears whole
    (built aside, then renamed) before its branch moves to it, so a reader never sees half a
    change; `commit` hard-links the files it keeps from the parent (files are never edited in
    place). Downloads copy into `cache_dir/<repo_type>s--<org>--<name>/snapshots/<sha>/` and
    record `refs/<revision>`, so `local_files_only=True` behaves like `huggingface_hub`'s.
    `online=False` plays a dead network.
    """

    name = "local-folder"

    def describe(self, repo_id: str) -> str:
        return f"repo {repo_id} in folder {self.root}"

    def __init__(self, root: str | os.PathLike, cache_dir: str | os.PathLike, online: bool = True):
        self.root, self.cache_dir, self.online = Path(root), Path(cache_dir), online

    def _repo(self, repo_id: str, repo_type: str) -> Path:
        return self.root / f"{repo_type}s" / repo_id

    def _cache(self, repo_id: str, repo_type: str) -> Path:
        return self.cache_dir / f"{repo_type}s--{repo_id.replace('/', '--')}"

    def _ref(self, repo: Path, name: str) -> str | None:
        for kind in ("heads", "tags"):
            f = repo / "refs" / kind / name
            if f.is_file():
                return f.read_text().strip()
        commits = [c.name for c in (repo / "commits").glob(f"{name}*")] if len(name) >= 7 else []
        return commits[0] if len(commits) == 1 else None

    def upload_folder(self, repo_id: str, folder: Path, *, repo_type: str, branch: str,
                      message: str) -> str:
        repo = self._repo(repo_id, repo_type)
        files = {p.relative_to(folder).as_posix(): sha256_file(p)
                 for p in sorted(Path(folder).rglob("*")) if p.is_file()}
        parent = self._ref(repo, branch) or self._ref(repo, "main") or ""
        sha = _tree_digest(files, parent + message)
        tree = repo / "commits" / sha
        if not tree.is_dir():
            tree.parent.mkdir(parents=True, exist_ok=True)
            atomic_folder(tree, lambda tmp: _copy_tree(Path(folder), tmp))
        head = repo / "refs" / "heads" / branch
        head.parent.mkdir(parents=True, exist_ok=True)
        head.write_text(sha)
        return sha

    def create_tag(self, repo_id: str, tag: str, commit: str, *, repo_type: str) -> None:
        repo = self._repo(repo_id, repo_type)
        if not (repo / "commits" / commit).is_dir():
            raise NotFound(f"{repo_id}@{commit}: no such commit to tag")
        f = repo / "refs" / "tags" / tag
        if f.exists():
            raise StorageError(f"{repo_id}: tag {tag!r} already exists (tags are immutable)")
        f.parent.mkdir(parents=True, exist_ok=True)
        f.write_text(commit)

    def snapshot_download(self, repo_id: str, *, repo_type: str, revision: str | None,
                          allow_patterns: Sequence[str] | None, local_files_only: bool) -> Revision:
        rev = revision or "main"
        cache = self._cache(repo_id, repo_type)
        if local_files_only:
            ref = cache / "refs" / rev
            sha = ref.read_text().strip() if ref.is_file() else rev
            snap = cache / "snapshots" / sha
            if not snap.is_dir():
                raise NotCached(f"{repo_id}@{rev}: not in the local cache {cache}")
            return Revision(snap, sha)
        if not self.online:
            raise Unreachable(f"{repo_id}@{rev}: the local hub is set offline")
        repo = self._repo(repo_id, repo_type)
        if not repo.is_dir():
            raise NotFound(f"{repo_id}@{rev}: no such repository in {self.root}")
        commit = self._ref(repo, rev)
        if commit is None:
            raise NotFound(f"{repo_id}@{rev}: no such revision (branch, tag or commit)")
        snap = cache / "snapshots" / commit
        _copy_tree(repo / "commits" / commit, snap, allow_patterns)
        (cache / "refs" / rev).parent.mkdir(parents=True, exist_ok=True)
        (cache / "refs" / rev).write_text(commit)
        return Revision(snap, commit)

    def fetch_file(self, repo_id: str, path: str, *, repo_type: str, revision: str | None,
                   local_files_only: bool) -> Revision:
        rev, cache = revision or "main", self._cache(repo_id, repo_type)
        if not is_plain_path(path):
            raise StorageError(f"{repo_id}@{rev}: refusing file name {path!r} (not a plain relative path)")
        if local_files_only:
            ref = cache / "refs" / rev
            sha = ref.read_text().strip() if ref.is_file() else rev
            if not (cache / "snapshots" / sha / path).is_file():
                raise NotCached(f"{repo_id}@{rev}: {path} is not in the local cache {cache}")
            return Revision(cache / "snapshots" / sha, sha)
        if not self.online:
            raise Unreachable(f"{repo_id}@{rev}: the local hub is set offline")
        repo = self._repo(repo_id, repo_type)
        commit = self._ref(repo, rev) if repo.is_dir() else None
        if commit is None:
            raise NotFound(f"{repo_id}@{rev}: no such " + ("revision (branch, tag or commit)" if repo.is_dir()
                                                          else f"repository in {self.root}"))
        src, snap = repo / "commits" / commit / path, cache / "snapshots" / commit
        if not src.is_file():
            raise NotFound(f"{repo_id}@{rev}: no file {path!r} at commit {commit[:12]}")
        dst = snap / path
        if not dst.is_file():  # concurrent fetches of one file: each writes its own temp, one wins
            dst.parent.mkdir(parents=True, exist_ok=True)
            tmp = dst.with_name(f".{dst.name}.{os.getpid()}.{threading.get_ident()}.tmp")
            shutil.copyfile(src, tmp)
            os.replace(tmp, dst)
        if rev != commit:
            (cache / "refs" / rev).parent.mkdir(parents=True, exist_ok=True)
            (cache / "refs" / rev).write_text(commit)
        return Revision(snap, commit)

    # -- single files on main (the annotation DB's snapshots) -------------------------------------
    def _main_tree(self, repo_id: str, repo_type: str) -> Path | None:
        if not self.online:
            raise Unreachable(f"{self.describe(repo_id)}: the folder store is set offline")
        repo = self._repo(repo_id, repo_type)
        sha = self._ref(repo, "main") if repo.is_dir() else None
        return repo / "commits" / sha if sha else None

    def commit(self, repo_id: str, adds: Mapping[str, Path], deletes: Sequence[str], *, repo_type: str,
               message: str) -> None:
        base = self._main_tree(repo_id, repo_type)
        repo = self._repo(repo_id, repo_type)
        parent = base.name if base else ""
        sha = _tree_digest({rel: sha256_file(p) for rel, p in adds.items()},
                           parent + message + "\0".join(sorted(deletes)))
        def build(tmp: Path) -> None:
            kept = [] if base is None else [(p, p.relative_to(base).as_posix()) for p in base.rglob("*") if p.is_file()]
            for p, rel in kept:
                if rel not in adds and rel not in deletes:
                    (tmp / rel).parent.mkdir(parents=True, exist_ok=True)
                    _link_or_copy(p, tmp / rel)
            for rel, src in adds.items():
                (tmp / rel).parent.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(src, tmp / rel)

        try:
            tree = repo / "commits" / sha
            if not tree.exists():
                tree.parent.mkdir(parents=True, exist_ok=True)
                atomic_folder(tree, build)
            head = repo / "refs" / "heads" / "main"
            head.parent.mkdir(parents=True, exist_ok=True)
            part = head.with_name(".main.part")
            part.write_text(sha)
            os.replace(part, head)
        except OSError as e:
            raise Unreachable(f"could not write to {self.describe(repo_id)}: {e}") from e

    def list_files(self, repo_id: str, *, repo_type: str, prefix: str = "") -> list[str]:
        tree = self._main_tree(repo_id, repo_type)
        if tree is None:
            return []
        return sorted(r for r in (p.relative_to(tree).as_posix() for p in tree.rglob("*") if p.is_file())
                      if r.startswith(prefix))

    def download(self, repo_id: str, path: str, *, repo_type: str) -> Path:
        tree = self._main_tree(repo_id, repo_type)
        if tree is None or not (tree / path).is_file():
            raise NotFound(f"{path} not found in {self.describe(repo_id)}")
        return tree / path


def _link_or_copy(src: Path, dst: Path) -> None:
    try:
        os.link(src, dst)
    except OSError:  # another filesystem, or links unsupported
        shutil.copyfile(src, dst)
