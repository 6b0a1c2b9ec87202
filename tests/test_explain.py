"""Why a result ranks where it does (issue 44, "why this result"): each hit's cosine term and
Chord's λ·direction term add up to its Chord score, its ranks under cosine and Chord agree with
an independent full ranking of the gallery, and the neighbourhood map is the PCA of the
request's images with the queries projected onto it."""
import numpy as np
import pytest
from _cir_fakes import fake_trained_methods, long_query, make_test_engine

from cir_core.engine import explain as explain_mod
from cir_core.search.scoring import Queries, ScoreOpts, score_matrix

COLUMNS = ["pact", "dice", "pace", "compose-only", "sum"]


@pytest.fixture(scope="module")
def engine():
    with fake_trained_methods():
        e = make_test_engine()
        e.methods.available()
        yield e


def full_rank(engine, res, m, scoring: str) -> dict[int, int]:
    """Every row's 1-based rank under `scoring` for method `m`'s query, computed from scratch."""
    method = engine.methods.get(m.name)
    ref = res.reference
    q = method.compose(np.asarray(ref.embedding)[None], [res.edit])
    q0 = method.compose_empty(np.asarray(ref.embedding)[None])
    opts = ScoreOpts(scoring, m.hits[0].why.lam if scoring == "chord" else None)
    s = score_matrix(Queries(q, q0, np.asarray(ref.embedding)[None]), engine.view.embeddings, opts)[0]
    s[ref.row] = -np.inf
    order = np.lexsort((np.arange(len(s)), -s))  # best first, ties to the lower row
    return {int(r): i + 1 for i, r in enumerate(order)}


@pytest.mark.parametrize("scoring", ["cosine", "chord"])
def test_the_terms_add_up_and_the_ranks_agree_with_a_full_ranking(engine, scoring):
    q, row = long_query(engine)
    res = engine.compare(engine.view.reference_from_row(row), q.text, k=6, scoring=scoring)
    for m in res.methods:
        assert m.ok and len(m.hits) == 6
        by_cos, by_chord = full_rank(engine, res, m, "cosine"), full_rank(engine, res, m, "chord")
        for h in m.hits:
            w = h.why
            assert w.lam == pytest.approx(0.34) and w.chord == pytest.approx(w.cosine + w.lam * w.direction)
            assert h.score == pytest.approx(w.chord if scoring == "chord" else w.cosine, abs=1e-5)
            assert (w.rank_chord if scoring == "chord" else w.rank_cosine) == h.rank  # its own ranking
            deep = lambda r: r if r <= explain_mod.RANK_DEPTH else None  # noqa: E731
            assert (w.rank_cosine, w.rank_chord) == (deep(by_cos[h.row]), deep(by_chord[h.row]))
            assert -1 <= w.direction <= 1
    # the progression's rows are not a method's column: no breakdown there
    assert all(h.why is None for s in res.progression.steps for h in s.hits)
    d = res.to_dict()["methods"][0]["hits"][0]["why"]
    assert set(d) == {"cosine", "direction", "lam", "lam_direction", "chord", "rank_cosine", "rank_chord"}


def test_a_rank_below_the_depth_looked_at_is_unknown_not_wrong(engine, monkeypatch):
    monkeypatch.setattr(explain_mod, "RANK_DEPTH", 3)  # looked for as deep as k (6) at least
    res = engine.compare(engine.view.reference_from_row(4), "Add a red star.", k=6, scoring="chord")
    unknown = 0
    for m in res.methods:
        by_cos = full_rank(engine, res, m, "cosine")
        for h in m.hits:
            assert h.why.rank_chord == h.rank and h.score == pytest.approx(h.why.chord, abs=1e-5)
            assert h.why.rank_cosine == (by_cos[h.row] if by_cos[h.row] <= 6 else None)
            unknown += h.why.rank_cosine is None
    assert unknown  # some of Chord's top-6 lie below cosine's top-6 here


def test_the_map_is_the_images_pca_with_the_queries_projected(engine):
    q, row = long_query(engine)
    ref = engine.view.reference_from_row(row)
    res = engine.compare(ref, q.text, k=5)
    nmap = res.map
    kinds = [p.kind for p in nmap.points]
    assert kinds.count("reference") == 1 and kinds.count("query") == len(COLUMNS)
    assert kinds.count("result") == 5 * len(COLUMNS) and kinds.count("step") == len(q.sentences)
    assert 0 < kinds.count("target") <= explain_mod.MAP_TARGETS
    assert {p.method for p in nmap.points if p.kind == "step"} == {"pace"}
    r = next(p for p in nmap.points if p.kind == "reference")
    assert r.x <= 0 and r.y <= 0 and r.row == row
    # the same PCA from scratch: the images' share of variance and each result's place
    rows = list(dict.fromkeys([p.row for p in nmap.points if p.kind in ("result", "target")]))
    images = np.concatenate([engine.view.embeddings[[row]], engine.view.embeddings[rows]]).astype(np.float64)
    images /= np.linalg.norm(images, axis=1, keepdims=True)
    centred = images - images.mean(0)
    sv = np.linalg.svd(centred, compute_uv=False)
    assert nmap.images == len(images) and nmap.explained == pytest.approx((sv[:2] ** 2).sum() / (sv ** 2).sum(), abs=1e-3)
    at = {p.row: (p.x, p.y) for p in nmap.points if p.kind in ("reference", "result", "target")}
    assert len(at) == nmap.images  # each image once, wherever it is drawn
    cov = np.cov(np.array(list(at.values())).T)
    assert abs(cov[0, 1]) < 1e-3 * cov[0, 0]  # uncorrelated axes, the first the widest
    assert cov[0, 0] >= cov[1, 1]
    json_map = res.to_dict()["map"]
    assert json_map["explained"] == nmap.explained and len(json_map["points"]) == len(nmap.points)


def test_an_upload_has_a_map_and_a_breakdown_too(engine, tmp_path):
    path = tmp_path / "up.png"
    engine.view.image(9, 96).save(path)
    res = engine.compare(engine.view.reference_from_upload(str(path)), "Make it blue.", k=4)
    assert res.map is not None and [p.kind for p in res.map.points].count("reference") == 1
    assert all(h.why is not None and h.why.rank_cosine == h.rank for m in res.methods for h in m.hits)
