"""The trainers' world stream: the world's queries and the films' queries, interleaved.

`training_queries(seed, film_share)` yields a film query (`film_query_stream`) for `film_share`
of the positions, spread evenly (0.5: every other one), and a world query (`query_stream`)
elsewhere; both streams keep their own order, so the world's part is the same queries as before.
`query_images` / `query_keys` render and key a query of either kind.
"""
from __future__ import annotations

from typing import Any, Iterator

from PIL import Image

from ..data import EDIT_TYPES, query_stream
from ..render import render
from ..spec import Scene
from .queries import FILM_TYPES, FilmQuery, film_query_stream
from .render import Keyframe

FILM_SHARE = 0.5  # of the trainers' stream (issue 25)
# Every query type of the stream: the world's six, then the films' own.
TRAIN_TYPES = EDIT_TYPES + tuple(t for t in FILM_TYPES if t not in EDIT_TYPES)


def training_queries(seed: int = 0, film_share: float = FILM_SHARE) -> Iterator[Any]:
    """Endless training queries, world and film, deterministic in (seed, film_share)."""
    if not 0.0 <= film_share <= 1.0:
        raise ValueError(f"film_share must be in [0, 1], got {film_share}")
    world, films = query_stream(seed), film_query_stream(seed)
    acc = 0.0
    while True:
        acc += film_share
        if acc >= 1.0 - 1e-9:
            acc -= 1.0
            yield next(films)
        else:
            yield next(world)


def query_sources(q: Any) -> tuple[tuple[Any, int | None], tuple[Any, int | None]]:
    """((reference, seed), (target, seed)) of a world query (scenes and render seeds) or a film
    query (keyframes, which carry their own seeds): small, picklable, `render_item` draws them."""
    if isinstance(q, FilmQuery):
        return (q.reference, None), (q.target, None)
    return (q.reference, q.ref_seed), (q.target, q.target_seed)


def render_item(x: Scene | Keyframe, size: int, seed: int | None = None) -> Image.Image:
    """A world scene (with its render seed) or a film keyframe at `size`."""
    if isinstance(x, Keyframe):
        return x.image(size)
    if seed is None:
        raise ValueError("a world scene is drawn with its render seed: none was given")
    return render(x, size, seed)


def query_images(q: Any, size: int) -> tuple[Image.Image, Image.Image]:
    """(reference, target) images of a world or a film query at `size`."""
    (r, rs), (t, ts) = query_sources(q)
    return render_item(r, size, rs), render_item(t, size, ts)


def query_keys(q: Any) -> tuple[tuple, tuple]:
    """(reference, target) ground-truth keys: equal keys, the same answer to a query."""
    if isinstance(q, FilmQuery):
        return q.ref_key, q.tgt_key
    return q.reference.key(), q.target.key()
