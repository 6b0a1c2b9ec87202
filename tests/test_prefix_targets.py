"""training.prefix_targets: the image after a query's first k edits, for PACE's intermediate
prefix targets; and the PACE batch that trains a prefix against it."""
import itertools
import random

import numpy as np
import pytest

from cir_core.world.films.queries import FilmQuery
from cir_core.world.films.stream import render_item, training_queries
from training.embed_cache import scene_hash
from training.prefix_targets import FILE, PrefixTargets, intermediate_states
from training.train_pace import DEFAULTS, PACETask

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


def test_pace_trains_a_prefix_against_its_intermediate_target(head_cfg, tiny_backbone, train_cache):
    cfg = head_cfg(DEFAULTS, bank_size=64, long_fraction=0.5, prefix_fraction=1.0, prefix_target="intermediate")
    task, plain = PACETask(cfg, tiny_backbone), PACETask(head_cfg(DEFAULTS, bank_size=64, long_fraction=0.5),
                                                         tiny_backbone)
    a, b = plain.batch(0, 0, random.Random(3)), task.batch(0, 0, random.Random(3))
    cut = [r for r in range(len(a["n"])) if int(b["n"][r]) < int(a["n"][r])]
    assert cut
    c = train_cache
    pair = np.concatenate([c.image("ref", np.arange(len(c))), c.image("tgt", np.arange(len(c)))], 1)
    for r in cut:  # each cut row's cache query, by its reference and final target together
        d = np.abs(pair - np.concatenate([a["v_r"][r].numpy(), a["v_t"][r].numpy()])).sum(1)
        i = int(np.argmin(d))
        assert d[i] == 0 and (d == 0).sum() == 1
        img, key = task.targets.target(i, int(b["n"][r]))  # after exactly the k sentences it reads
        np.testing.assert_array_equal(b["v_t"][r].numpy(), img)
        assert int(b["t_key"][r]) == key != int(a["t_key"][r])
    keys = b["t_key"].numpy()
    np.testing.assert_array_equal(b["same"].numpy(), keys[:, None] == keys[None, :])  # built from the new keys
    loss, _ = task.loss(task.model, b)
    assert np.isfinite(loss.item())
    with pytest.raises(SystemExit, match="'final' or 'intermediate'"):
        PACETask(head_cfg(DEFAULTS, prefix_fraction=0.5, prefix_target="middle"), tiny_backbone)

