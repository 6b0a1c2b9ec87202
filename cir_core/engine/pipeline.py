"""One compare request in stages, each a function that returns what the next reads: check the
request, encode its texts (one batch), compose every method's query (and q_∅ under Chord, and
the progression), search (one `rank` over every query of the request), present (the hits with
their marks). `Engine.compare` runs them."""
from __future__ import annotations

import logging
from dataclasses import dataclass, replace
from typing import Sequence

import numpy as np

from .. import timing
from ..errors import CIRError, InputError
from ..inputs import check_edit_text
from ..memo import TextMemo
from ..methods import Method, method_label
from ..methods.refs import Refs
from ..search.scoring import Queries, ScoreOpts
from ..search.searcher import Ranking, RemoteSearcher, Searcher, rank
from ..text import split_sentences
from .common import MAX_K, MAX_STEPS
from .explain import MAP_TARGETS, Explained, FetchedRows, explain_hits, neighbourhood_map
from .gallery_view import GalleryView
from .method_set import MethodSet
from .results import CompareResult, Hit, MethodResult, NeighbourhoodMap, Progression, Reference, Step

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Request:
    """One checked compare request."""

    reference: Reference
    text: str
    sentences: tuple[str, ...]
    k: int
    opts: ScoreOpts
    names: tuple[str, ...]
    progression: tuple[str, Method, str] | None  # (name, method, why not a native one)
    refs: Refs  # what the methods compose from: v_r (1, D) and its raw feature norm

    @property
    def v_r(self) -> np.ndarray:
        return self.refs.emb


@dataclass(frozen=True)
class Job:
    """A set of queries ranked together: one method's query, or the progression's steps."""

    owner: MethodResult | Progression
    queries: np.ndarray  # (n, D)
    q_empty: np.ndarray | None  # (1, D); None under cosine, which does not read it
    lam: float | None  # the Chord λ (None: cosine)


def compare(view: GalleryView, methods: MethodSet, searcher: Searcher | RemoteSearcher, reference: Reference,
            edit: str, k: int = 8, scoring: str = "cosine", lam: float | None = None,
            names: Sequence[str] | None = None, progression: bool = True, variant: str = "empty",
            explained: bool = True) -> CompareResult:
    """Every method's top-k for (reference, edit), and the per-sentence progression.

    `lam`: Chord's λ for every method; None uses each method's own `chord_lambda`.
    Raises `InputError` for a bad edit / k / scoring; a method that fails gets `error` set.

    With `explained`, each method's hits say why they rank where they do (`Hit.why`: the cosine
    and Chord's λ·direction term, the rank under each scoring) and the result holds the map of
    the neighbourhood (`CompareResult.map`), `explain` below.

    Timings are this request's own work per stage; the time it waited behind other requests'
    work and spent in one-time builds (a method's first load, CIReVL's caption bank) is counted
    apart, as "wait" and "build", per method too (`cir_core.timing`)."""
    with timing.account():
        before = timing.charges()  # e.g. an upload's encode, charged by the caller's account
        t_start = timing.now()
        loads = load_methods(methods, names if names is not None else methods.default())
        req = make_request(view, methods, reference, edit, k, ScoreOpts(scoring, lam, variant), names, progression)
        with Stage() as enc:
            encode(req, methods.memo)
        with Stage() as comp:
            results, jobs, steps = compose(req, methods, loads)
            prog, prog_job = compose_progression(req, methods, steps)
        with Stage() as srch:
            query_id, targets = view.ground_truth(reference, req.text)
            jobs += [prog_job] if prog_job is not None else []
            ranking, search_ms = search(req, jobs, searcher)
            present(req, jobs, ranking, view, targets, query_id is not None, search_ms,
                    view.query_character(reference, req.text))
        with Stage() as why:
            nmap = explain(req, jobs, methods, view, searcher, prog_job, targets) if explained else None
        spent = timing.charges()
        timings = {"encode": reference.encode_ms + enc.own_ms, "compose": comp.own_ms, "search": srch.own_ms,
                   "explain": why.own_ms, "wait": spent.wait_s * 1000, "build": spent.build_s * 1000,
                   "total": reference.encode_ms + (before.total_s + timing.now() - t_start) * 1000}
    return CompareResult(reference, req.text, list(req.sentences), req.k, scoring, lam, variant, query_id,
                         sorted(targets), results, prog, {key: round(v, 2) for key, v in timings.items()},
                         text_notes(methods.memo, req), nmap)


class Stage:
    """A stage's own time: its wall time less what it waited for other requests and spent in
    one-time builds (`own_ms`, `spent` after the block)."""

    def __enter__(self) -> "Stage":
        self.t0, self.c0 = timing.now(), timing.charges()
        return self

    def __exit__(self, *exc: object) -> None:
        self.spent = timing.charges().since(self.c0)
        self.own_ms = max(0.0, timing.now() - self.t0 - self.spent.total_s) * 1000


def load_methods(methods: MethodSet, names: Sequence[str]) -> dict[str, timing.Charges]:
    """Build each method on its first use (a one-time build), each one's wait and build time
    kept for its column; a method that cannot load says why later, in its column."""
    out = {}
    for n in names:
        before = timing.charges()
        try:
            methods.get(n)
        except CIRError:
            pass
        out[n] = timing.charges().since(before)
    return out


def check_edit(edit: str | None) -> tuple[str, list[str]]:
    """(whitespace-collapsed text, sentences) or an `InputError` saying what is wrong with it.
    Sentences are split from the text as typed (blank lines and bullets end sentences)."""
    text = check_edit_text("" if edit is None else edit)
    sentences = split_sentences(edit or "")
    if not sentences:
        raise InputError("the edit has no words in it: type what should change, e.g. "
                         "'Make the square blue.'")
    return text, sentences


# -- stage 0: check ---------------------------------------------------------------------------------
def make_request(view: GalleryView, methods: MethodSet, reference: Reference, edit: str, k: int,
                 opts: ScoreOpts, names: Sequence[str] | None, progression: bool) -> Request:
    text, sentences = check_edit(edit)
    if not 1 <= int(k) <= MAX_K:
        raise InputError(f"k must be between 1 and {MAX_K}, got {k}")
    k = min(int(k), len(view) - (reference.row is not None))
    if k < 1:
        raise InputError("the gallery has nothing to retrieve besides the reference")
    names = tuple(names) if names is not None else tuple(methods.default())
    prog = progression_method(methods, names) if progression else None
    v_r = np.asarray(reference.embedding, np.float32)[None]
    norm = np.array([np.nan if reference.norm is None else reference.norm], np.float32)
    return Request(reference, text, tuple(sentences), k, opts, names, prog, Refs(v_r, norm))


def progression_method(methods: MethodSet, names: Sequence[str]) -> tuple[str, Method, str] | None:
    """(name, method, why-not-native note) for the progression: the first of `names` that has a
    native progression (its own step states) and loads, else the first that loads (its
    progression recomposes each prefix)."""
    loaded, why = [], "no method with a native per-sentence progression is available"
    for n in names:
        try:
            m = methods.get(n)
        except CIRError as exc:
            if why.startswith("no method"):
                why = str(exc)  # names the method and why it is missing
            continue
        if m.native_progression:
            return n, m, ""
        loaded.append((n, m))
    return (loaded[0][0], loaded[0][1], why) if loaded else None


def text_notes(memo: TextMemo, req: Request) -> list[str]:
    """A note when the whole edit is longer than the text tower's context: methods that encode
    it at once see its beginning only (never cut silently); per-sentence steps read it all."""
    n, ctx = memo.token_count(req.text), memo.context_length
    if n is None or n <= ctx:
        return []
    long = [s for s in req.sentences if (memo.token_count(s) or 0) > ctx]
    per_sentence = (f" {len(long)} of its sentences are longer than that on their own and are cut too." if long else
                    " Every sentence fits on its own: each step of a per-sentence progression reads its "
                    "sentence in full.")
    return [f"The edit is {n} tokens and the text tower reads {ctx} (its context): methods that encode "
            f"the whole text at once (PACT, compose-only, DiCE, the sum baseline, PACE's q₀) see only its "
            f"first {ctx - 2} "
            f"tokens.{per_sentence}"]


# -- stage 1: encode --------------------------------------------------------------------------------
def encode(req: Request, memo: TextMemo) -> list[str]:
    """Every text the frozen text tower will be asked for, in one batch (the reference was
    encoded already for an upload; a gallery item is a cache read); the texts asked for."""
    texts = [req.text, "", *req.sentences]
    if req.progression is not None and not req.progression[1].native_progression:
        texts += [" ".join(req.sentences[:i]) for i in range(1, min(len(req.sentences), MAX_STEPS) + 1)]
    texts = list(dict.fromkeys(texts))
    memo.prefetch(texts)
    return texts


# -- stage 2: compose -------------------------------------------------------------------------------
def compose(req: Request, methods: MethodSet, loads: dict[str, timing.Charges] | None = None,
            ) -> tuple[list[MethodResult], list[Job], list[np.ndarray] | None]:
    """(every method's result, the jobs to rank, the progression's steps when its method's column
    computed them); a method that fails keeps its error in its own column. `loads`: what each
    method's first load waited and built (`load_methods`), added to its own."""
    results, jobs, steps = [], [], None
    for name in req.names:
        res = MethodResult(name, method_label(name))
        results.append(res)
        load = (loads or {}).get(name, timing.Charges())
        res.wait_ms, res.build_ms = load.wait_s * 1000, load.build_s * 1000
        try:
            m = methods.get(name)
            with Stage() as own:
                q, q0, mine = _queries(name, m, req, methods)
            res.compose_ms = own.own_ms
            res.wait_ms += own.spent.wait_s * 1000
            res.build_ms += own.spent.build_s * 1000
        except CIRError as exc:
            res.error = str(exc)
            continue
        except Exception as exc:  # a bug in one method must leave the other columns working
            log.exception("method %s failed", name)
            res.error = f"{res.label} failed: {type(exc).__name__}: {exc}".splitlines()[0]
            continue
        steps = mine if mine is not None else steps
        res.lam = req.opts.lam_for(m)
        jobs.append(Job(res, q, q0, res.lam))
    return results, jobs, steps


def _queries(name: str, m: Method, req: Request,
             methods: MethodSet) -> tuple[np.ndarray, np.ndarray | None, list[np.ndarray] | None]:
    """(q, q_∅, the progression's steps if this is its method) with as few forwards as the method
    allows: q_∅ (Chord only) with q in one pass (`compose_pair`) when this reference's is not
    cached yet; the progression's method gives its steps with q (`compose_with_steps`)."""
    if req.progression is not None and req.progression[0] == name:
        q, steps = m.compose_with_steps(req.refs, req.text, req.sentences[:MAX_STEPS])
        return q, q_empty(name, m, req, methods), steps
    if req.opts.scoring == "chord" and methods.cached_q_empty(name, req.reference.key) is None:
        q, q0 = m.compose_pair(req.refs, req.text)
        methods.remember_q_empty(name, req.reference.key, q0)
        return q, q0, None
    return m.compose(req.refs, [req.text]), q_empty(name, m, req, methods), None


def q_empty(name: str, m: Method, req: Request, methods: MethodSet) -> np.ndarray | None:
    """q_∅ of method `name` for the request's reference, under Chord only (cosine does not read
    it): the cached one when a request saw this reference, else composed and kept."""
    if req.opts.scoring != "chord":
        return None
    q0 = methods.cached_q_empty(name, req.reference.key)
    if q0 is None:
        q0 = m.compose_empty(req.refs)
        methods.remember_q_empty(name, req.reference.key, q0)
    return q0


def compose_progression(req: Request, methods: MethodSet,
                        steps: list[np.ndarray] | None) -> tuple[Progression | None, Job | None]:
    """The progression (its method's own states, or one recomposed prefix per step, at most
    MAX_STEPS) and its job; `steps` when its method's column computed them already."""
    if req.progression is None:
        return None, None
    name, m, why = req.progression
    native = m.native_progression
    out = Progression(name, method_label(name), native,
                      progression_note(name, native, why, len(req.sentences)), [], len(req.sentences))
    try:
        steps = steps if steps is not None else m.progression(req.refs, req.sentences[:MAX_STEPS])
        job = Job(out, np.stack([np.asarray(x, np.float32) for x in steps]), q_empty(name, m, req, methods),
                  req.opts.lam_for(m))
        return out, job
    except CIRError as exc:
        out.note = str(exc)
    except Exception as exc:
        log.exception("progression of %s failed", name)
        out.note = f"progression failed: {type(exc).__name__}: {exc}"
    return out, None


def progression_note(name: str, native: bool, why: str, n_sentences: int) -> str:
    """What the progression rows show, in words (the app prints it above them)."""
    label = method_label(name)
    if native:
        note = (f"{label}'s own step queries: q₀ from the whole edit, then one step per sentence"
                + (f" ({why.rstrip('.')})" if why else ""))
    else:
        note = (f"{why.rstrip('.')}. This shows {label} recomposing sentences 1..k from scratch at "
                "each step (prefix re-composition, not an accumulator's own states)")
    if n_sentences > MAX_STEPS:
        note += f". Showing the first {MAX_STEPS} of {n_sentences} sentences"
    return note


# -- stage 3: search --------------------------------------------------------------------------------
def search(req: Request, jobs: list[Job], searcher: Searcher | RemoteSearcher) -> tuple[Ranking | None, float]:
    """Every query of the request ranked in one `rank` call, each with its own q_∅ and λ, the way
    the searcher searches this gallery; (ranking, its ms)."""
    if not jobs:
        return None, 0.0
    sizes = [len(j.queries) for j in jobs]
    chord = req.opts.scoring == "chord"
    q_empty = np.concatenate([np.repeat(_anchor(j), n, 0) for j, n in zip(jobs, sizes)]) if chord else None
    opts = req.opts.per_query(np.repeat([j.lam or 0.0 for j in jobs], sizes).tolist())
    exclude = np.full(sum(sizes), -1 if req.reference.row is None else req.reference.row)
    t = timing.now()
    got = rank(Queries(np.concatenate([j.queries for j in jobs]), q_empty, req.v_r), searcher, opts, req.k, exclude)
    return got, (timing.now() - t) * 1000


def _anchor(job: Job) -> np.ndarray:
    assert job.q_empty is not None, "under Chord every job carries its q_∅ (stage 2, compose)"
    return job.q_empty


# -- stage 4: present -------------------------------------------------------------------------------
def present(req: Request, jobs: list[Job], ranking: Ranking | None, view: GalleryView, targets: set[int],
            known_gt: bool, search_ms: float, follows: str | None = None) -> None:
    """Each job's hits, marked (target, the reference's character: `follows`, the one a film
    query is about, among a keyframe's cast), into its result."""
    if ranking is None:
        return
    share = search_ms / len(jobs)
    view.prefetch(np.unique(ranking.ids).tolist())  # a store's gallery: every hit's item in one read
    ref_char, pid, row = req.reference.character, req.reference.character_pid or follows, 0
    for job in jobs:
        n = len(job.queries)
        hits = [_hits(view, ranking.ids[i], ranking.scores[i], targets, known_gt, ref_char, pid)
                for i in range(row, row + n)]
        row += n
        if isinstance(job.owner, MethodResult):
            job.owner.search_ms, job.owner.hits = share, hits[0]
        else:
            job.owner.steps = [Step(i + 1, sent, h) for i, (sent, h) in enumerate(zip(req.sentences, hits))]


def _hits(view: GalleryView, ids: np.ndarray, scores: np.ndarray, targets: set[int], known_gt: bool,
          ref_char: str | None, pid: str | None = None) -> list[Hit]:
    """The hits of one ranking; "same character" is the reference's credited cast member among a
    MovieNet frame's cast (`pid`), else the character names compared."""
    out = []
    for r, (i, s) in enumerate(zip(ids.tolist(), scores.tolist()), 1):
        if i < 0:
            continue
        ch = view.character(i)
        same = view.shows(i, pid) if pid else None if ref_char is None or ch is None else ch == ref_char
        out.append(Hit(r, i, view.item_id(i), float(s), (i in targets) if known_gt else None, ch, same))
    return out


# -- stage 5: explain -------------------------------------------------------------------------------
def explain(req: Request, jobs: list[Job], methods: MethodSet, view: GalleryView, searcher: Searcher | RemoteSearcher,
            prog_job: Job | None, targets: set[int]) -> NeighbourhoodMap | None:
    """Each method's hits with their score terms and ranks under both scorings (`Hit.why`; under
    cosine too, with the λ Chord would give the method: its q_∅ is composed once per reference
    and kept), and the map of the neighbourhood."""
    chord = replace(req.opts, scoring="chord")
    items, queries = [], {}
    for job in jobs:
        res = job.owner
        if not isinstance(res, MethodResult):
            continue
        m = methods.get(res.name)
        q0 = job.q_empty if job.q_empty is not None else q_empty(res.name, m, replace(req, opts=chord), methods)
        lam = chord.lam_for(m)
        assert q0 is not None and lam is not None  # both are Chord's, and these options are Chord's
        items.append(Explained(res, job.queries, q0, float(lam)))
        queries[res.name] = job.queries
    results = [j.owner for j in jobs if isinstance(j.owner, MethodResult)]
    # every row the hits' terms and the map read, in one fetch (a vector store: one round trip)
    vectors = FetchedRows(searcher, [h.row for m in results for h in m.hits] + sorted(targets)[:MAP_TARGETS])
    explain_hits(items, req.reference, searcher, req.opts.variant, vectors)
    prog = prog_job.owner if prog_job is not None and isinstance(prog_job.owner, Progression) else None
    steps = prog_job.queries if prog_job is not None and prog is not None and prog.native else None
    return neighbourhood_map(req.reference, queries, results, prog, steps, sorted(targets), vectors)
