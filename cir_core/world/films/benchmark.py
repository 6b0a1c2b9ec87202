"""The film benchmark: every keyframe of a split's films as the gallery, queries with their
ground-truth sets, and a CIRR-style subset of six per query.

`build_film_benchmark("test")` is 104 films and ~103k keyframes (PACT's qualitative MovieNet
gallery is 100,000 frames of 104 films), 1000 queries; "val" is 24 other films, 500 queries.
Ground truth of a query about actor A with target key K (`Frame.key_for`): every keyframe that
shows A with key K (`gt_sets`), the reference itself excluded; `edit_ok_sets`: every keyframe where
*some* actor stands in A's place with key K (the edit satisfied, whoever it is); `identities`: the
actors on each keyframe. The subset: the target (the target shot's middle keyframe) and five hard
distractors, none of them a ground truth: another keyframe of the reference's shot, the shots just
before and after the target, a keyframe satisfying the edit with another actor, other keyframes of
A in the film (in that order of preference).
"""
from __future__ import annotations

import contextlib
import gc
import random
from dataclasses import dataclass
from functools import cached_property

from PIL import Image

from .film import Film, make_film
from .queries import TARGET_IMG, FilmQuery, make_film_queries
from .render import Keyframe

SPLIT_FILMS = {"test": 104, "val": 24}
SPLIT_QUERIES = {"test": 1000, "val": 500}
SUBSET_SIZE = 6


@dataclass(frozen=True)
class FilmItem:
    item_id: str  # "<film_id>/shot_<4 digits>_img_<i>", MovieNet's keyframe name
    keyframe: Keyframe
    film: int  # index into FilmBenchmark.films
    shot_spec: str = ""  # keyframe.shot_spec(), shared by the shot's three keyframes

    def fingerprint(self, size: int) -> str:
        return self.keyframe.fingerprint(size, self.shot_spec or None)

    def image(self, size: int = 64) -> Image.Image:
        return self.keyframe.image(size)


@contextlib.contextmanager
def no_gc():
    """The cyclic garbage collector paused: building ~100k small objects (none in a cycle) made
    it rescan the growing heap, two thirds of a 103k-keyframe gallery's build time (measured)."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


def film_items(films: list[Film]) -> list[FilmItem]:
    """Every keyframe of every shot of `films`, film by film, shot by shot."""
    with no_gc():
        return _film_items(films)


def _film_items(films: list[Film]) -> list[FilmItem]:
    out = []
    for fi, film in enumerate(films):
        for sh in film.story.shots:
            ks = [Keyframe(film.film_id, film.palette, sh.place_seed, sh.seed, sh.state, sh.index, img)
                  for img in range(3)]
            spec = ks[0].shot_spec()
            out += [FilmItem(f"{film.film_id}/shot_{sh.index:04d}_img_{k.img}", k, fi, spec) for k in ks]
    return out


@dataclass
class FilmBenchmark:
    domain = "films"  # what the app's hints speak of (`cir_core.engine.GalleryView.domain`)
    split: str
    films: list[Film]
    items: list[FilmItem]
    queries: list[FilmQuery]

    @cached_property
    def _row(self) -> dict[tuple[str, int, int], int]:
        return {(it.keyframe.film_id, it.keyframe.shot, it.keyframe.img): r for r, it in enumerate(self.items)}

    def row(self, k: Keyframe) -> int:
        return self._row[(k.film_id, k.shot, k.img)]

    @cached_property
    def reference_idx(self) -> list[int]:
        return [self.row(q.reference) for q in self.queries]

    @cached_property
    def target_idx(self) -> list[int]:
        return [self.row(q.target) for q in self.queries]

    @cached_property
    def _by_key(self) -> dict[tuple, list[tuple[int, int]]]:
        """key -> [(row, actor)] over every credited figure of every keyframe."""
        idx: dict[tuple, list[tuple[int, int]]] = {}
        for r, it in enumerate(self.items):
            for who, key in it.keyframe.state.keys().items():
                idx.setdefault(key, []).append((r, who))
        return idx

    def character_name(self, qi: int) -> str:
        """The name of the actor query `qi` follows (the gallery's `character_ids` hold names)."""
        from ..spec import NAMES

        return NAMES[self.queries[qi].character]

    def gt_sets(self) -> list[set[int]]:
        """Every keyframe showing the query's actor in the target's situation (reference excluded)."""
        return [{r for r, w in self._by_key[q.target_key] if w == q.character} - {ref}
                for q, ref in zip(self.queries, self.reference_idx)]

    def edit_ok_sets(self) -> list[set[int]]:
        """Every keyframe where some actor stands where the target has the query's actor."""
        return [{r for r, _ in self._by_key[q.target_key]} - {ref} for q, ref in zip(self.queries, self.reference_idx)]

    def identities(self) -> list[frozenset[int]]:
        return [frozenset(it.keyframe.state.credited()) for it in self.items]

    @cached_property
    def subsets(self) -> list[list[int]]:
        gts = self.gt_sets()
        ok = self.edit_ok_sets()
        rng = random.Random(f"film-subsets:{self.split}:{len(self.queries)}")
        by_film_actor: dict[tuple[int, int], list[int]] = {}
        film_rows: dict[int, list[int]] = {}  # film -> [first row, last row + 1]
        for r, it in enumerate(self.items):
            for w in it.keyframe.state.credited():
                by_film_actor.setdefault((it.film, w), []).append(r)
            film_rows.setdefault(it.film, [r, r])[1] = r + 1
        out = []
        for q, ref, tgt, gt, eo in zip(self.queries, self.reference_idx, self.target_idx, gts, ok):
            fi = self.items[ref].film
            film = self.films[fi]

            def rows_of(shot: int, film: Film = film) -> list[int]:
                if not 0 <= shot < len(film.story.shots):
                    return []
                return [self._row[(film.film_id, shot, i)] for i in (TARGET_IMG, 0, 2)]

            mine = by_film_actor[(fi, q.character)]
            first, last = film_rows[fi]
            # (candidates, how many to take, must they show the character or satisfy the edit)
            prefs = [([r for r in rows_of(q.reference.shot) if r != ref], 1, True),
                     (rows_of(q.target.shot - 1), 1, True), (rows_of(q.target.shot + 1), 1, True),
                     (sorted(eo - gt), 1, False), (rng.sample(mine, min(len(mine), 12)), SUBSET_SIZE, True),
                     (rng.sample(range(first, last), min(last - first, 40)), SUBSET_SIZE, False)]
            sub = [tgt]
            for cands, take, must_show in prefs:
                took = 0
                for r in cands:
                    shows = not must_show or q.character in self.items[r].keyframe.state.credited() or r in eo
                    if took < take and len(sub) < SUBSET_SIZE and r not in sub and r not in gt and r != ref \
                            and shows:
                        sub.append(r)
                        took += 1
            sub += [-1] * (SUBSET_SIZE - len(sub))
            rng.shuffle(sub)
            out.append(sub)
        return out

    def gallery(self, size: int = 64):
        """The keyframes as a `cir_core.gallery.Gallery`, rendered on demand; named by split and
        number of films, so galleries of other film counts keep their own embedding caches."""
        return film_gallery_of(self.items, f"films-{self.split}-{len(self.films)}", size)


def film_gallery_of(items: list[FilmItem], name: str, size: int = 64):
    """`items` as a `cir_core.gallery.Gallery` rendered on demand (meta: film id, the actors' names)."""
    from cir_core.gallery import Gallery, GalleryItem

    from ..spec import NAMES

    with no_gc():
        gitems = [GalleryItem(it.item_id, None, {"fingerprint": it.fingerprint(size), "index": i,
                                                 "film_id": it.keyframe.film_id,
                                                 "character_ids": [NAMES[f.who] for f in it.keyframe.state.figures
                                                                   if f.who >= 0]})
                  for i, it in enumerate(items)]
        gallery = Gallery.from_items(name, gitems, lambda item, s: items[item.meta["index"]].image(s or size))
    return gallery


def film_gallery(split: str = "test", size: int = 64, n_films: int | None = None):
    """Every keyframe of `split`'s films as a gallery (no queries): the app's `--gallery world:films`."""
    with no_gc():
        films = split_films(split, n_films)
        for f in films:
            f.story  # noqa: B018  (told now, with the collector paused)
        return film_gallery_of(film_items(films), f"films-{split}-{len(films)}", size)


def split_films(split: str, n_films: int | None = None) -> list[Film]:
    if split not in SPLIT_FILMS:
        raise ValueError(f"film evaluation splits are {', '.join(SPLIT_FILMS)}, not {split!r}")
    return [make_film(split, i) for i in range(n_films or SPLIT_FILMS[split])]


def build_film_benchmark(split: str = "test", n_queries: int | None = None,
                         n_films: int | None = None, seed: int | None = None) -> FilmBenchmark:
    """The film benchmark of `split` ("test" or "val"): its films' keyframes and queries."""
    with no_gc():
        films = split_films(split, n_films)
        return FilmBenchmark(split, films, film_items(films),
                             make_film_queries(split, films, n_queries or SPLIT_QUERIES[split], seed))
