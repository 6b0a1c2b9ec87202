"""The world as the formats' writers take it (`cir_core.formats.Split`): how each world concept maps
onto the formats (docs/WORLD.md, "Exports").

- every gallery item of a split is one picture; a query's reference and target are gallery items;
  its edit text is the caption / relative caption / condition / edit;
- a query's subset is the world's (the target and its five hard distractors): CIRR's
  `img_set.members` (with the reference), GeneCIS's candidates;
- its correct pictures (`gt`) are the exact-key matches of the target (CIRCO `gt_img_ids`);
- its second wording rephrases the same edits with a rng of its own (FashionIQ's second caption);
  what reference and target share is the character (CIRCO `shared_concept`); colour, size and
  shape edits change attributes only (GeneCIS change_attribute, the rest change_object);
- every gallery item is a frame of one film, `world-SPLIT`, showing its character (MovieNet's
  `character_ids`, by the character's name); a query follows its reference's character;
- the world knows every target, so test files carry them too (the official test files do not);
- the train split (itt, cirr, lcirr) is the training stream `query_stream(0)`: each query's own
  reference and target renders, as the native trainers see them (`query_split`).
"""
from __future__ import annotations

import random
from collections.abc import Sequence
from functools import partial

from cir_core.formats import Picture, Query, Split

from ..benchmark import WorldBenchmark
from ..data import WorldQuery
from ..language import edit_text
from ..render import RENDER_VERSION, render
from ..spec import identity_look

ATTRIBUTE_OPS = frozenset({"colour", "size", "shape"})  # GeneCIS change_attribute; the rest change_object
HATS = {"top hat": "a top hat", "crown": "a crown", "horns": "horns", "antenna": "an antenna"}
GENERATOR = {"mode": "template", "model": f"cir-world-render-v{RENDER_VERSION}"}  # ITT's `generator`


def _sentence(clause: str) -> str:
    return clause[0].upper() + clause[1:] + "."


def second_caption(q: WorldQuery) -> str:
    """Another annotator's wording of the same edits (FashionIQ has two captions per triplet):
    the same structure as the query's text, each edit rephrased with a rng of its own."""
    rng = random.Random(f"second-caption:{q.query_id}")
    for _ in range(8):
        if q.edit_type == "long":
            text = " ".join(_sentence(edit_text(e, rng)) for e in q.edits)
        elif len(q.edits) == 2:
            text = _sentence(f"{edit_text(q.edits[0], rng)} and {edit_text(q.edits[1], rng)}")
        elif q.edit_type == "short":
            text = edit_text(q.edits[0], rng, short=True)
        else:
            text = _sentence(edit_text(q.edits[0], rng))
        if text != q.text:
            return text
    return text


def shared_concept(bench: WorldBenchmark, row: int) -> str:
    """What the reference and the target share (CIRCO's `shared_concept`): the character."""
    body, hat = identity_look(bench.items[row].scene.character.identity)
    return f"a {body} figure with {HATS[hat]}"


def _query(q: WorldQuery, reference: int, target: int, **more) -> Query:
    ops = tuple(e.op for e in q.edits)
    return Query(q.query_id, reference, target, q.text, edit_type=q.edit_type, attribute_only=set(ops) <= ATTRIBUTE_OPS,
                 ref_caption=q.ref_caption, target_caption=q.target_caption, negatives=tuple(q.negatives), ops=ops,
                 **more)


def gallery_split(bench: WorldBenchmark, size: int) -> Split:
    """A test or val split: the benchmark's gallery, every query pointing into it."""
    film = f"world-{bench.split}"
    pictures = [Picture(it.item_id, it.item_id, partial(it.image, size), characters=(it.scene.character.name,),
                        film=film) for it in bench.items]
    gts = bench.gt_sets()
    queries = [_query(q, ref, tgt, subset=tuple(sub), gt=tuple(sorted(gt)), second_text=second_caption(q),
                      shared_concept=shared_concept(bench, ref), character=bench.items[ref].scene.character.name)
               for q, ref, tgt, sub, gt in zip(bench.queries, bench.reference_idx, bench.target_idx, bench.subsets, gts)]
    return Split(bench.split, pictures, queries, GENERATOR)


def query_split(queries: Sequence[WorldQuery], size: int, name: str) -> Split:
    """Queries with their own pictures: query i's reference render is picture 2i (its id the
    query's), its target render 2i + 1 (the training stream; ITT's references)."""
    pictures, out = [], []
    for i, q in enumerate(queries):
        pictures += [Picture(q.query_id, f"reference of {q.query_id}", partial(render, q.reference, size, q.ref_seed)),
                     Picture(f"{q.query_id}/target", f"target of {q.query_id}",
                             partial(render, q.target, size, q.target_seed))]
        out.append(_query(q, 2 * i, 2 * i + 1))
    return Split(name, pictures, out, GENERATOR)
