"""Real training data as triplets: what the trainers read when `data=` names a file or a root.

    itt:FILE         ITT JSONL (training/build_itt): source image, edit, target caption, negatives;
                     image paths relative to `image_root` (default: the file's folder)
    cirr:ROOT        CIRR's train split: captions/cap.rc2.train.json + image_splits/split.rc2.train.json
                     (images under ROOT/img_raw/, or ROOT itself)
    fashioniq:ROOT   FashionIQ's train split: captions/cap.{dress,shirt,toptee}.train.json,
                     images/<asin>.<ext> (whatever extension is present)
    lcirr:ROOT       L-CIRR's train manifest lcirr/train.jsonl over CIRR's train images

Every record is checked as it is read; a bad one stops the run with an error naming the file,
the record and the key, before any model runs.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from cir_core.benchmarks.common import BenchmarkError, need, read_json, read_jsonl
from cir_core.errors import InputError
from cir_core.fileio import loads_json

KINDS = ("itt", "cirr", "fashioniq", "lcirr")
FIQ_CATEGORIES = ("dress", "shirt", "toptee")
IMAGE_EXTS = (".png", ".jpg", ".jpeg", ".webp")


@dataclass(frozen=True)
class Triplet:
    """One training example. Captions or target images may be absent, as the source allows."""

    ref_image: str  # a path
    ref_key: str  # the reference image's id (equal ids: the same image)
    edit: str
    ref_caption: str | None = None
    target_caption: str | None = None
    target_image: str | None = None
    target_key: str | None = None
    negatives: tuple[str, ...] = ()
    edit_type: str | None = None


def parse_spec(spec: str) -> tuple[str, Path]:
    """('itt' | 'cirr' | 'fashioniq' | 'lcirr', path) from 'kind:PATH'."""
    kind, sep, path = spec.partition(":")
    if not sep or kind not in KINDS or not path:
        raise InputError(f"data={spec!r}: expected one of {', '.join(k + ':PATH' for k in KINDS)} (or 'world')")
    return kind, Path(path).expanduser()


def read_triplets(spec: str, image_root: str | None = None) -> list[Triplet]:
    """The triplets of `spec` (see the module docstring), validated."""
    kind, path = parse_spec(spec)
    try:
        return {"itt": read_itt, "cirr": read_cirr, "fashioniq": read_fashioniq,
                "lcirr": read_lcirr}[kind](path, image_root)
    except BenchmarkError as exc:
        raise InputError(str(exc)) from None


def read_itt(path: Path, image_root: str | None = None) -> list[Triplet]:
    from .itt.schema import validate_record

    if not path.is_file():
        raise InputError(f"ITT file {str(path)!r} not found")
    root = Path(image_root).expanduser() if image_root else path.parent
    out = []
    for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        try:
            rec = validate_record(loads_json(line))
        except (ValueError, InputError) as exc:
            raise InputError(f"{path} line {n}: {exc}") from None
        image = (root / rec["image"]).resolve()
        if not image.is_file():
            raise InputError(f"{path} line {n} (id {rec['id']}): image {str(image)!r} not found "
                             f"(image_root={str(root)!r})")
        out.append(Triplet(str(image), rec["image_id"], rec["edit"], rec["source_caption"],
                           rec["target_caption"], negatives=tuple(rec["negatives"]), edit_type=rec["edit_type"]))
    if not out:
        raise InputError(f"{path}: no ITT records")
    return out


def _cirr_images(root: Path) -> dict[str, str]:
    """name -> absolute path of CIRR's train images (official img_raw/ layout, or ROOT/train)."""
    split = root / "image_splits" / "split.rc2.train.json"
    names = read_json(split)
    if not isinstance(names, dict) or not names:
        raise InputError(f"{split}: expected a non-empty object {{image name: relative path}}")
    base = root / "img_raw" if (root / "img_raw").is_dir() else root
    out = {}
    for name, rel in names.items():
        p = (base / str(rel)).resolve()
        if not p.is_file():
            raise InputError(f"{split} key {name!r}: image {str(p)!r} not found")
        out[name] = str(p)
    return out


def read_cirr(root: Path, image_root: str | None = None) -> list[Triplet]:
    images = _cirr_images(root)
    path = root / "captions" / "cap.rc2.train.json"
    caps = read_json(path)
    if not isinstance(caps, list) or not caps:
        raise InputError(f"{path}: expected a non-empty list of query objects")
    out = []
    for i, c in enumerate(caps):
        where = f"{path} entry {i}"
        ref, tgt, text = need(c, "reference", str, where), need(c, "target_hard", str, where), need(c, "caption", str, where)
        for key, name in (("reference", ref), ("target_hard", tgt)):
            if name not in images:
                raise InputError(f"{where} (pairid {c.get('pairid')}): {key} {name!r} is not in split.rc2.train.json")
        out.append(Triplet(images[ref], ref, text, target_image=images[tgt], target_key=tgt))
    return out


def read_lcirr(root: Path, image_root: str | None = None) -> list[Triplet]:
    images = _cirr_images(root)
    path = root / "lcirr" / "train.jsonl"
    out = []
    for i, r in enumerate(read_jsonl(path)):
        where = f"{path} query {r.get('pairid', i)}"
        ref, tgt, text = need(r, "reference", str, where), need(r, "target", str, where), need(r, "text", str, where)
        for key, name in (("reference", ref), ("target", tgt)):
            if name not in images:
                raise InputError(f"{where}: {key} {name!r} is not in CIRR's train split")
        out.append(Triplet(images[ref], ref, text, target_image=images[tgt], target_key=tgt))
    if not out:
        raise InputError(f"{path}: no queries")
    return out


def _fiq_image(images: Path, asin: str, where: str) -> str:
    for ext in IMAGE_EXTS:
        if (images / f"{asin}{ext}").is_file():
            return str((images / f"{asin}{ext}").resolve())
    raise InputError(f"{where}: no image {asin}.{{jpg,png,...}} in {images} (the official loaders read "
                     f"images/<asin>.jpg)")


def read_fashioniq(root: Path, image_root: str | None = None) -> list[Triplet]:
    images = Path(image_root).expanduser() if image_root else root / "images"
    out = []
    for cat in FIQ_CATEGORIES:
        path = root / "captions" / f"cap.{cat}.train.json"
        caps = read_json(path)
        if not isinstance(caps, list):
            raise InputError(f"{path}: expected a list of query objects")
        for i, c in enumerate(caps):
            where = f"{path} entry {i}"
            ref, tgt = need(c, "candidate", str, where), need(c, "target", str, where)
            texts = need(c, "captions", list, where)
            if len(texts) != 2 or not all(isinstance(t, str) for t in texts):
                raise InputError(f"{where}: key 'captions' should hold two texts")
            # CLIP4Cir's training text: the two relative captions joined, first one capitalised
            text = f"{texts[0].strip('.?, ').capitalize()} and {texts[1].strip('.?, ')}"
            out.append(Triplet(_fiq_image(images, ref, where), ref, text,
                               target_image=_fiq_image(images, tgt, where), target_key=tgt, edit_type=cat))
    if not out:
        raise InputError(f"{root}: no FashionIQ training queries")
    return out
