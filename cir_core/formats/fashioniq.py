"""FashionIQ (Wu et al., CVPR 2021): the layout, the one image rule, its readers (evaluation:
`read`; training: `read_train`, `data=fashioniq:ROOT`) and the writer of a split in it.

Layout under ROOT (the XiaoxiaoGuo/fashion-iq files; images as CLIP4Cir and SEARLE keep them)::

    captions/cap.{dress,shirt,toptee}.{train,val}.json       [{candidate, target, captions: [c1, c2]}]
    image_splits/split.{dress,shirt,toptee}.{train,val}.json [name, ...]
    images/<name>.jpg              (or the start kit's resized_images/<category>/<name>.jpg)

**The image rule** (`ImageFinder`), the same for evaluation and training: `images/<name>.jpg`,
which is what every public loader opens (the start kit's `data_loader.py`, CLIP4Cir's and
SEARLE's `FashionIQDataset`, for train and val alike); when a name has no `.jpg`, a file with
another extension (`EXTS` order: .jpeg, .png, .webp, .bmp); then the start kit's
`resized_images/<category>/` by the same order. A name with none is an error naming the `.jpg`
expected.
"""
from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .common import FormatError, Triplet, need, read_json
from .registry import Format, register_format
from .writing import Folder, Split

CATEGORIES = ("dress", "shirt", "toptee")
EXTS = (".jpg", ".jpeg", ".png", ".webp", ".bmp")  # .jpg first: the name every official loader opens


def cap_path(root: Path, cat: str, split: str = "val") -> Path:
    return root / "captions" / f"cap.{cat}.{split}.json"


def split_path(root: Path, cat: str, split: str = "val") -> Path:
    return root / "image_splits" / f"split.{cat}.{split}.json"


def join_captions(first: str, second: str) -> str:
    """CLIP4Cir's text of a triplet, in training and validation: 'First caption and second caption'."""
    return f"{first.strip('.?, ').capitalize()} and {second.strip('.?, ')}"


def _listing(folder: Path) -> dict[str, str]:
    """{stem: file name} of the image files in `folder` ({} when absent); of two files with one
    stem, the extension earlier in `EXTS` wins."""
    if not folder.is_dir():
        return {}
    rank = {e: i for i, e in enumerate(EXTS)}
    found: dict[str, str] = {}
    with os.scandir(folder) as it:
        for e in it:
            stem, ext = os.path.splitext(e.name)
            ext = ext.lower()
            if ext in rank and (stem not in found or rank[ext] < rank[os.path.splitext(found[stem])[1].lower()]):
                found[stem] = e.name
    return found


class ImageFinder:
    """Image files by name, by the image rule: `images`/<name>.<ext> (default ROOT/images), else
    ROOT/resized_images/<category>/<name>.<ext>."""

    def __init__(self, root: Path, images: Path | None = None):
        self.root = root
        self.folder = images if images is not None else root / "images"
        self.flat = _listing(self.folder)
        self.per_cat: dict[str, dict[str, str]] = {}

    def __call__(self, name: str, cat: str) -> str | None:
        if name in self.flat:
            return str(self.folder / self.flat[name])
        if cat not in self.per_cat:
            self.per_cat[cat] = _listing(self.root / "resized_images" / cat)
        if name in self.per_cat[cat]:
            return str(self.root / "resized_images" / cat / self.per_cat[cat][name])
        return None

    def expected(self, cat: str) -> str:
        """What was looked for, for an error."""
        return (f"the official loaders read images/<name>.jpg; no file with another extension "
                f"{'/'.join(EXTS[1:])} either, nor resized_images/{cat}/<name>.jpg")

    def require(self, names: list[str], cat: str) -> list[str]:
        paths = [self(n, cat) for n in names]
        found = [p for p in paths if p is not None]
        missing = [n for n, p in zip(names, paths) if p is None]
        if missing:
            shown = ", ".join(f"{n}.jpg" for n in missing[:3]) + (f" (+{len(missing) - 3} more)" if len(missing) > 3 else "")
            raise FormatError(f"{self.folder}: {len(missing)} image file(s) of {cat} not found: {shown} "
                              f"({self.expected(cat)})")
        return found


@dataclass(frozen=True)
class FIQTriplet:
    candidate: str  # the reference image's name
    target: str
    captions: tuple[str, str]  # as in the file


def read_triplets(path: Path, split: str, known: set[str] | None = None, known_file: str = "") -> list[FIQTriplet]:
    """`captions/cap.{category}.{split}.json`, every entry checked (every target among `known`,
    the names of the split file `known_file`, when given); a test file without targets (the
    official one) is refused naming the entry."""
    caps = read_json(path)
    if not isinstance(caps, list) or not caps:
        raise FormatError(f"{path}: expected a non-empty list of triplets")
    hidden = next((i for i, c in enumerate(caps) if isinstance(c, dict) and "target" not in c), None)
    if split == "test" and hidden is not None:
        raise FormatError(f"{path} entry {hidden}: no 'target' (FashionIQ's test targets are not public; "
                          "evaluate --split val)")
    out = []
    for i, c in enumerate(caps):
        where = f"{path} entry {i}"
        cand, tgt = need(c, "candidate", str, where), need(c, "target", str, where)
        two = need(c, "captions", list, where)
        if len(two) != 2 or not all(isinstance(x, str) for x in two):
            raise FormatError(f"{where}: 'captions' should hold exactly 2 strings")
        if known is not None and tgt not in known:
            raise FormatError(f"{where}: target {tgt!r} is not in {known_file}")
        out.append(FIQTriplet(cand, tgt, (two[0], two[1])))
    return out


@dataclass(frozen=True)
class FIQCategory:
    """One category of an evaluated split as read: the split file's names, the checked triplets,
    and the references missing from the split file (`extra`, usually none), with every path."""

    name: str
    names: list[str]
    triplets: list[FIQTriplet]
    extra: list[str]
    paths: list[str]  # of names + extra


def read_category(root: Path, cat: str, split: str = "val", finder: ImageFinder | None = None) -> FIQCategory:
    """The evaluation reader of one category: its split file and caption file, checked (a
    target must be in the split file; a candidate need not), and every image found."""
    finder = finder or ImageFinder(root)
    path_s = split_path(root, cat, split)
    names = read_json(path_s)
    if not isinstance(names, list) or not names or not all(isinstance(n, str) for n in names):
        raise FormatError(f"{path_s}: expected a non-empty list of image names")
    known = set(names)
    if len(known) != len(names):
        raise FormatError(f"{path_s}: an image name is listed twice")
    trips = read_triplets(cap_path(root, cat, split), split, known, path_s.name)
    extra = [n for n in dict.fromkeys(t.candidate for t in trips) if n not in known]
    return FIQCategory(cat, names, trips, extra, finder.require(names + extra, cat))


def read(root: Path, split: str = "val", categories: Sequence[str] = CATEGORIES, hint: str = "") -> list[FIQCategory]:
    """The evaluation reader: `categories` of `split`, each a caption file that must exist (the
    error lists the missing ones, then `hint`), read with one image listing."""
    missing = [c for c in categories if not cap_path(root, c, split).is_file()]
    if missing:
        raise FormatError(f"{root}: FashionIQ caption file(s) not found: "
                          + ", ".join(str(cap_path(root, c, split).relative_to(root)) for c in missing) + hint)
    finder = ImageFinder(root)
    return [read_category(root, c, split, finder) for c in categories]


def read_train(root: Path, image_root: str | None = None) -> list[Triplet]:
    """The training reader (`data=fashioniq:ROOT`): every category's train triplets, CLIP4Cir's
    text (`join_captions`), images by the image rule (`image_root`: the folder instead of
    ROOT/images)."""
    finder = ImageFinder(root, Path(image_root).expanduser() if image_root else None)
    out = []
    for cat in CATEGORIES:
        path = cap_path(root, cat, "train")
        for i, t in enumerate(read_triplets(path, "train")):
            paths = []
            for key, name in (("candidate", t.candidate), ("target", t.target)):
                p = finder(name, cat)
                if p is None:
                    raise FormatError(f"{path} entry {i}: {key} {name!r}: no image {name}.jpg in {finder.folder} "
                                      f"({finder.expected(cat)})")
                paths.append(str(Path(p).resolve()))
            out.append(Triplet(paths[0], t.candidate, join_captions(*t.captions), target_image=paths[1],
                               target_key=t.target, edit_type=cat))
    return out


def write(split: Split, out: Folder, category: str = "dress") -> dict[str, Any]:
    """One category: the split's pictures under asin-shaped names, each query with its two
    captions (its text and `second_text`), images as `images/<name>.jpg`."""
    if category not in CATEGORIES:
        raise FormatError(f"--category must be one of {', '.join(CATEGORIES)}, got {category!r}")
    s = split.name
    names = [f"W{s[0].upper()}{j:08d}" for j in range(len(split.pictures))]
    out.items.update({n: p.source for n, p in zip(names, split.pictures)})
    out.json(f"image_splits/split.{category}.{s}.json", names)
    caps = []
    for i, q in enumerate(split.queries):
        assert q.target is not None
        caps.append({"target": names[q.target], "candidate": names[q.reference], "captions": [q.text, q.second_text]})
        out.queries[f"{category}/{i}"] = q.source
    out.json(f"captions/cap.{category}.{s}.json", caps)
    out.images([(f"images/{n}.jpg", p.draw) for n, p in zip(names, split.pictures)], "fashioniq")
    out.notes.append(f"one category ({category}): evaluate with --subset {category}; the second caption "
                     "rephrases the same edits")
    if s == "test":
        out.notes.append("test captions carry target (the world knows it; the official test file does not)")
    return {"split_name": s, "category": category, "queries": len(caps), "gallery": len(names)}


register_format(Format("fashioniq", "FashionIQ: per-category captions and splits, images/<asin>.jpg",
                       benchmark="fashioniq", read=read, read_train=read_train, write=write, order=30))
