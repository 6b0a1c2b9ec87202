"""`Engine.compare`: one request in three stages (encode, compose, search), every method's top-k
with its marks, and the per-sentence progression."""
from __future__ import annotations

import logging
import time
from typing import Any, Sequence

import numpy as np

from ..errors import CIRError, InputError
from ..inputs import check_edit_text
from ..scoring import SCORINGS, VARIANTS
from ..text import split_sentences
from .common import MAX_K, MAX_STEPS, method_label
from .ranking import rank_all
from .results import CompareResult, Hit, MethodResult, Progression, Reference, Step

log = logging.getLogger(__name__)


class CompareMixin:
    """Mixed into `Engine`, whose `__init__` sets the state these methods read (`gallery`,
    `embeddings`, `index`, `text_memo`, the q_∅ cache); `method`, `item_id`, `character` and
    `ground_truth` come from it too."""

    # -- compare ---------------------------------------------------------------------------------
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

    def progression_method(self, names: Sequence[str]) -> tuple[str, Any, str] | None:
        """(name, method, why-not-PACE note) for the progression: PACE when it loads, else the first
        available of `names` (its default progression recomposes each prefix)."""
        try:
            return "pace", self.method("pace"), ""
        except CIRError as exc:
            why = str(exc)
        for n in names:
            try:
                return n, self.method(n), why
            except CIRError:
                continue
        return None

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

    def _q_empty(self, name: str, method: Any, reference: Reference, v_r: np.ndarray) -> np.ndarray:
        """q_∅ of `method` for this reference, remembered per (method, reference): it depends on
        the reference only, so trying several edits on one reference computes it once."""
        key = None if reference.key is None else (name, reference.key)
        with self._q_lock:
            if key is not None and key in self._q_empty_cache:
                self._q_empty_cache.move_to_end(key)
                return self._q_empty_cache[key]
        q0 = method.compose_empty(v_r)
        if key is not None:
            with self._q_lock:
                self._q_empty_cache[key] = q0
                while len(self._q_empty_cache) > 512:
                    self._q_empty_cache.popitem(last=False)
        return q0

    @staticmethod
    def _progression_note(name: str, native: bool, why: str, n_sentences: int) -> str:
        if name == "pace":
            note = ("PACE's own step queries: q₀ from the whole edit, then its accumulator adds one "
                    "sentence per step" if native else "PACE, recomposing each prefix")
        else:
            note = (f"{why.rstrip('.')}. This shows {method_label(name)} "
                    + ("stepping through the sentences with its own progression" if native else
                       "recomposing sentences 1..k from scratch at each step (prefix re-composition, "
                       "not PACE's accumulator)"))
        if n_sentences > MAX_STEPS:
            note += f". Showing the first {MAX_STEPS} of {n_sentences} sentences"
        return note

    def compare(self, reference: Reference, edit: str, k: int = 8, scoring: str = "cosine",
                lam: float | None = None, methods: Sequence[str] | None = None,
                progression: bool = True, variant: str = "empty") -> CompareResult:
        """Every method's top-k for (reference, edit), and the per-sentence progression.

        `lam`: Chord's λ for every method; None uses each method's own `chord_lambda`.
        Raises `InputError` for a bad edit / k / scoring; a method that fails gets `error` set.
        """
        t_start = time.perf_counter()
        text, sentences = self.check_edit(edit)
        if scoring not in SCORINGS:
            raise InputError(f"unknown scoring {scoring!r}; expected one of {SCORINGS}")
        if variant not in VARIANTS:
            raise InputError(f"unknown Chord variant {variant!r}; expected one of {VARIANTS}")
        if not 1 <= int(k) <= MAX_K:
            raise InputError(f"k must be between 1 and {MAX_K}, got {k}")
        k = min(int(k), len(self.gallery) - (reference.row is not None))
        if k < 1:
            raise InputError("the gallery has nothing to retrieve besides the reference")
        names = list(methods) if methods is not None else self.default_methods()
        prog = self.progression_method(names) if progression else None

        # Stage 1, encode: the reference (already done for an upload, a cache read for a gallery
        # item) and every text the frozen text tower will be asked for, in one batch.
        t0 = time.perf_counter()
        texts = [text, "", *sentences]
        if prog is not None and not getattr(prog[1], "native_progression", False):
            texts += [" ".join(sentences[:i]) for i in range(1, min(len(sentences), MAX_STEPS) + 1)]
        self.text_memo.prefetch(list(dict.fromkeys(texts)))
        encode_ms = reference.encode_ms + (time.perf_counter() - t0) * 1000

        v_r = np.asarray(reference.embedding, np.float32)[None]
        query_id, targets = self.ground_truth(reference, text)
        known_gt = query_id is not None
        ref_char = reference.character

        # Stage 2, compose: every method's query and q_∅, and the progression's step queries.
        results: list[MethodResult] = []
        jobs: list[tuple[Any, np.ndarray, np.ndarray, float]] = []  # (owner, queries, q_∅, λ)
        t_compose = time.perf_counter()
        for name in names:
            res = MethodResult(name, method_label(name))
            results.append(res)
            try:
                m = self.method(name)
                t = time.perf_counter()
                q = m.compose(v_r, [text])
                q0 = self._q_empty(name, m, reference, v_r)
                res.compose_ms = (time.perf_counter() - t) * 1000
            except CIRError as exc:
                res.error = str(exc)
                continue
            except Exception as exc:  # a bug in one method must leave the other columns working
                log.exception("method %s failed", name)
                res.error = f"{res.label} failed: {type(exc).__name__}: {exc}".splitlines()[0]
                continue
            lam_m = m.chord_lambda if lam is None else float(lam)
            res.lam = lam_m if scoring == "chord" else None
            jobs.append((res, q, q0, lam_m))

        progression_out = None
        if prog is not None:
            name, m, why = prog
            shown = sentences[:MAX_STEPS]
            native = bool(getattr(m, "native_progression", False))
            progression_out = Progression(name, method_label(name), native,
                                          self._progression_note(name, native, why, len(sentences)),
                                          [], len(sentences))
            try:
                steps_q = np.stack([np.asarray(x, np.float32) for x in m.progression(v_r[0], shown)])
                q0 = self._q_empty(name, m, reference, v_r)
                jobs.append((progression_out, steps_q, q0, m.chord_lambda if lam is None else float(lam)))
            except CIRError as exc:
                progression_out.note = str(exc)
            except Exception as exc:
                log.exception("progression of %s failed", name)
                progression_out.note = f"progression failed: {type(exc).__name__}: {exc}"
        compose_ms = (time.perf_counter() - t_compose) * 1000

        # Stage 3, search: one FAISS pass for every query of the request, then the exact score.
        t_search = time.perf_counter()
        ranked = rank_all(self.embeddings, self.index, [(q, q0, lm) for _, q, q0, lm in jobs], v_r,
                          reference.row, k, scoring, variant)
        for (owner, _, _, _), (scores, ids, ms) in zip(jobs, ranked):
            if isinstance(owner, MethodResult):
                owner.search_ms = ms
                owner.hits = self._hits(ids[0], scores[0], targets, known_gt, ref_char)
            else:
                owner.steps = [Step(i + 1, sent, self._hits(ids[i], scores[i], targets, known_gt, ref_char))
                               for i, sent in enumerate(sentences[:len(ids)])]
        search_ms = (time.perf_counter() - t_search) * 1000

        timings = {"encode": encode_ms, "compose": compose_ms, "search": search_ms,
                   "total": reference.encode_ms + (time.perf_counter() - t_start) * 1000}
        return CompareResult(reference, text, sentences, k, scoring, lam, variant, query_id,
                             sorted(targets), results, progression_out,
                             {key: round(v, 2) for key, v in timings.items()})
