"""The frozen training-embedding cache: contents, ragged sentences, keys, reuse."""
import itertools

import numpy as np
import pytest

from cir_core.text import split_sentences
from cir_core.world.films.queries import FilmQuery
from cir_core.world.films.stream import TRAIN_TYPES, query_images, query_keys, training_queries
from training.embed_cache import build_train_cache, cache_key, scene_hash
from training.train_data import load_train_cache

ATOL = 3e-3  # float16 storage

pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.fixture(scope="module")
def queries():
    return list(itertools.islice(training_queries(0), 48))


def test_shapes_and_meta(train_cache, tiny_backbone):
    c = train_cache
    n, d = 48, tiny_backbone.dim
    assert len(c) == n and c.dim == d
    assert c.ref_img.shape == c.tgt_img.shape == (n, d)
    assert c.ref_caption.shape == c.edit.shape == c.target_caption.shape == (n,)
    assert c.sent_off.shape == c.neg_off.shape == (n + 1,)
    assert c.sent_off[-1] == len(c.sent_idx) and c.neg_off[-1] == len(c.neg_idx)
    assert c.meta["backbone"] == tiny_backbone.id and c.meta["image_size"] == tiny_backbone.image_size
    np.testing.assert_allclose(np.linalg.norm(c.image("tgt", np.arange(n)), axis=1), 1, atol=ATOL)


def test_contents_match_the_queries(train_cache, tiny_backbone, queries):
    c = train_cache
    assert [TRAIN_TYPES[t] for t in c.edit_type] == [q.edit_type for q in queries]
    assert c.meta["n_film_queries"] == 24 == sum(isinstance(q, FilmQuery) for q in queries)
    assert list(c.n_sentences) == [len(q.sentences) for q in queries]
    assert [len(c.negatives(i)) for i in range(len(c))] == [len(q.negatives) for q in queries]
    assert all(c.tgt_key[i] == scene_hash(query_keys(q)[1]) for i, q in enumerate(queries))
    long_q = next(i for i, q in enumerate(queries) if q.edit_type == "long")
    q = queries[long_q]
    want = tiny_backbone.encode_texts(split_sentences(q.text))
    np.testing.assert_allclose(c.sentences(long_q), want, atol=ATOL)
    np.testing.assert_allclose(c.text(c.edit[[long_q]])[0], tiny_backbone.encode_texts([q.text])[0], atol=ATOL)
    np.testing.assert_allclose(c.text(c.target_caption[[3]])[0],
                               tiny_backbone.encode_texts([queries[3].target_caption])[0], atol=ATOL)
    for i in (4, 5):  # a world query, a film query
        img = tiny_backbone.encode_images([query_images(queries[i], tiny_backbone.image_size)[1]])[0]
        np.testing.assert_allclose(c.image("tgt", np.array([i]))[0], img, atol=ATOL)


def test_reused_not_rebuilt(train_cache, tiny_backbone, train_cache_root, monkeypatch):
    def boom(*a, **k):
        raise AssertionError("the cache was rebuilt")

    monkeypatch.setattr(tiny_backbone, "encode_images", boom)
    again = load_train_cache(tiny_backbone, 48, 0, train_cache_root)
    assert again.folder == train_cache.folder
    np.testing.assert_array_equal(again.tgt_img, train_cache.tgt_img)


def test_key_depends_on_n_seed_and_backbone(tiny_backbone):
    k = cache_key(tiny_backbone, 48, 0)
    assert k != cache_key(tiny_backbone, 49, 0) and k != cache_key(tiny_backbone, 48, 1)
    assert k != cache_key(tiny_backbone, 48, 0, films=0.0)  # the world alone is another stream

    class Other:
        id, image_size = "other@x", tiny_backbone.image_size

    assert cache_key(Other, 48, 0) != k


def test_prefix_of_a_longer_stream(tiny_backbone, train_cache, tmp_path):
    """N queries are the first N of the stream: a smaller cache is a prefix of a larger one."""
    small = build_train_cache(tiny_backbone, 6, 0, tmp_path, chunk=4, progress=False)
    np.testing.assert_allclose(small.ref_img, train_cache.ref_img[:6], atol=ATOL)
    np.testing.assert_array_equal(small.n_sentences, train_cache.n_sentences[:6])
