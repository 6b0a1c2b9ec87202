"""Real training data as triplets: what the trainers read when `data=` names a file or a root.

    itt:FILE         ITT JSONL (training/build_itt): source image, edit, target caption, negatives;
                     image paths relative to `image_root` (default: the file's folder)
    cirr:ROOT        CIRR's train split: captions/cap.rc2.train.json + image_splits/split.rc2.train.json
                     (either CIRR layout: images under ROOT/img_raw/, ROOT, or beside ROOT/cirr/)
    fashioniq:ROOT   FashionIQ's train split: captions/cap.{dress,shirt,toptee}.train.json,
                     images/<asin>.jpg (another extension only when no .jpg exists; `image_root`: the folder)
    lcirr:ROOT       L-CIRR's train manifest lcirr/train.jsonl over CIRR's train images

Each kind is a format of `cir_core.formats`, whose module owns the layout, the record checks and
this reader beside the evaluation reader and the world's writer. Every record is checked as it is
read; a bad one stops the run with an error naming the file, the record and the key, before any
model runs.
"""
from __future__ import annotations

from pathlib import Path

from cir_core.errors import InputError
from cir_core.formats import Triplet, get_format, list_formats

KINDS = tuple(list_formats("read_train"))

__all__ = ["KINDS", "Triplet", "parse_spec", "read_triplets"]


def parse_spec(spec: str) -> tuple[str, Path]:
    """(a format in KINDS, path) from 'kind:PATH'."""
    kind, sep, path = spec.partition(":")
    if not sep or kind not in KINDS or not path:
        raise InputError(f"data={spec!r}: expected one of {', '.join(k + ':PATH' for k in KINDS)} (or 'world')")
    return kind, Path(path).expanduser()


def read_triplets(spec: str, image_root: str | None = None) -> list[Triplet]:
    """The triplets of `spec` (see the module docstring), validated."""
    kind, path = parse_spec(spec)
    read = get_format(kind).read_train
    assert read is not None  # KINDS are the formats with a training reader
    return read(path, image_root)
