"""training.prefix_targets: the image after a query's first k edits, for PACE's intermediate
prefix targets (the PACE batch that trains a prefix against it: tests/test_pace.py)."""
import itertools

import numpy as np
import pytest

from cir_core.world.films.queries import FilmQuery
from cir_core.world.films.stream import render_item, training_queries
from training.embed_cache import scene_hash
from training.prefix_targets import FILE, PrefixTargets, intermediate_states

pytestmark = pytest.mark.usefixtures("one_thread")


def test_the_chain_of_edits_ends_at_the_target_for_world_and_film_queries():
    qs = [q for q in itertools.islice(training_queries(0, 0.5), 400) if len(q.edits) >= 2]
    films = [q for q in qs if isinstance(q, FilmQuery)]
    assert films and len(films) < len(qs)  # both kinds
    for q in qs:
        states = intermediate_states(q)
        if states is None:  # "two": one sentence for two edits; no prefix to train
            assert len(q.sentences) != len(q.edits)
            continue
        final = q.tgt_key if isinstance(q, FilmQuery) else q.target.key()
        assert len(states) == len(q.edits) and states[-1][2] == scene_hash(final)
        assert len({s[2] for s in states}) == len(states)  # every edit changes the answer


def test_targets_are_the_rendered_intermediate_images(tiny_backbone, train_cache):
    (train_cache.folder / FILE).unlink(missing_ok=True)
    t = PrefixTargets(train_cache, tiny_backbone, progress=False)
    assert (train_cache.folder / FILE).is_file() and t.fallback == 0
    qs = list(itertools.islice(training_queries(0, 0.5), len(train_cache)))
    i = int(np.argmax(train_cache.n_sentences))
    n = int(train_cache.n_sentences[i])
    assert n >= 3
    states = intermediate_states(qs[i])
    for k in range(1, n):
        img, key = t.target(i, k)
        want = tiny_backbone.encode_images([render_item(states[k - 1][0], tiny_backbone.image_size,
                                                        states[k - 1][1])])[0]
        np.testing.assert_allclose(img, want, atol=2e-3)  # float16 storage
        assert key == states[k - 1][2] != int(train_cache.tgt_key[i])
    with pytest.raises(ValueError, match="no intermediate target"):
        t.target(i, n)
    again = PrefixTargets(train_cache, tiny_backbone, progress=False)  # read back, not rebuilt
    np.testing.assert_array_equal(again.img, t.img)


def test_a_stream_that_is_not_the_caches_is_refused(tiny_backbone, train_cache, tmp_path):
    from training.prefix_targets import build

    class Drifted:  # the cache's arrays, but target keys no regenerated query has
        folder, meta, dim = train_cache.folder, train_cache.meta, train_cache.dim
        n_sentences, tgt_key, tgt_img = train_cache.n_sentences, train_cache.tgt_key + 1, train_cache.tgt_img

        def __len__(self):
            return len(train_cache)

    with pytest.raises(SystemExit, match="is not the cache's"):
        build(Drifted(), tiny_backbone, tmp_path / "p.npz", progress=False)
    assert not (tmp_path / "p.npz").exists()


def test_a_file_that_does_not_fit_its_cache_is_refused(tiny_backbone, train_cache):
    class OtherCache:  # the same folder, other sentence counts: the file's rows cannot be its own
        folder, n_sentences, source = train_cache.folder, np.ones(len(train_cache), np.int64), "world"

        def __len__(self):
            return len(train_cache)

    PrefixTargets(train_cache, tiny_backbone, progress=False)
    with pytest.raises(SystemExit, match="does not fit its cache"):
        PrefixTargets(OtherCache(), tiny_backbone, progress=False)
    OtherCache.source = "cirr"
    with pytest.raises(SystemExit, match="only for the generated world's cache"):
        PrefixTargets(OtherCache(), tiny_backbone, progress=False)
