"""The world as a MovieNet identity set (`gallery.jsonl`, `queries.jsonl`: the format
`cir_core.benchmarks.movienet` reads and its set builder writes); the characters are the world's
character names. Not yet in `cir_core.formats` with the other formats: its reader lives with the
MovieNet set builder in `cir_core.benchmarks.movienet`."""
from __future__ import annotations

from functools import partial
from typing import Any

from cir_core.formats import Folder

from ..benchmark import WorldBenchmark


def export_movienet(bench: WorldBenchmark, out: Folder, split: str) -> dict[str, Any]:
    film = f"world-{split}"
    frames = [f"frames/{film}/shot_{j:06d}_img_0.jpg" for j in range(len(bench.items))]
    out.items.update({f: it.item_id for f, it in zip(frames, bench.items)})
    out.jsonl("gallery.jsonl", ({"frame": f, "film_id": film, "character_ids": [it.scene.character.name]}
                                for f, it in zip(frames, bench.items)))
    rows = []
    for i, q in enumerate(bench.queries):
        ref = bench.reference_idx[i]
        rows.append({"query_id": q.query_id, "reference_frame": frames[ref], "edit": q.text, "film_id": film,
                     "character_id": bench.items[ref].scene.character.name})
        out.queries[q.query_id] = q.query_id
    out.jsonl("queries.jsonl", rows)
    out.images([(f, partial(it.image, out.size)) for f, it in zip(frames, bench.items)], "movienet")
    return {"split_name": split, "queries": len(rows), "gallery": len(frames)}
