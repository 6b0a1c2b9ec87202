"""`Engine.compare`: one request in four stages — encode, compose, search, present — every
method's top-k with its marks, and the per-sentence progression."""
from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from typing import Sequence

import numpy as np

from ..errors import CIRError, InputError
from ..inputs import check_edit_text
from ..methods import Method, method_label
from ..scoring import ScoreOpts, rank
from ..text import split_sentences
from .common import MAX_K, MAX_STEPS
from .results import CompareResult, Hit, MethodResult, Progression, Reference, Step

log = logging.getLogger(__name__)


@dataclass
class Request:
    """One validated compare request and what its stages produce."""

    reference: Reference
    text: str
    sentences: list[str]
    k: int
    opts: ScoreOpts
    names: list[str]
    progression: tuple[str, Method, str] | None  # (name, method, why not a native one)
    v_r: np.ndarray  # (1, D)
    jobs: list["Job"] = field(default_factory=list)
    steps: list[np.ndarray] | None = None  # the progression, when its method's column computed it


@dataclass
class Job:
    """A set of queries ranked together: one method's query, or the progression's steps."""

    owner: MethodResult | Progression
    queries: np.ndarray  # (n, D)
    q_empty: np.ndarray | None  # (1, D); None under cosine, which does not read it
    lam: float | None  # the Chord λ (None: cosine)


class CompareMixin:
    """Mixed into `Engine`, whose `__init__` sets the state these methods read (`gallery`,
    `embeddings`, `index`, `text_memo`, the q_∅ cache); `method`, `item_id`, `character` and
    `ground_truth` come from it too."""

    @staticmethod
    def check_edit(edit: str | None) -> tuple[str, list[str]]:
        """(whitespace-collapsed text, sentences) or an `InputError` saying what is wrong with it.
        Sentences are split from the text as typed (blank lines and bullets end sentences)."""
        text = check_edit_text("" if edit is None else edit)
        sentences = split_sentences(edit or "")
        if not sentences:
            raise InputError("the edit has no words in it: type what should change, e.g. "
                             "'Make the square blue.'")
        return text, sentences

    def compare(self, reference: Reference, edit: str, k: int = 8, scoring: str = "cosine",
                lam: float | None = None, methods: Sequence[str] | None = None,
                progression: bool = True, variant: str = "empty") -> CompareResult:
        """Every method's top-k for (reference, edit), and the per-sentence progression.

        `lam`: Chord's λ for every method; None uses each method's own `chord_lambda`.
        Raises `InputError` for a bad edit / k / scoring; a method that fails gets `error` set.
        """
        t_start = time.perf_counter()
        req = self._request(reference, edit, k, ScoreOpts(scoring, lam, variant), methods, progression)
        t0 = time.perf_counter()
        self._encode(req)
        encode_ms = reference.encode_ms + (time.perf_counter() - t0) * 1000
        t0 = time.perf_counter()
        results = self._compose(req)
        prog = self._compose_progression(req)
        compose_ms = (time.perf_counter() - t0) * 1000
        t0 = time.perf_counter()
        query_id, targets = self.ground_truth(reference, req.text)
        self._search(req, targets, query_id is not None)
        search_ms = (time.perf_counter() - t0) * 1000
        timings = {"encode": encode_ms, "compose": compose_ms, "search": search_ms,
                   "total": reference.encode_ms + (time.perf_counter() - t_start) * 1000}
        return CompareResult(reference, req.text, req.sentences, req.k, scoring, lam, variant, query_id,
                             sorted(targets), results, prog, {key: round(v, 2) for key, v in timings.items()},
                             self.text_notes(req))

    def text_notes(self, req: Request) -> list[str]:
        """A note when the whole edit is longer than the text tower's context: methods that encode
        it at once see its beginning only (never cut silently); per-sentence steps read it all."""
        n, ctx = self.backbone.token_count(req.text), self.backbone.context_length
        if n is None or n <= ctx:
            return []
        long = [s for s in req.sentences if (self.backbone.token_count(s) or 0) > ctx]
        per_sentence = (f" {len(long)} of its sentences are longer than that on their own and are cut too." if long else
                        " Every sentence fits on its own: each step of a per-sentence progression reads its "
                        "sentence in full.")
        return [f"The edit is {n} tokens and the text tower reads {ctx} (its context): methods that encode "
                f"the whole text at once (PACT, compose-only, DiCE, the sum baseline, PACE's q₀) see only its "
                f"first {ctx - 2} "
                f"tokens.{per_sentence}"]

    # -- validation --------------------------------------------------------------------------------
    def _request(self, reference: Reference, edit: str, k: int, opts: ScoreOpts,
                 methods: Sequence[str] | None, progression: bool) -> Request:
        text, sentences = self.check_edit(edit)
        if not 1 <= int(k) <= MAX_K:
            raise InputError(f"k must be between 1 and {MAX_K}, got {k}")
        k = min(int(k), len(self.gallery) - (reference.row is not None))
        if k < 1:
            raise InputError("the gallery has nothing to retrieve besides the reference")
        names = list(methods) if methods is not None else self.default_methods()
        prog = self.progression_method(names) if progression else None
        v_r = np.asarray(reference.embedding, np.float32)[None]
        return Request(reference, text, sentences, k, opts, names, prog, v_r)

    def progression_method(self, names: Sequence[str]) -> tuple[str, Method, str] | None:
        """(name, method, why-not-native note) for the progression: the first of `names` that has
        a native progression (its own step states) and loads, else the first that loads (its
        progression recomposes each prefix)."""
        loaded, why = [], "no method with a native per-sentence progression is available"
        for n in names:
            try:
                m = self.method(n)
            except CIRError as exc:
                if why.startswith("no method"):
                    why = str(exc)  # names the method and why it is missing
                continue
            if m.native_progression:
                return n, m, ""
            loaded.append((n, m))
        return (loaded[0][0], loaded[0][1], why) if loaded else None

    # -- stage 1: encode ---------------------------------------------------------------------------
    def _encode(self, req: Request) -> None:
        """Every text the frozen text tower will be asked for, in one batch (the reference was
        encoded already for an upload; a gallery item is a cache read)."""
        texts = [req.text, "", *req.sentences]
        if req.progression is not None and not req.progression[1].native_progression:
            texts += [" ".join(req.sentences[:i]) for i in range(1, min(len(req.sentences), MAX_STEPS) + 1)]
        self.text_memo.prefetch(list(dict.fromkeys(texts)))

    # -- stage 2: compose --------------------------------------------------------------------------
    def _compose(self, req: Request) -> list[MethodResult]:
        """Every method's query and q_∅; a method that fails keeps its error in its own column."""
        results = []
        for name in req.names:
            res = MethodResult(name, method_label(name))
            results.append(res)
            try:
                m = self.method(name)
                t = time.perf_counter()
                q, q0 = self._queries(name, m, req)
                res.compose_ms = (time.perf_counter() - t) * 1000
            except CIRError as exc:
                res.error = str(exc)
                continue
            except Exception as exc:  # a bug in one method must leave the other columns working
                log.exception("method %s failed", name)
                res.error = f"{res.label} failed: {type(exc).__name__}: {exc}".splitlines()[0]
                continue
            res.lam = req.opts.lam_for(m)
            req.jobs.append(Job(res, q, q0, res.lam))
        return results

    def _queries(self, name: str, m: Method, req: Request) -> tuple[np.ndarray, np.ndarray | None]:
        """(q, q_∅) with as few forwards as the method allows: q_∅ (`_q_empty`, Chord only) with
        q in one pass (`compose_pair`) when this reference's is not cached yet. The progression's
        method gives its steps with q (`compose_with_steps`: PACE's q is its last state)."""
        if req.progression is not None and req.progression[0] == name:
            q, req.steps = m.compose_with_steps(req.v_r, req.text, req.sentences[:MAX_STEPS])
        elif req.opts.scoring == "chord" and self._cached_q_empty(name, req.reference) is None:
            q, q0 = m.compose_pair(req.v_r, req.text)
            self._remember_q_empty(name, req.reference, q0)
            return q, q0
        else:
            q = m.compose(req.v_r, [req.text])
        return q, self._q_empty(name, m, req)

    def _q_empty(self, name: str, m: Method, req: Request) -> np.ndarray | None:
        """q_∅ of method `name` for the request's reference, under Chord only (cosine does not
        read it): the cached one when a request saw this reference, else composed and kept."""
        if req.opts.scoring != "chord":
            return None
        q0 = self._cached_q_empty(name, req.reference)
        if q0 is None:
            q0 = m.compose_empty(req.v_r)
            self._remember_q_empty(name, req.reference, q0)
        return q0

    def _compose_progression(self, req: Request) -> Progression | None:
        """The progression's step queries (the method's own states, or one recomposed prefix per
        step), at most MAX_STEPS; computed with the method's column when it has one."""
        if req.progression is None:
            return None
        name, m, why = req.progression
        native = m.native_progression
        out = Progression(name, method_label(name), native,
                          progression_note(name, native, why, len(req.sentences)), [], len(req.sentences))
        try:
            steps = req.steps if req.steps is not None else m.progression(req.v_r[0], req.sentences[:MAX_STEPS])
            req.jobs.append(Job(out, np.stack([np.asarray(x, np.float32) for x in steps]),
                                self._q_empty(name, m, req), req.opts.lam_for(m)))
        except CIRError as exc:
            out.note = str(exc)
        except Exception as exc:
            log.exception("progression of %s failed", name)
            out.note = f"progression failed: {type(exc).__name__}: {exc}"
        return out

    def _cached_q_empty(self, name: str, reference: Reference) -> np.ndarray | None:
        """q_∅ of method `name` for this reference if a request computed it already: it depends on
        the reference only, so trying several edits on one reference computes it once."""
        if reference.key is None:
            return None
        with self._q_lock:
            q0 = self._q_empty_cache.get((name, reference.key))
            if q0 is not None:
                self._q_empty_cache.move_to_end((name, reference.key))
            return q0

    def _remember_q_empty(self, name: str, reference: Reference, q0: np.ndarray) -> None:
        if reference.key is None:
            return
        with self._q_lock:
            self._q_empty_cache[(name, reference.key)] = q0
            while len(self._q_empty_cache) > 512:
                self._q_empty_cache.popitem(last=False)

    # -- stage 3: search, stage 4: present -----------------------------------------------------------
    def _search(self, req: Request, targets: set[int], known_gt: bool) -> None:
        """Every query of the request ranked in one `rank` call, each with its own q_∅ and λ:
        exact over the whole gallery (one product for all of them), or, behind an approximate
        index (HNSW, IVF), each query's cosine shortlist re-scored exactly. Then marked."""
        if not req.jobs:
            return
        sizes = [len(j.queries) for j in req.jobs]
        q_empty = None if req.opts.scoring != "chord" else \
            np.concatenate([np.repeat(j.q_empty, n, 0) for j, n in zip(req.jobs, sizes)])
        lams = np.repeat([j.lam or 0.0 for j in req.jobs], sizes)  # unused under cosine
        exclude = np.full(sum(sizes), -1 if req.reference.row is None else req.reference.row)
        t = time.perf_counter()
        got = rank(np.concatenate([j.queries for j in req.jobs]), q_empty, req.v_r, self.embeddings,
                   req.k, req.opts.scoring, lams, req.opts.variant, exclude=exclude,
                   index=None if self.index.kind == "flat" else self.index, norms=self.norms,
                   prefilter=self.prefilter)
        share = (time.perf_counter() - t) * 1000 / len(req.jobs)
        ref_char, row = req.reference.character, 0
        for job, n in zip(req.jobs, sizes):
            hits = [self._hits(got.ids[i], got.scores[i], targets, known_gt, ref_char) for i in range(row, row + n)]
            row += n
            if isinstance(job.owner, MethodResult):
                job.owner.search_ms, job.owner.hits = share, hits[0]
            else:
                job.owner.steps = [Step(i + 1, sent, h) for i, (sent, h) in enumerate(zip(req.sentences, hits))]

    def _hits(self, ids: np.ndarray, scores: np.ndarray, targets: set[int], known_gt: bool,
              ref_char: str | None) -> list[Hit]:
        out = []
        for r, (i, s) in enumerate(zip(ids.tolist(), scores.tolist()), 1):
            if i < 0:
                continue
            ch = self.character(i)
            out.append(Hit(r, i, self.item_id(i), float(s), (i in targets) if known_gt else None, ch,
                           None if ref_char is None or ch is None else ch == ref_char))
        return out


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
