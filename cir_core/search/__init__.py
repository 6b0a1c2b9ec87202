"""Search: scoring composed queries (cosine, Chord), the one exact top-k, the int8 filter, FAISS
indexes, and `Searcher` + `rank`, how a fixed gallery is searched, decided once.

    searcher = Searcher.for_gallery(embeddings)             # exact / int8-filtered / approximate
    got = rank(Queries(q, q_empty, v_ref), searcher, ScoreOpts("chord").for_method(m), k=10,
               exclude=ref_rows)
"""
from .index import ANN_KINDS, EXACT_MAX, KINDS, Index, ivf_lists
from .prefilter import Int8Filter, filter_for, use_filter
from .scoring import (
                      DEFAULT_LAMBDA,
                      SCORINGS,
                      VARIANTS,
                      Queries,
                      ScoreOpts,
                      chord_scores,
                      chord_terms,
                      cosine_scores,
                      gallery_norms,
                      score_matrix,
)
from .searcher import DEFAULT_SHORTLIST, Ranking, RemoteSearcher, Searcher, StoreArray, VectorStore, rank, searcher_for
from .topk import topk

__all__ = ["Searcher", "RemoteSearcher", "VectorStore", "StoreArray", "searcher_for", "rank", "Ranking", "Queries",
           "ScoreOpts", "DEFAULT_LAMBDA", "SCORINGS", "VARIANTS",
           "score_matrix", "cosine_scores", "chord_scores", "chord_terms", "gallery_norms", "topk", "Index", "KINDS",
           "ANN_KINDS", "EXACT_MAX", "ivf_lists", "Int8Filter", "filter_for", "use_filter", "DEFAULT_SHORTLIST"]
