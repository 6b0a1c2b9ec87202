"""Queries, splits and the benchmark gallery of the generated world.

A `WorldQuery` is everything every trainer and evaluator needs: reference scene, edit text (one
sentence, two changes, a terse query or 2–10 sentences), target scene, the target caption as a
real annotator would write it (often silent about the character), negative captions (failed
modifications) and the reference caption. Train queries never contain a held-out combination;
val/test queries may, and say so (`novel`).
"""
from __future__ import annotations

import random
from dataclasses import dataclass, field

from .language import Edit, apply_edit, caption, edit_text, possible_edits
from .spec import N_IDENTITIES, Scene, sample_scene

EDIT_TYPES = ("attribute", "spatial", "scene", "two", "short", "long")
TYPE_OPS = {
    "attribute": ("colour", "size", "shape", "add", "remove"),
    "spatial": ("move", "char_move", "char_face"),
    "scene": ("background",),
}
# Benchmark mix: enough long queries to measure PACE's progression.
TEST_MIX = {"attribute": .18, "spatial": .18, "scene": .12, "two": .18, "short": .12, "long": .22}
SPLIT_SEEDS = {"train": 1000, "val": 2000, "test": 3000}
MAX_SENTENCES = 10


@dataclass(frozen=True)
class WorldQuery:
    query_id: str
    reference: Scene
    ref_seed: int
    edit_type: str
    edits: tuple[Edit, ...]
    sentences: tuple[str, ...]  # one per atomic edit for "long"; a single element otherwise
    target: Scene
    target_seed: int
    target_caption: str
    negatives: tuple[str, ...]
    ref_caption: str
    novel: bool = field(default=False)

    @property
    def text(self) -> str:
        return " ".join(self.sentences)


def _sentence(clause: str) -> str:
    return clause[0].upper() + clause[1:] + "."


def _touch_key(e: Edit, uid: dict[str, int]) -> tuple:
    if e.op in ("char_move", "char_face", "background"):
        return (e.op,)
    attr = {"colour": "colour", "size": "size", "shape": "shape", "move": "pos"}.get(e.op, "all")
    return (-1 if e.target is None else uid.get(e.target, -1), attr)


def sequential_edits(scene: Scene, n: int, rng: random.Random,
                     ops: tuple[str, ...] | None = None) -> tuple[list[Edit], list[Scene]]:
    """`n` atomic edits applied in turn, each touching a different attribute of a different or
    the same entity, so no later edit undoes an earlier one. Returns edits and the scenes after
    each (scenes[-1] is the target)."""
    uid = {o.shape: i for i, o in enumerate(scene.objects)}
    next_uid, touched, edits, scenes = len(uid), set(), [], []
    cur, seen = scene, {scene.key()}
    for _ in range(n):
        cands = [e for e in possible_edits(cur, ops) if _touch_key(e, uid) not in touched
                 and (e.target is None or (uid[e.target], "all") not in touched)]
        if not cands:
            break
        e = rng.choice(cands)
        # Re-adding an object just removed (or a chain of such edits) would return to an earlier
        # scene: take the next candidate that does not (no extra draw, so other queries keep theirs).
        i = cands.index(e)
        fresh = next((c for c in cands[i:] + cands[:i] if apply_edit(cur, c).key() not in seen), None)
        if fresh is None:
            break
        e = fresh
        touched.add(_touch_key(e, uid))
        if e.op == "shape":
            uid[e.value_word] = uid.pop(e.target_word)
        elif e.op == "add":
            uid[e.value_obj.shape] = next_uid
            touched.add((next_uid, "all"))  # a new object is described whole; leave it be
            next_uid += 1
        elif e.op == "remove":
            touched.add((uid.pop(e.target_word), "all"))
        cur = apply_edit(cur, e)
        seen.add(cur.key())
        edits.append(e)
        scenes.append(cur)
    return edits, scenes


def _captions(rng: random.Random, edits: list[Edit], scenes: list[Scene],
              allow_novel: bool = True) -> tuple[str, list[str]]:
    """Target caption + negative captions, all with the same omissions (as one annotator would).
    With allow_novel=False no negative describes a held-out combination."""
    char_edit = any(e.op.startswith("char_") for e in edits)
    r = rng.random()
    character = char_edit or r >= 0.35
    name = r >= 0.75
    background = any(e.op == "background" for e in edits) or rng.random() >= 0.25
    state = rng.getstate()

    def cap(s: Scene) -> str:
        rng.setstate(state)  # same phrasing choices: negatives differ only in what changed
        return caption(s, rng, name=name, character=character, background=background)

    target, ref = scenes[-1], scenes[0]
    failed = [ref]  # edit not applied at all
    if len(edits) > 1:
        failed.append(scenes[-2])  # last change missing
    else:
        wrong = [apply_edit(ref, e) for e in possible_edits(ref, (edits[0].op,))
                 if e.target == edits[0].target and e != edits[0]]
        wrong = [w for w in wrong if w.key() != target.key() and (allow_novel or not w.is_novel())]
        if wrong:
            failed.append(rng.choice(wrong))  # right kind of change, wrong value
    tc = cap(target)
    negs = list(dict.fromkeys(c for c in (cap(s) for s in failed) if c != tc))
    return tc, negs


def sample_query(rng: random.Random, edit_type: str, query_id: str = "",
                 allow_novel: bool = True) -> WorldQuery:
    """One query of `edit_type`; with allow_novel=False no scene holds a held-out combination."""
    if edit_type not in EDIT_TYPES:
        raise ValueError(f"edit_type must be one of {EDIT_TYPES}, got {edit_type!r}")
    while True:
        ref = sample_scene(rng, allow_novel=allow_novel)
        n = {"two": 2, "long": rng.randint(2, MAX_SENTENCES)}.get(edit_type, 1)
        edits, scenes = sequential_edits(ref, n, rng, TYPE_OPS.get(edit_type))
        if len(edits) < min(n, 2 if edit_type == "long" else n):
            continue
        target = scenes[-1]
        if not allow_novel and any(s.is_novel() for s in scenes):  # intermediates are in the text
            continue
        if edit_type == "long":
            sentences = tuple(_sentence(edit_text(e, rng)) for e in edits)
        elif edit_type == "two":
            sentences = (_sentence(f"{edit_text(edits[0], rng)} and {edit_text(edits[1], rng)}"),)
        else:
            sentences = (edit_text(edits[0], rng, short=edit_type == "short"),)
            if edit_type != "short":
                sentences = (_sentence(sentences[0]),)
        tc, negs = _captions(rng, edits, [ref] + scenes, allow_novel)
        ref_cap = caption(ref, rng, name=rng.random() < 0.5)
        return WorldQuery(query_id, ref, rng.randrange(1 << 30), edit_type, tuple(edits), sentences,
                     target, rng.randrange(1 << 30), tc, tuple(negs), ref_cap,
                     ref.is_novel() or target.is_novel())


def query_stream(seed: int = 0, types: tuple[str, ...] = EDIT_TYPES):
    """Endless training queries (no held-out combinations), deterministic in `seed`."""
    rng = random.Random(f"train:{seed}")
    i = 0
    while True:
        t = types[i % len(types)]
        yield sample_query(rng, t, f"train-{seed}-{i}", allow_novel=False)
        i += 1


def make_queries(split: str, n: int, seed: int | None = None) -> list[WorldQuery]:
    """The fixed evaluation queries of `split` ("val" or "test"), mixed as TEST_MIX."""
    if split not in ("val", "test"):
        raise ValueError("evaluation splits are 'val' and 'test'")
    rng = random.Random(f"{split}:{SPLIT_SEEDS[split] if seed is None else seed}")
    types = [t for t, p in TEST_MIX.items() for _ in range(round(p * n))]
    types = (types + ["long"] * n)[:n]
    rng.shuffle(types)
    return [sample_query(rng, t, f"{split}-{i:05d}") for i, t in enumerate(types)]


SHOWCASE_SENTENCES = ("Make the square blue.", "Move the character to the left.")


def showcase_queries(k: int) -> list[WorldQuery]:
    """`k` queries whose edit is exactly SHOWCASE_SENTENCES (the README's demo): references
    hold a non-blue square and a character not on the left, so the edit applies. The app adds
    them to its world gallery so that typing the demo edit on one of these references has a
    ground truth to mark; evaluation does not use them."""
    rng = random.Random("showcase")
    edits = (Edit("colour", "square", "blue"), Edit("char_move", None, "left"))
    out: list[WorldQuery] = []
    while len(out) < k:
        ref = sample_scene(rng)
        sq = ref.obj("square")
        if sq is None or sq.colour == "blue" or ref.character.position == "left":
            continue
        scenes = [ref]
        for e in edits:
            scenes.append(apply_edit(scenes[-1], e))
        tc, negs = _captions(rng, list(edits), scenes)
        out.append(WorldQuery(f"demo-{len(out):02d}", ref, rng.randrange(1 << 30), "long", edits,
                         SHOWCASE_SENTENCES, scenes[-1], rng.randrange(1 << 30), tc, tuple(negs),
                         caption(ref, rng), ref.is_novel() or scenes[-1].is_novel()))
    return out


def other_identities(identity: int, k: int, rng: random.Random) -> list[int]:
    return rng.sample([i for i in range(N_IDENTITIES) if i != identity], k)
