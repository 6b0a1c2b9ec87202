"""Plan the jobs (caption × edit type), skip what the output already holds, generate, dedup,
validate and append. Results are consumed in job order, so the file's order and which of two
duplicates survives do not depend on `workers`."""
from __future__ import annotations

import random
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Iterator

from cir_core.errors import InputError
from cir_core.formats.itt import EDIT_TYPES, dedup_key, make_id, validate_record

from .generators import FatalError, GenerationError
from .manifest import Source
from .store import Writer, scan_output


@dataclass(frozen=True)
class Job:
    id: str
    source: Source
    edit_type: str


def plan_jobs(sources: Iterable[Source], types: tuple[str, ...] = EDIT_TYPES,
              per_caption: int | None = None, seed: int = 0) -> list[Job]:
    """One job per (caption, edit type); with `per_caption` k, k of `types` per caption, drawn
    from (seed, image, caption) so the plan is the same on every run."""
    bad = [t for t in types if t not in EDIT_TYPES]
    if bad or not types:
        raise InputError(f"unknown edit type(s) {bad}; choose from {', '.join(EDIT_TYPES)}")
    k = len(types) if per_caption is None else per_caption
    if not 1 <= k <= len(types):
        raise InputError(f"--per-caption must be between 1 and {len(types)}, got {k}")
    jobs = []
    for s in sources:
        chosen = types if k == len(types) else random.Random(f"{seed}:{s.image_id}:{s.caption}").sample(types, k)
        jobs += [Job(make_id(s.image_id, s.caption, t), s, t) for t in chosen]
    return jobs


def _run_one(gen, job: Job) -> dict | Exception:
    try:
        return gen.generate(job.source.caption, job.edit_type, job.id)
    except GenerationError as exc:
        return exc


def _ordered(gen, jobs: list[Job], workers: int) -> Iterator[tuple[Job, dict | Exception]]:
    """(job, result) in job order, with up to `workers` calls in flight (and a short queue)."""
    if workers <= 1:
        for j in jobs:
            yield j, _run_one(gen, j)
        return
    with ThreadPoolExecutor(workers) as pool:
        window, it = [], iter(jobs)
        for j in it:
            window.append((j, pool.submit(_run_one, gen, j)))
            if len(window) >= 2 * workers:
                j0, fut = window.pop(0)
                yield j0, fut.result()
        for j0, fut in window:
            yield j0, fut.result()


def build(gen, sources: list[Source], out: str | Path, types: tuple[str, ...] = EDIT_TYPES,
          per_caption: int | None = None, seed: int = 0, limit: int | None = None, workers: int = 1,
          max_consecutive_failures: int | None = 20, progress: bool = True) -> dict:
    """Generate what `out` lacks; returns counts: planned, done_before, attempted, written,
    duplicates, failed, dropped_partial, and the commonest failure reasons."""
    from cir_core.progress import bar as progress_bar

    jobs = plan_jobs(sources, types, per_caption, seed)
    ex = scan_output(out)
    mine = (gen.info["mode"], gen.info["model"])
    others = ex.generators - {mine}
    if others:
        raise InputError(f"output {str(out)!r} holds records from {sorted(others)}; this run is {mine}. "
                         "Write to another --out (records from different generators are best kept apart)")
    pending = [j for j in jobs if j.id not in ex.ids]
    if limit is not None:
        pending = pending[:limit]
    stats = Counter(planned=len(jobs), done_before=len(jobs) - len([j for j in jobs if j.id not in ex.ids]),
                    attempted=len(pending), written=0, duplicates=0, failed=0)
    reasons: Counter = Counter()
    streak = 0
    writer = Writer(out)
    bar = progress_bar(total=len(pending), desc="ITT", unit="job", disable=not progress)
    try:
        for job, res in _ordered(gen, pending, workers):
            bar.update(1)
            if isinstance(res, Exception):
                stats["failed"] += 1
                reasons[str(res)[:160]] += 1
                streak += 1
                if max_consecutive_failures and streak >= max_consecutive_failures:
                    raise FatalError(f"{streak} jobs failed in a row, stopping (what was written is kept); "
                                     f"last: {res}")
                continue
            streak = 0
            s = job.source
            negs = [s.caption] + [n for n in res["negatives"] if n != s.caption]
            rec = {"id": job.id, "image": s.image, "image_id": s.image_id, "source_caption": s.caption,
                   "edit_type": job.edit_type, "edit": res["edit"], "target_caption": res["target_caption"],
                   "negatives": negs, "generator": gen.info}
            if res.get("ops"):
                rec["ops"] = res["ops"]
            try:
                validate_record(rec)
            except InputError as exc:
                stats["failed"] += 1
                reasons[f"invalid record: {exc}"[:160]] += 1
                continue
            key = dedup_key(s.image_id, rec["edit"])
            if key in ex.pairs:
                stats["duplicates"] += 1
                continue
            ex.pairs.add(key)
            writer.write(rec)
            stats["written"] += 1
            bar.set_postfix(written=stats["written"], failed=stats["failed"], dup=stats["duplicates"])
    finally:
        bar.close()
        writer.close()
    return {**stats, "dropped_partial": ex.dropped_partial, "failure_reasons": dict(reasons.most_common(5))}
