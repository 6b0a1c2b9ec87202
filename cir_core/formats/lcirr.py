"""L-CIRR: CIRR images with long, multi-sentence edit texts (this project's format): the layout, its
readers (evaluation: `read`; training: `read_train`, `data=lcirr:ROOT`) and its writers.

A CIRR root in either of its layouts (its image_splits and images, `cirr.py`) plus::

    lcirr/{train,val,test1}.jsonl    one {"pairid", "reference", "target", "text"} per line
                                     (ROOT/lcirr/, or beside captions/ in the SEARLE layout: ROOT/cirr/lcirr/)

`reference` and `target` are CIRR image names of that split; `text` is the long edit, at least
one sentence (leading and trailing blanks are not part of it); `pairid` (an int or a string) is
unique, and a CIRR pairid when the pair is CIRR's own.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cir_core.text import split_sentences

from . import cirr
from .common import FormatError, Triplet, need, read_jsonl
from .registry import Format, register_format
from .writing import Folder, Split


@dataclass(frozen=True)
class LQuery:
    pairid: str
    reference: str
    target: str
    text: str  # stripped


def queries_file(root: Path, layout: cirr.Layout, split: str) -> Path:
    """ROOT/lcirr/{split}.jsonl, else the one beside the CIRR annotations (the first named when neither is)."""
    return next((p for p in (root / "lcirr" / f"{split}.jsonl", layout.ann / "lcirr" / f"{split}.jsonl")
                 if p.is_file()), root / "lcirr" / f"{split}.jsonl")


def read_queries(path: Path, split: str, known: set[str] | dict[str, Any]) -> list[LQuery]:
    """Every line of `path` checked: keys, a text with a sentence, reference and target in the
    CIRR split's images `known`, unique pairids."""
    rows = read_jsonl(path)
    if not rows:
        raise FormatError(f"{path}: no queries")
    out = []
    for n, r in enumerate(rows, 1):
        where = f"{path} query {n}"
        pid = need(r, "pairid", (int, str), where)
        text = need(r, "text", str, where).strip()
        if not split_sentences(text):
            raise FormatError(f"{where}: 'text' has no sentence")
        names = {}
        for key in ("reference", "target"):
            names[key] = need(r, key, str, where)
            if names[key] not in known:
                raise FormatError(f"{where}: {key} {names[key]!r} is not in image_splits/"
                                  f"split.{cirr.VERSION}.{split}.json")
        out.append(LQuery(str(pid), names["reference"], names["target"], text))
    if len({q.pairid for q in out}) != len(out):
        raise FormatError(f"{path}: duplicate pairid")
    return out


@dataclass(frozen=True)
class LCIRRFiles:
    """An evaluated split as read: the CIRR layout and images, the queries and their file."""

    layout: cirr.Layout
    split: str  # the rc2 name
    images: dict[str, str]
    queries: list[LQuery]
    path: Path


def read(root: Path, split: str) -> LCIRRFiles:
    """The evaluation reader: L-CIRR `split` ('val', 'test'/'test1') from ROOT."""
    if split not in cirr.SPLITS:
        raise FormatError(f"L-CIRR has splits val and test (test1), not {split!r}")
    s = cirr.SPLITS[split]
    layout = cirr.find_layout(root, s)
    images = cirr.read_images(layout, s)
    path = queries_file(root, layout, s)
    return LCIRRFiles(layout, s, images, read_queries(path, s, images), path)


def read_train(root: Path, image_root: str | None = None) -> list[Triplet]:
    """The training reader (`data=lcirr:ROOT`): lcirr/train.jsonl over CIRR's train images."""
    layout = cirr.find_layout(root, "train")
    images = cirr.read_images(layout, "train")
    queries = read_queries(queries_file(root, layout, "train"), "train", images)
    return [Triplet(images[q.reference], q.reference, q.text, target_image=images[q.target], target_key=q.target)
            for q in queries]


def write(split: Split, out: Folder) -> dict[str, Any]:
    """CIRR's files of the split, plus lcirr/{split}.jsonl with each query's whole text."""
    summary = cirr.write(split, out)
    names = cirr.gallery_names(split.name, len(split.pictures))
    rows = []
    for i, q in enumerate(split.queries):
        assert q.target is not None  # cirr.write has checked it too
        rows.append({"pairid": i, "reference": names[q.reference], "target": names[q.target], "text": q.text})
    out.jsonl(f"lcirr/{summary['split_name']}.jsonl", rows)
    return summary


def write_train(split: Split, out: Folder) -> dict[str, Any]:
    """CIRR's train files of the split, plus lcirr/train.jsonl over the same image pairs."""
    summary = cirr.write_train(split, out)
    out.jsonl("lcirr/train.jsonl", ({"pairid": i, "reference": cirr.train_names(i)[0],
                                     "target": cirr.train_names(i)[1], "text": q.text}
                                    for i, q in enumerate(split.queries)))
    return summary


register_format(Format("lcirr", "L-CIRR: CIRR images, long multi-sentence edits (lcirr/{split}.jsonl)",
                       benchmark="lcirr", read=read, read_train=read_train, write=write, write_train=write_train,
                       order=50))
