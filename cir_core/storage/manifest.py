"""What may travel through the Hub and how it is checked: the file policy (safetensors, JSON and
pickle-free .npy only; a gallery adds its frames, JSONL tables and FAISS index; a label set,
`db.publish`'s Hugging Face dataset, its parquet tables), the
`cir_manifest.json` written on push (every file with its sha256) and verified on pull, and the
per-kind layout checks (methods, backbone, embeddings, gallery)."""
from __future__ import annotations

from collections import defaultdict
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable, Iterable

from ..fileio import loads_json, sha256_file
from .base import StorageError, matches

MANIFEST = "cir_manifest.json"
FORMAT = "cir-hub-manifest/1"
KINDS = ("methods", "backbone", "embeddings", "gallery", "labels")
# .npy is allowed because np.load(allow_pickle=False) refuses object arrays; .npz is not (zip of
# arbitrary members). Everything else that can hold a pickle is named in the refusal.
ALLOWED_SUFFIXES = (".json", ".safetensors", ".npy", ".md", ".txt")
PICKLE_SUFFIXES = (".bin", ".pt", ".pth", ".pkl", ".pickle", ".ckpt", ".joblib", ".npz")
IGNORED = (".gitattributes",)  # the Hub adds it to every repo; it is never loaded
# A gallery (cir_core.hub.gallery, which checks its own layout) also carries its frames (decoded
# by PIL behind the bomb guard, never unpickled), JSONL tables and the FAISS index of an
# approximate index folder.
GALLERY_SUFFIXES = (".jsonl", ".faiss", ".jpg", ".jpeg", ".png", ".webp", ".bmp")
# A label set (db.publish): its tables as parquet (data, never code), its card, qrels, figures.
LABELS_SUFFIXES = (".parquet", ".png")
# (folder, files, where) -> None, raising StorageError: a kind's layout check kept above this layer
LayoutCheck = Callable[[Path, list[str], str], None]




def list_files(folder: Path) -> list[str]:
    """Relative POSIX paths of the files under `folder` (hidden ones and the manifest left out)."""
    out = []
    for p in sorted(Path(folder).rglob("*")):
        rel = p.relative_to(folder).as_posix()
        if p.is_file() and rel != MANIFEST and not any(part.startswith(".") for part in rel.split("/")):
            out.append(rel)
    return out


def check_policy(files: Iterable[str], where: str, kind: str | None = None) -> None:
    """Refuse pickle-capable and unknown file types (for `kind`), naming each."""
    files = list(files)
    pickles = [f for f in files if f.lower().endswith(PICKLE_SUFFIXES)]
    if pickles:
        raise StorageError(f"{where}: refusing pickle-capable file(s) {', '.join(pickles[:5])}: only "
                       "safetensors weights travel through the Hub (convert with safetensors.torch.save_file)")
    allowed = ALLOWED_SUFFIXES + {"gallery": GALLERY_SUFFIXES, "labels": LABELS_SUFFIXES}.get(kind or "", ())
    odd = [f for f in files if not f.lower().endswith(allowed)]
    if odd:
        raise StorageError(f"{where}: unexpected file type(s) {', '.join(odd[:5])} "
                       f"(allowed: {', '.join(allowed)})")


def build_manifest(folder: Path, kind: str, files: list[str], git_commit: str | None) -> dict[str, Any]:
    """The manifest for `files` (relative to `folder`) of a `kind` push."""
    return {"format": FORMAT, "kind": kind, "git_commit": git_commit,
            "created": datetime.now(timezone.utc).isoformat(timespec="seconds"),
            "files": {f: {"sha256": sha256_file(folder / f), "size": (folder / f).stat().st_size}
                      for f in files}}


class ManifestMismatch(StorageError):
    """A file that is not listed in the manifest, or whose sha256 differs from it."""


def read_manifest(path: Path, kind: str, where: str) -> dict[str, dict[str, Any]]:
    """The files a `kind` manifest lists (name -> {sha256, size}); StorageError when it is not one."""
    if not path.is_file():
        raise StorageError(f"{where}: no {MANIFEST} in the repo, so its files cannot be verified "
                       "(publish with `python -m cir_core.hub push`, which writes it)")
    try:
        manifest = loads_json(path.read_text(encoding="utf-8"))
    except ValueError:
        manifest = None
    listed = manifest.get("files") if isinstance(manifest, dict) else None
    if not isinstance(listed, dict) or manifest.get("format") != FORMAT:
        raise StorageError(f"{where}: {MANIFEST} is not a {FORMAT} manifest")
    if manifest.get("kind") != kind:
        raise StorageError(f"{where}: the repo holds {manifest.get('kind')!r}, not {kind!r}")
    return listed


def verify_file(folder: Path, name: str, listed: dict[str, dict[str, Any]], where: str) -> Path:
    """`folder / name`, once its sha256 matches the manifest's entry; StorageError otherwise."""
    entry = listed.get(name)
    if not isinstance(entry, dict):
        raise ManifestMismatch(f"{where}: file {name} is not in the manifest (tampered?)")
    if sha256_file(folder / name) != entry.get("sha256"):
        raise ManifestMismatch(f"{where}: {name} does not match the sha256 in {MANIFEST} "
                       "(tampered or corrupt download); refusing to use it")
    return folder / name


def verify_snapshot(folder: Path, kind: str, where: str,
                    patterns: list[str] | None = None) -> list[str]:
    """Check a downloaded snapshot against its manifest; returns the verified files.

    Every file present must be listed with the same sha256 (a changed or an extra file is
    refused), and every listed file that `patterns` asked for must be present."""
    listed = read_manifest(folder / MANIFEST, kind, where)
    present = [f for f in list_files(folder) if f not in IGNORED]
    check_policy(present, where, kind)
    extra = [f for f in present if f not in listed]
    if extra:
        raise StorageError(f"{where}: file(s) not in the manifest: {', '.join(extra[:5])} (tampered?)")
    missing = [f for f in listed if matches(f, patterns) and not (folder / f).is_file()]
    if missing:
        raise StorageError(f"{where}: file(s) listed in the manifest but missing: {', '.join(missing[:5])}")
    for f in present:
        verify_file(folder, f, listed, where)
    return present


def _check_safetensors(path: Path, where: str) -> None:
    from safetensors import safe_open

    try:  # reads the header only: the tensors stay on disk
        with safe_open(str(path), "numpy") as f:
            list(f.keys())
    except Exception as exc:
        raise StorageError(f"{where}: {path.name} is not a readable safetensors file ({type(exc).__name__})") from None


def _check_json(path: Path, where: str, want_object: bool = True) -> Any:
    try:
        obj = loads_json(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise StorageError(f"{where}: {path.name} is not valid JSON ({exc})") from None
    if want_object and not isinstance(obj, dict):
        raise StorageError(f"{where}: {path.name} must hold a JSON object")
    return obj


def check_layout(folder: Path, kind: str, files: list[str], where: str,
                 layout: LayoutCheck | None = None) -> None:
    """The layout `kind` needs (see docs/SPACES.md), with readable headers; raises StorageError.
    A gallery's layout is its own module's (`layout`): it names index folders and frames, which
    sit above this layer."""
    if kind not in KINDS:
        raise StorageError(f"unknown kind {kind!r} (one of {', '.join(KINDS)})")
    if not files:
        raise StorageError(f"{where}: no files to check")
    check_policy(files, where, kind)
    for f in files:
        if f.endswith(".safetensors"):
            _check_safetensors(folder / f, where)
        elif f.endswith(".json"):
            _check_json(folder / f, where, want_object=False)
    docs = (".md", ".txt")
    if kind == "methods":
        groups: dict[str, set[str]] = defaultdict(set)
        for f in files:
            head, _, tail = f.partition("/")
            if not f.endswith(docs):
                if "/" not in f or "/" in tail:
                    raise StorageError(f"{where}: {f} is not <method>/config.json or <method>/model.safetensors")
                groups[head].add(tail)
        for name, got in sorted(groups.items()):
            if got != {"config.json", "model.safetensors"}:
                raise StorageError(f"{where}: method folder {name}/ must hold exactly config.json and "
                               f"model.safetensors, found {', '.join(sorted(got))}")
        if not groups:
            raise StorageError(f"{where}: no <method>/ folders")
    elif kind == "backbone":
        if "open_clip_config.json" not in files:
            raise StorageError(f"{where}: no open_clip_config.json (a backbone is a local-dir: folder)")
        if "model_cfg" not in _check_json(folder / "open_clip_config.json", where):
            raise StorageError(f"{where}: open_clip_config.json has no model_cfg")
        if not any(f.endswith(".safetensors") and "/" not in f for f in files):
            raise StorageError(f"{where}: no .safetensors weights beside open_clip_config.json")
    elif kind == "labels":
        _check_labels(folder, files, where)
    elif kind == "gallery":
        if layout is None:
            raise StorageError(f"{where}: a gallery's layout is checked by cir_core.hub.gallery "
                               "(`python -m cir_core.hub pull gallery`, open_hub_gallery)")
    else:
        _check_embeddings(folder, files, where)
    if layout is not None:
        layout(folder, files, where)


def _check_labels(folder: Path, files: list[str], where: str) -> None:
    """A Hugging Face dataset of labels: its card (README.md) and parquet tables under data/,
    each a whole parquet file (the magic bytes at both ends; pyarrow reads the rest)."""
    if "README.md" not in files:
        raise StorageError(f"{where}: no README.md (the dataset card)")
    tables = [f for f in files if f.endswith(".parquet")]
    if not tables or not all(f.startswith("data/") for f in tables):
        raise StorageError(f"{where}: a label set keeps its parquet tables under data/, found {tables[:5]}")
    for f in tables:
        with open(folder / f, "rb") as fh:
            head = fh.read(4)
            fh.seek(-4, 2)
            tail = fh.read(4)
        if head != b"PAR1" or tail != b"PAR1":
            raise StorageError(f"{where}: {f} is not a whole parquet file (truncated or another format)")


def _check_embeddings(folder: Path, files: list[str], where: str) -> None:
    import numpy as np

    leaves = sorted({f.rsplit("/", 1)[0] for f in files if f.endswith("/keys.json")})
    if not leaves:
        raise StorageError(f"{where}: no <backbone>/<gallery>/keys.json (an EmbeddingCache folder)")
    for leaf in leaves:
        d = folder / leaf
        if not (d / "embeddings.npy").is_file() or not (d / "backbone.json").is_file():
            raise StorageError(f"{where}: {leaf}/ needs backbone.json, keys.json and embeddings.npy")
        meta = _check_json(d / "backbone.json", where)
        keys = _check_json(d / "keys.json", where, want_object=False)
        if not isinstance(keys, list):
            raise StorageError(f"{where}: {leaf}/keys.json must hold a JSON list")
        try:
            emb = np.load(d / "embeddings.npy", mmap_mode="r", allow_pickle=False)
        except (ValueError, OSError) as exc:
            raise StorageError(f"{where}: {leaf}/embeddings.npy is not a plain array ({exc})") from None
        if emb.dtype != np.float32 or emb.ndim != 2 or emb.shape != (len(keys), int(meta.get("dim", -1))):
            raise StorageError(f"{where}: {leaf}/embeddings.npy is {emb.dtype} {emb.shape}, expected float32 "
                           f"({len(keys)}, {meta.get('dim')}) from keys.json and backbone.json")
