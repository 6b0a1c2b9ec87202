"""The film world (issue 25): films, stories, keyframes, boxes, edits, queries and ground truth."""
from __future__ import annotations

import random

import numpy as np
import pytest

from cir_core.world.films.benchmark import build_film_benchmark, film_items, split_films
from cir_core.world.films.film import make_film
from cir_core.world.films.language import apply_film_edit, diff, film_edit_text
from cir_core.world.films.queries import FILM_TYPES, film_pairs, film_query_stream, make_film_queries
from cir_core.world.films.render import Keyframe, render_keyframe
from cir_core.world.films.spec import OTHER, Figure, Frame
from cir_core.world.language import Edit
from cir_core.world.spec import HELD_OUT_CHAR_BG, HELD_OUT_OBJECTS, NAMES, Obj


@pytest.fixture(scope="module")
def small():
    return build_film_benchmark("val", n_queries=40, n_films=3)


def test_films_are_deterministic_and_credit_at_most_ten():
    a, b = make_film("test", 7), make_film("test", 7)
    assert a == b and a.story.shots == b.story.shots
    assert make_film("test", 8).film_id != a.film_id
    for i in range(20):
        f = make_film("test", i)
        assert 1 <= len(f.cast) <= 10 and len({c.identity for c in f.cast}) == len(f.cast)
        assert f.film_id.startswith("tt") and len(f.film_id) == 9


def test_story_shots_change_one_thing_and_stay_valid():
    film = make_film("val", 0)
    shots = film.story.shots
    assert 300 <= len(shots) <= 360
    cast = {c.identity for c in film.cast} | set(film.extras)
    for prev, sh in zip(shots, shots[1:]):
        sh.state.validate()
        assert {f.who for f in sh.state.figures} <= cast
        assert sh.state.place in film.settings
        if prev.scene == sh.scene:
            assert sh.state.place == prev.state.place


def test_training_films_hold_no_held_out_combination():
    for i in range(12):
        for sh in make_film("train", i).story.shots:
            assert not sh.state.is_novel()
            assert all((w, sh.state.place) not in HELD_OUT_CHAR_BG for w in sh.state.credited())
            assert all((o.shape, o.colour) not in HELD_OUT_OBJECTS for o in sh.state.objects)


def test_evaluation_films_do_hold_some():
    assert any(sh.state.is_novel() for i in range(6) for sh in make_film("test", i).story.shots)


def test_keyframes_are_deterministic_and_differ_within_a_shot():
    film = make_film("test", 1)
    sh = film.story.shots[5]
    ks = [Keyframe(film.film_id, film.palette, sh.place_seed, sh.seed, sh.state, sh.index, i) for i in range(3)]
    a = np.asarray(ks[0].image(64))
    assert a.shape == (64, 64, 3)
    assert (a == np.asarray(ks[0].image(64))).all()
    assert not (a == np.asarray(ks[1].image(64))).all()  # the camera moved
    assert ks[0].fingerprint(64) != ks[1].fingerprint(64) != ks[0].fingerprint(128)


def test_boxes_follow_the_figures_and_fit_the_frame():
    film = make_film("test", 2)
    for sh in film.story.shots[:40]:
        k = Keyframe(film.film_id, film.palette, sh.place_seed, sh.seed, sh.state, sh.index, 1)
        img, boxes = render_keyframe(k, 128)
        assert boxes == k.boxes(128)  # the box-only path draws the same geometry
        assert [w for w, _ in boxes] == [f.who for f in sh.state.figures]
        xs = [(x1 + x2) / 2 for _, (x1, _, x2, _) in boxes]
        assert xs == sorted(xs)  # slots left to right
        for _, (x1, y1, x2, y2) in boxes:
            assert 0 <= x1 < x2 <= 128 and 0 <= y1 < y2 <= 128


def test_extras_never_look_like_actors():
    from cir_core.world.films.render import look

    actor_bodies = {look(w)[0] for w in range(len(NAMES))}
    for who in range(-1, -7, -1):
        body, hat = look(who)
        assert hat is None and body not in actor_bodies


def test_key_for_ignores_what_no_edit_says():
    a = Frame("beach", (Figure(3, "left", "right", "sitting"), Figure(-2, "right", "left")),
              (Obj("star", "red", "small", "center"),))
    b = Frame("beach", (Figure(3, "left", "right", "sitting"), Figure(-5, "right", "right", "arms up")),
              (Obj("star", "red", "small", "center"),))
    assert a.key_for(3) == b.key_for(3)  # another extra, in another pose: still "someone"
    c = Frame("beach", (Figure(3, "left", "right", "sitting"), Figure(7, "right", "left")), a.objects)
    assert c.key_for(3) != a.key_for(3)  # an actor beside them is part of the situation
    assert a.key_for(7) is None


def test_diff_applies_to_the_target():
    film = make_film("test", 3)
    shots = film.story.shots
    n = 0
    for p in (p for t in FILM_TYPES for p in film_pairs(film)[t][:30]):
        cur = shots[p.i].state
        rng = random.Random(0)
        for e in p.edits:
            film_edit_text(e, cur, p.who, rng)
            cur = apply_film_edit(cur, p.who, e)
        assert cur.key_for(p.who) == shots[p.j].state.key_for(p.who)
        assert shots[p.i].state.key_for(p.who) != shots[p.j].state.key_for(p.who)
        n += 1
    assert n > 100


def test_diff_names_company_and_refuses_a_missing_character():
    a = Frame("city", (Figure(1, "center", "left"),))
    b = Frame("city", (Figure(1, "center", "left"), Figure(4, "left", "right"), Figure(-1, "right", "left")))
    got = diff(a, b, 1)
    assert {(e.op, e.target, e.value) for e in got} == {("join", "left", 4), ("join", "right", OTHER)}
    texts = [film_edit_text(e, a, 1, random.Random(s)) for s, e in enumerate(got)]
    assert any(NAMES[4] in t for t in texts) and all(NAMES[1] not in t for t in texts)
    assert diff(a, b, 4) is None  # not in the reference
    assert [e.op for e in diff(b, a, 1)] == ["alone"]


def test_edit_that_does_not_fit_is_refused():
    a = Frame("city", (Figure(1, "center", "left"), Figure(2, "left", "left")))
    with pytest.raises(ValueError, match="taken"):
        apply_film_edit(a, 1, Edit("char_move", None, "left"))
    with pytest.raises(ValueError, match="no other figure"):
        apply_film_edit(a, 1, Edit("leave", "right"))


def test_edit_whose_value_or_target_is_of_the_wrong_kind_is_refused_by_name():
    """A number where a slot is read, an object where an actor is, no slot for a company op: a
    ValueError naming the op, from apply_film_edit and film_edit_text alike."""
    a = Frame("city", (Figure(1, "center", "left"),))
    for e, what in ((Edit("char_move", None, 3), "value is a word"),
                    (Edit("join", "left", Obj("star", "red", "small", "left")), "value is an actor"),
                    (Edit("leave", None), "names what it acts on")):
        with pytest.raises(ValueError, match=f"a {e.op!r} edit.*{what}"):
            apply_film_edit(a, 1, e)
        with pytest.raises(ValueError, match=f"a {e.op!r} edit.*{what}"):
            film_edit_text(e, a, 1, random.Random(0))


def test_a_world_scene_is_drawn_with_its_seed_only():
    from cir_core.world.films.stream import render_item
    from cir_core.world.spec import sample_scene

    scene = sample_scene(random.Random(0))
    assert render_item(scene, 32, 5).size == (32, 32)
    with pytest.raises(ValueError, match="render seed"):
        render_item(scene, 32)


def test_queries_have_ground_truth_and_the_mix(small):
    qs = small.queries
    assert len(qs) == 40 and len({q.query_id for q in qs}) == 40
    assert {q.edit_type for q in qs} <= set(FILM_TYPES)
    gts, oks = small.gt_sets(), small.edit_ok_sets()
    for q, ref, tgt, gt, ok in zip(qs, small.reference_idx, small.target_idx, gts, oks):
        assert tgt in gt and ref not in gt and gt <= ok
        assert len(gt) >= 3  # the target shot's three keyframes at least
        assert small.items[ref].keyframe.state.credited() == [q.character]
        assert NAMES[q.character] not in q.text
        for r in gt:
            assert small.items[r].keyframe.state.key_for(q.character) == q.target_key


def test_subsets_hold_the_target_and_hard_non_answers(small):
    gts = small.gt_sets()
    for sub, tgt, ref, gt in zip(small.subsets, small.target_idx, small.reference_idx, gts):
        assert len(sub) == 6 and tgt in sub and ref not in sub
        assert not ({r for r in sub if r >= 0} - {tgt}) & gt


def test_queries_are_deterministic():
    films = split_films("val", 2)
    a = make_film_queries("val", films, 10)
    b = make_film_queries("val", split_films("val", 2), 10)
    assert [(q.text, q.target_key, q.reference) for q in a] == [(q.text, q.target_key, q.reference) for q in b]


def test_training_stream_is_free_of_held_out_combinations():
    stream = film_query_stream(0)
    for _ in range(60):
        q = next(stream)
        assert not q.novel and q.film.split == "train"


def test_gallery_ids_are_movienet_keyframe_names(small):
    it = small.items[4]
    assert it.item_id == f"{it.keyframe.film_id}/shot_{it.keyframe.shot:04d}_img_{it.keyframe.img}"
    assert len(film_items(small.films)) == len(small.items) == 3 * sum(len(f.story.shots) for f in small.films)


def test_boxes_hold_their_figures_pixels():
    """Independently of the box arithmetic: an actor's body colour is inside its box, at the
    height of its body (a film with the natural grade, standing figures, 256 px)."""
    from cir_core.world.films.render import look

    film = next(make_film("test", i) for i in range(40) if make_film("test", i).palette == "natural")
    checked = 0
    for sh in film.story.shots[:80]:
        k = Keyframe(film.film_id, film.palette, sh.place_seed, sh.seed, sh.state, sh.index, 0)
        img, boxes = render_keyframe(k, 256)
        px = np.asarray(img).astype(int)
        for f, (_, (x1, y1, x2, y2)) in zip(sh.state.figures, boxes):
            if f.pose != "standing" or not f.credited or x1 == 0 or x2 == 256:
                continue
            body = np.array(look(f.who)[0])
            row = px[int(y2 - 0.36 * (y2 - y1)), x1:x2]  # through the body
            assert (np.abs(row - body).sum(1) < 30).sum() >= 3, (sh.index, f)
            checked += 1
    assert checked > 20
