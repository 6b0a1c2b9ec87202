"""What a backbone sees of film keyframes: text→image retrieval and zero-shot attribute probes on
the val films (never trained on): the backbone trainer's film validation (`film_fraction` > 0)
and `python -m studies.probe_backbone --films`.

One keyframe (the middle one) of `n` shots of distinct situations, captioned with every actor
named (`frame_caption`). A probe asks the keyframe to pick its caption among the same caption
with one thing changed, identical phrasing: the first actor's pose, facing, slot or identity
(another actor), the company (someone joins a free slot, or a companion leaves), a companion
actor's identity, the place, a prop's colour.
"""
from __future__ import annotations

import random
from dataclasses import replace

import numpy as np

from cir_core.world.films.benchmark import split_films
from cir_core.world.films.language import frame_caption
from cir_core.world.films.queries import keyframe
from cir_core.world.films.spec import POSES, Figure, Frame
from cir_core.world.spec import BACKGROUNDS, COLOURS, FACINGS, N_IDENTITIES

FILM_PROBES = ("pose", "facing", "slot", "identity", "company", "companion", "place", "prop_colour")


def probe_frames(n: int, films: int = 24) -> list:
    """`n` val keyframes of distinct situations (film order, every other shot), each with an actor."""
    seen, out = set(), []
    for film in split_films("val", films):
        for sh in film.story.shots[::2]:
            if sh.state.credited() and repr(sh.state.to_list()) not in seen:
                seen.add(repr(sh.state.to_list()))
                out.append(keyframe(film, sh.index, 1))
    random.Random("film-probe").shuffle(out)
    return out[:n]


def alternatives(f: Frame) -> dict[str, list[Frame]]:
    """Per probe, `f` with that one thing changed to every other value."""
    a = next(x for x in f.figures if x.credited)
    figs = list(f.figures)
    i = figs.index(a)

    def swap(new: Figure) -> Frame:
        return f.with_figures(figs[:i] + [new] + figs[i + 1:])

    present = {x.who for x in figs}
    out = {"pose": [swap(replace(a, pose=p)) for p in POSES if p != a.pose],
           "facing": [swap(replace(a, facing=d)) for d in FACINGS if d != a.facing],
           "slot": [swap(replace(a, slot=s)) for s in f.free_slots()],
           "identity": [swap(replace(a, who=w)) for w in range(N_IDENTITIES) if w not in present],
           "company": ([f.with_figures(figs + [Figure(-1, s, "left")]) for s in f.free_slots()]
                       + [f.with_figures([x for x in figs if x is not c]) for c in figs if c is not a]),
           "place": [replace(f, place=b) for b in BACKGROUNDS if b != f.place]}
    mates = [x for x in figs if x.credited and x is not a]
    out["companion"] = [f.with_figures([replace(x, who=w) if x is mates[0] else x for x in figs])
                        for w in range(N_IDENTITIES) if w not in present] if mates else []
    out["prop_colour"] = ([f.with_objects([replace(f.objects[0], colour=c)] + list(f.objects[1:]))
                           for c in COLOURS if c != f.objects[0].colour] if f.objects else [])
    return out


def probe_caption(state: Frame, i: int) -> str:
    """Probe frame i's caption of `state`: one phrasing per frame, so its alternatives differ in
    the changed thing alone."""
    return frame_caption(state, random.Random(f"film-probe:{i}"))


def film_probe(enc, image_size: int, n: int = 600, probe_n: int = 200) -> dict[str, float]:
    """Text→image R@1/R@5 over `n` val keyframes and the probes on the first `probe_n` of them
    (`enc`: `training.backbone_val.Encoder`); values rounded to 4 digits."""
    frames = probe_frames(n)
    img = enc.images([k.image(image_size) for k in frames])
    caps = [probe_caption(k.state, i) for i, k in enumerate(frames)]
    txt = enc.texts(caps)
    sims = (txt @ img.T).numpy()
    ranks = (sims > np.diag(sims)[:, None]).sum(1)
    out = {"films_t2i_R@1": float((ranks < 1).mean()), "films_t2i_R@5": float((ranks < 5).mean())}
    texts, spans = [], []
    for i, k in enumerate(frames[:probe_n]):
        for name, alts in alternatives(k.state).items():
            if alts:
                start = len(texts)
                texts += [probe_caption(x, i) for x in [k.state] + alts]
                spans.append((name, i, start, len(texts)))
    ptxt = enc.texts(texts)
    hits: dict[str, list[float]] = {p: [] for p in FILM_PROBES}
    for name, i, a, b in spans:
        hits[name].append(float((ptxt[a:b] @ img[i]).argmax().item() == 0))
    out.update({f"films_probe_{k}": float(np.mean(v)) for k, v in hits.items() if v})
    return {k: round(v, 4) for k, v in out.items()}


__all__ = ["FILM_PROBES", "alternatives", "film_probe", "probe_caption", "probe_frames"]
