"""Film keyframes in the backbone's batches (`film_fraction` of each batch; issue 25).

The world's scenes show one figure; film keyframes show up to three, actors and extras, sitting,
standing or with their arms up. Measured on the shipped backbone before any film training
(`python -m studies.probe_backbone --films`): pose, company and a companion's identity at
chance, so the backbone learns from film keyframes too. Half of the film part is pairs — a shot
and the next one of its story (one change), the shot with one actor swapped for another (same
camera), or (`pose_pairs` of them) with one figure in another pose — so captions differ in one
thing; the rest are single keyframes. Keyframes come from
the training films (no held-out combination). Every image, world or film, also gets per-slot
labels (who stands there, their pose and facing) for the attribute heads.
"""
from __future__ import annotations

import random
from dataclasses import replace

from cir_core.world.films.film import make_film
from cir_core.world.films.language import frame_caption
from cir_core.world.films.queries import keyframe
from cir_core.world.films.render import Keyframe
from cir_core.world.films.spec import POSES, Frame
from cir_core.world.spec import FACINGS, HELD_OUT_CHAR_BG, N_IDENTITIES, POSITIONS, Scene

EXTRA, EMPTY = N_IDENTITIES, N_IDENTITIES + 1
# Per slot: who (an actor, an extra, nobody), their pose and facing (or nobody).
SLOT_HEADS = {**{f"{s}_who": N_IDENTITIES + 2 for s in POSITIONS},
              **{f"{s}_pose": len(POSES) + 1 for s in POSITIONS},
              **{f"{s}_facing": len(FACINGS) + 1 for s in POSITIONS}}
TRAIN_FILMS = 100_000  # training films are drawn from this many


def slot_labels(x: Scene | Frame, said: bool = True) -> list[int]:
    """SLOT_HEADS' classes for a world scene (its one figure stands) or a film frame; -100
    (ignored) everywhere when the caption is not `said` in full."""
    if not said:
        return [-100] * len(SLOT_HEADS)
    if isinstance(x, Scene):
        c = x.character
        figs = {c.position: (c.identity, "standing", c.facing)}
    else:
        figs = {f.slot: (f.who if f.who >= 0 else EXTRA, f.pose, f.facing) for f in x.figures}
    who = [figs[s][0] if s in figs else EMPTY for s in POSITIONS]
    pose = [POSES.index(figs[s][1]) if s in figs else len(POSES) for s in POSITIONS]
    facing = [FACINGS.index(figs[s][2]) if s in figs else len(FACINGS) for s in POSITIONS]
    return who + pose + facing


def caption_mode(rng: random.Random) -> dict[str, bool]:
    """80 % everything; 10 % the first actor unnamed; 10 % without place or props."""
    r = rng.random()
    if r < 0.8:
        return {"name": True, "background": True, "props": True}
    if r < 0.9:
        return {"name": False, "background": True, "props": True}
    return {"name": True, "background": rng.random() < 0.5, "props": rng.random() < 0.5}


def _swap(k: Keyframe, rng: random.Random) -> Keyframe | None:
    """`k` with one actor replaced by another actor not in the frame (same camera)."""
    actors = [f for f in k.state.figures if f.credited]
    if not actors:
        return None
    a = rng.choice(actors)
    present = {f.who for f in k.state.figures}
    others = [w for w in range(N_IDENTITIES) if w not in present and (w, k.state.place) not in HELD_OUT_CHAR_BG]
    if not others:
        return None
    figs = [replace(f, who=rng.choice(others)) if f is a else f for f in k.state.figures]
    return replace(k, state=k.state.with_figures(figs))


def _pose_swap(k: Keyframe, rng: random.Random) -> Keyframe:
    """`k` with one figure in another pose (same camera): captions that differ in the pose alone."""
    f = rng.choice(k.state.figures)
    other = replace(f, pose=rng.choice([p for p in POSES if p != f.pose]))
    return replace(k, state=k.state.with_figures([other if x is f else x for x in k.state.figures]))


def film_part(n: int, pair_fraction: float, rng: random.Random, pose_pairs: float = 0.0) -> list[Keyframe]:
    """`n` training keyframes: pairs (a shot and the next, an actor swap, or with `pose_pairs`
    of them a pose swap), then singles."""
    out: list[Keyframe] = []
    while len(out) < n:
        film = make_film("train", rng.randrange(TRAIN_FILMS))
        shots = film.story.shots
        for _ in range(min(8, n - len(out))):
            i = rng.randrange(len(shots))
            k = keyframe(film, i, rng.randrange(3))
            if len(out) + 2 <= int(n * pair_fraction):
                if pose_pairs and rng.random() < pose_pairs:
                    other = _pose_swap(k, rng)
                elif rng.random() < 0.5 and i + 1 < len(shots) and shots[i + 1].scene == shots[i].scene:
                    other = keyframe(film, i + 1, rng.randrange(3))
                else:
                    other = _swap(k, rng)
                if other is not None:
                    out += [k, other]
                    continue
            out.append(k)
    return out[:n]


def film_caption(k: Keyframe, seed: int) -> tuple[str, dict[str, bool]]:
    """A training caption of `k` and what it says (its RNG replayed from `seed`)."""
    rng = random.Random(seed)
    mode = caption_mode(rng)
    return frame_caption(k.state, rng, **mode), mode


def frame_key(k: Keyframe) -> tuple:
    """Equal for two keyframes any caption describes alike (extras are only "someone")."""
    s = k.state
    return ("film", s.place, tuple((f.slot, f.kind, f.facing, f.pose) for f in s.figures),
            tuple(s.objects))
