"""The generated world: rendering, edits, queries, splits and the benchmark's ground truth.

Everything here is small (a few dozen renders, a few hundred queries, a 60-query benchmark) so
the file runs in seconds on busy CPUs.
"""
import json
import random
import re

import numpy as np
import pytest

from cir_core.world import spec
from cir_core.world.benchmark import SUBSET_SIZE, WorldItem, build_benchmark
from cir_core.world.data import (
    EDIT_TYPES,
    MAX_SENTENCES,
    TYPE_OPS,
    make_queries,
    query_stream,
    sample_query,
    sequential_edits,
)
from cir_core.world.language import Edit, apply_edit, edit_text, possible_edits
from cir_core.world.render import RENDER_VERSION, render
from cir_core.world.spec import Character, Obj, Scene, sample_scene

NAME_RE = re.compile(r"\b(" + "|".join(spec.NAMES) + r")\b", re.IGNORECASE)


def _scene(objs, identity=3, bg="beach", pos="center", facing="left") -> Scene:
    return Scene(bg, Character(identity, pos, facing), ()).with_objects(objs)


ONE = _scene([Obj("star", "red", "small", "left")])
THREE = _scene([Obj("circle", "blue", "large", "left"), Obj("square", "red", "small", "center"),
                Obj("cross", "green", "large", "right")], identity=17, bg="night")


@pytest.fixture(scope="module")
def test_queries():
    return make_queries("test", 300)


@pytest.fixture(scope="module")
def bench():
    return build_benchmark("test", 60)


def _pixels(img) -> np.ndarray:
    return np.asarray(img, dtype=np.int16)


# --- rendering -----------------------------------------------------------------------------------

def test_render_is_deterministic_in_scene_and_seed():
    s = THREE
    a, b = render(s, 64, seed=7), render(s, 64, seed=7)
    assert a.size == (64, 64) and a.mode == "RGB"
    assert a.tobytes() == b.tobytes()
    c = render(s, 64, seed=8)
    assert a.tobytes() != c.tobytes()  # the seed jitters placement...
    # ...but the ground truth is the scene, not the render
    i7, i8 = WorldItem("a", s, 7), WorldItem("b", s, 8)
    assert i7.scene.key() == i8.scene.key()
    assert i7.image(64).tobytes() == a.tobytes()


def test_render_any_size_is_the_same_picture():
    small, big = render(THREE, 64, seed=3), render(THREE, 512, seed=3)
    assert big.size == (512, 512)
    assert render(THREE, 16, seed=3).size == (16, 16)
    # the 512 px render shrunk to 64 px is the 64 px render up to anti-aliasing
    down = big.resize((64, 64), resample=3)  # bicubic
    diff = np.abs(_pixels(down) - _pixels(small)).mean()
    assert diff < 6, diff
    # and clearly closer than a render with another seed
    other = np.abs(_pixels(down) - _pixels(render(THREE, 64, seed=4))).mean()
    assert other > diff


@pytest.mark.parametrize("size", [0, -64, 8, 15, 4097, 100000])
def test_render_rejects_silly_sizes(size):
    with pytest.raises(ValueError):
        render(ONE, size)


def test_render_shows_what_the_scene_says():
    """Changing any spec field changes the pixels (same seed, so the jitter is identical)."""
    base = _pixels(render(THREE, 48, seed=1))
    variants = [
        replace_bg(THREE, "desert"),
        apply_edit(THREE, Edit("colour", "circle", "yellow")),
        apply_edit(THREE, Edit("size", "square", "large")),
        apply_edit(THREE, Edit("shape", "cross", "star")),
        apply_edit(THREE, Edit("shape", "circle", "triangle")),
        apply_edit(THREE, Edit("char_face", None, "right")),
        apply_edit(THREE, Edit("char_move", None, "left")),
        Scene(THREE.background, Character(5, "center", "left"), THREE.objects),  # identity
    ]
    for v in variants:
        assert np.abs(_pixels(render(v, 48, seed=1)) - base).sum() > 0, v


def replace_bg(s: Scene, bg: str) -> Scene:
    return apply_edit(s, Edit("background", None, bg))


def test_identities_look_distinct():
    looks = {spec.identity_look(i) for i in range(spec.N_IDENTITIES)}
    assert len(looks) == spec.N_IDENTITIES == 24
    renders = {render(Scene("meadow", Character(i, "center", "left"), ONE.objects), 32, 0).tobytes()
               for i in range(spec.N_IDENTITIES)}
    assert len(renders) == spec.N_IDENTITIES


# --- edits ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("scene", [ONE, THREE] + [sample_scene(random.Random(i)) for i in range(4)])
def test_every_possible_edit_changes_the_key(scene):
    edits = possible_edits(scene)
    assert edits
    ops = {e.op for e in edits}
    assert {"colour", "size", "shape", "char_move", "char_face", "background"} <= ops
    assert ("add" in ops) == (len(scene.objects) < 3)
    assert ("remove" in ops) == (len(scene.objects) > 1)
    assert ("move" in ops) == (len(scene.objects) < 3)
    keys = set()
    for e in edits:
        after = apply_edit(scene, e)
        after.validate()
        assert after.key() != scene.key(), e
        keys.add(after.key())
    assert len(keys) == len(edits)  # no two edits give the same scene
    assert possible_edits(scene, ("colour",)) == [e for e in edits if e.op == "colour"]


def test_apply_edit_rejects_edits_that_do_not_fit():
    with pytest.raises(ValueError):
        apply_edit(ONE, Edit("remove", "star"))  # the last object
    with pytest.raises(ValueError):
        apply_edit(THREE, Edit("move", "circle", "center"))  # slot taken by the square
    with pytest.raises(ValueError):
        apply_edit(THREE, Edit("shape", "circle", "square"))  # already a square
    with pytest.raises(ValueError):
        apply_edit(THREE, Edit("add", None, Obj("star", "red", "small", "left")))  # full
    with pytest.raises(ValueError):
        apply_edit(ONE, Edit("add", None, Obj("circle", "red", "small", "left")))  # slot taken
    with pytest.raises(ValueError):
        apply_edit(ONE, Edit("add", None, Obj("star", "blue", "small", "right")))  # shape taken
    with pytest.raises(ValueError):
        apply_edit(ONE, Edit("colour", "circle", "blue"))  # no circle
    with pytest.raises(ValueError):
        apply_edit(ONE, Edit("explode", "star"))
    # and the ones that fit do what they say
    fewer = apply_edit(THREE, Edit("remove", "square"))
    assert fewer.obj("square") is None and len(fewer.objects) == 2
    assert apply_edit(fewer, Edit("move", "circle", "center")).obj("circle").position == "center"


def test_an_edit_whose_value_is_not_what_its_op_reads_is_refused_by_name():
    """A word where an object is read, an object or a number where a word is: a ValueError naming
    the op, from apply_edit and edit_text alike (not a scene coloured 3, nor an AttributeError)."""
    for e in (Edit("colour", "star", 3), Edit("add", None, "star"), Edit("background", None, None),
              Edit("move", "star", Obj("circle", "red", "small", "right"))):
        with pytest.raises(ValueError, match=f"a {e.op!r} edit's value is"):
            apply_edit(ONE, e)
        with pytest.raises(ValueError, match=f"a {e.op!r} edit's value is"):
            edit_text(e, random.Random(0))


def _assert_no_undo(ref: Scene, edits, scenes):
    assert len(edits) == len(scenes)
    keys = [ref.key()] + [s.key() for s in scenes]
    assert len(set(keys)) == len(keys), "a later edit returned to an earlier scene"
    cur = ref
    for e, s in zip(edits, scenes):  # scenes are the edits applied in turn
        cur = apply_edit(cur, e)
        assert cur == s


def test_sequential_edits_never_undo():
    for i in range(40):
        rng = random.Random(i)
        ref = sample_scene(rng)
        edits, scenes = sequential_edits(ref, MAX_SENTENCES, rng)
        assert len(edits) >= 2
        _assert_no_undo(ref, edits, scenes)


def test_sequential_edits_do_not_re_add_a_removed_object():
    # Regression: "remove the circle. add a big blue circle on the left." restored the reference.
    for i in range(300):
        edits, scenes = sequential_edits(THREE, 2, random.Random(i), ops=("remove", "add"))
        _assert_no_undo(THREE, edits, scenes)


def test_query_edit_counts_and_sentences(test_queries):
    by_type = {t: [q for q in test_queries if q.edit_type == t] for t in EDIT_TYPES}
    assert all(by_type.values()), {t: len(v) for t, v in by_type.items()}
    for q in test_queries:
        scenes, cur = [], q.reference
        for e in q.edits:
            cur = apply_edit(cur, e)
            scenes.append(cur)
        assert cur == q.target
        _assert_no_undo(q.reference, q.edits, scenes)
        if q.edit_type == "long":
            assert 2 <= len(q.sentences) <= MAX_SENTENCES
            assert len(q.sentences) == len(q.edits)
        else:
            assert len(q.sentences) == 1
            assert len(q.edits) == (2 if q.edit_type == "two" else 1)
        if q.edit_type in TYPE_OPS:
            assert {e.op for e in q.edits} <= set(TYPE_OPS[q.edit_type])
        assert q.text == " ".join(q.sentences)
        if q.edit_type != "short":
            assert all(s[0].isupper() and s.endswith(".") for s in q.sentences)
    assert max(len(q.sentences) for q in by_type["long"]) > 4


def test_edit_texts_never_name_the_character(test_queries):
    assert NAME_RE.search("Ada stands on the left")  # the pattern works
    rng = random.Random(0)
    for scene in (ONE, THREE):
        for e in possible_edits(scene):
            for short in (False, True):
                t = edit_text(e, rng, short=short)
                assert t and not NAME_RE.search(t), t
    for q in test_queries:
        assert not NAME_RE.search(q.text), q.text


# --- splits --------------------------------------------------------------------------------------

def test_train_stream_holds_no_held_out_combination():
    stream = query_stream(seed=0)
    held_out_words = [f"{c} {s}" for s, c in spec.HELD_OUT_OBJECTS]
    for _ in range(90):
        q = next(stream)
        assert not q.novel
        assert not q.reference.is_novel() and not q.target.is_novel()
        cur = q.reference
        for e in q.edits:  # intermediate scenes are spelled out in the text, so they count too
            cur = apply_edit(cur, e)
            assert not cur.is_novel(), q.text
        for text in (q.target_caption, q.ref_caption) + q.negatives:
            assert not any(w in text for w in held_out_words), text
    a, b = query_stream(seed=5), query_stream(seed=5)
    assert [next(a) for _ in range(6)] == [next(b) for _ in range(6)]
    assert next(query_stream(seed=6)).text != next(query_stream(seed=5)).text


def test_sample_scene_respects_allow_novel():
    rng = random.Random(1)
    assert not any(sample_scene(rng, allow_novel=False).is_novel() for _ in range(300))
    assert any(sample_scene(rng).is_novel() for _ in range(300))
    with pytest.raises(ValueError):
        sample_query(rng, "poem")


def test_held_out_rules():
    assert len(spec.HELD_OUT_CHAR_BG) == spec.N_IDENTITIES  # one background per identity
    assert {i for i, _ in spec.HELD_OUT_CHAR_BG} == set(range(spec.N_IDENTITIES))
    assert _scene(ONE.objects, identity=2, bg=spec.BACKGROUNDS[2]).is_novel()
    assert not _scene(ONE.objects, identity=2, bg=spec.BACKGROUNDS[3]).is_novel()
    assert _scene([Obj("star", "purple", "small", "left")], bg="city", identity=0).is_novel()


def test_eval_splits_are_fixed_and_distinct(test_queries):
    assert any(q.novel for q in test_queries)
    assert not all(q.novel for q in test_queries)
    for q in test_queries:
        assert q.novel == (q.reference.is_novel() or q.target.is_novel())
    assert make_queries("test", 300) == test_queries
    assert [q.query_id for q in test_queries[:2]] == ["test-00000", "test-00001"]
    val = make_queries("val", 50)
    assert [q.text for q in val] != [q.text for q in test_queries[:50]]
    assert {q.reference.key() for q in val} != {q.reference.key() for q in test_queries[:50]}
    reseeded = make_queries("test", 50, seed=1)
    assert [q.text for q in reseeded] != [q.text for q in test_queries[:50]]
    with pytest.raises(ValueError):
        make_queries("train", 10)


def test_target_captions_and_negatives(test_queries):
    nameless = [q for q in test_queries
                if not re.search(rf"\b{q.target.character.name}\b", q.target_caption)]
    assert len(nameless) > 0.4 * len(test_queries), len(nameless)
    assert len(nameless) < len(test_queries)  # some captions do name the character
    for q in test_queries:
        assert q.negatives, q.query_id
        assert q.target_caption not in q.negatives
        assert len(set(q.negatives)) == len(q.negatives)
        if any(e.op.startswith("char_") for e in q.edits):  # a character edit is described
            assert re.search(r"facing (left|right)", q.target_caption), q.target_caption
    # a caption never names anyone but the scene's own character
    for q in test_queries:
        names = set(NAME_RE.findall(q.target_caption)) | set(NAME_RE.findall(q.ref_caption))
        assert names <= {q.target.character.name}


# --- benchmark -----------------------------------------------------------------------------------

def test_benchmark_structure(bench):
    n = 60
    assert len(bench.queries) == n and len(bench.items) == 8 * n
    assert len({it.item_id for it in bench.items}) == len(bench.items)
    gts, oks = bench.gt_sets(), bench.edit_ok_sets()
    for q, r, t, sub, gt, ok in zip(bench.queries, bench.reference_idx, bench.target_idx,
                                   bench.subsets, gts, oks):
        ref_item, tgt_item = bench.items[r], bench.items[t]
        assert ref_item.scene == q.reference and ref_item.seed == q.ref_seed
        assert tgt_item.scene == q.target and tgt_item.seed == q.target_seed
        assert len(sub) == SUBSET_SIZE == 6 and len(set(sub)) == 6
        assert t in sub and r not in sub
        assert t in gt and r not in gt
        for g in gt:  # exact match: same scene, same character
            assert bench.items[g].scene.key() == q.target.key()
        assert gt <= ok and r not in ok
        ident = q.reference.character.identity
        others = [m for m in sub if bench.items[m].scene.character.identity != ident]
        assert len(others) >= 3
        for m in others:  # the edit done on another character: satisfies the edit, wrong identity
            assert m in ok and m not in gt
            assert bench.items[m].scene.key_without_identity() == q.target.key_without_identity()
        same_char_wrong = [m for m in sub if m != t and m not in ok
                           and bench.items[m].scene.character.identity == ident]
        assert same_char_wrong, q.query_id
        # the reference itself is among the distractors (re-rendered with another seed)
        assert any(bench.items[m].scene == q.reference and bench.items[m].seed != q.ref_seed
                   for m in sub)


def test_benchmark_is_deterministic(bench):
    again = build_benchmark("test", 60)
    assert again.items == bench.items
    assert again.subsets == bench.subsets
    assert again.reference_idx == bench.reference_idx and again.target_idx == bench.target_idx
    assert again.gt_sets() == bench.gt_sets()
    small = build_benchmark("test", 10, n_filler=3)
    assert len(small.items) == 7 * 10 + 3


def test_item_fingerprint(bench):
    it = bench.items[0]
    fp = it.fingerprint(64)
    assert fp == WorldItem("other-id", it.scene, it.seed).fingerprint(64)  # id is not content
    assert fp != it.fingerprint(128)
    assert fp != WorldItem(it.item_id, it.scene, it.seed + 1).fingerprint(64)
    assert fp != bench.items[1].fingerprint(64)
    assert re.fullmatch(r"[0-9a-f]{40}", fp)
    assert RENDER_VERSION >= 1


# --- serialisation -------------------------------------------------------------------------------

def test_scene_round_trip_and_validation():
    for s in (ONE, THREE, sample_scene(random.Random(9))):
        assert Scene.from_dict(s.to_dict()) == s
        assert Scene.from_dict(json.loads(json.dumps(s.to_dict()))) == s
    bad = THREE.to_dict()
    bad["objects"][1]["shape"] = bad["objects"][0]["shape"]  # duplicate shapes
    with pytest.raises((AssertionError, ValueError)):
        Scene.from_dict(bad)
    bad = THREE.to_dict()
    bad["objects"][1]["position"] = bad["objects"][0]["position"]  # two objects in one slot
    with pytest.raises((AssertionError, ValueError)):
        Scene.from_dict(bad)
    bad = ONE.to_dict()
    bad["objects"] = []
    with pytest.raises((AssertionError, ValueError)):
        Scene.from_dict(bad)
    bad = ONE.to_dict()
    bad["character"]["identity"] = 24
    with pytest.raises((AssertionError, ValueError)):
        Scene.from_dict(bad)


def test_showcase_queries_have_the_demo_edit_and_a_ground_truth():
    from cir_core.world import build_benchmark
    from cir_core.world.data import SHOWCASE_SENTENCES

    plain = build_benchmark("test", 20)
    b = build_benchmark("test", 20, showcase=3)
    assert [q.query_id for q in b.queries[:3]] == ["demo-00", "demo-01", "demo-02"]
    assert [q.query_id for q in b.queries[3:]] == [q.query_id for q in plain.queries]
    for q, gt in zip(b.queries[:3], b.gt_sets()[:3]):
        assert q.sentences == SHOWCASE_SENTENCES and q.text == " ".join(SHOWCASE_SENTENCES)
        assert q.target.obj("square").colour == "blue" and q.target.character.position == "left"
        assert gt and all(b.items[i].scene.key() == q.target.key() for i in gt)
    # evaluation's benchmark is unchanged by the option's existence
    assert [it.seed for it in build_benchmark("test", 20).items] == [it.seed for it in plain.items]
