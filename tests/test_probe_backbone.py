"""The backbone's held-out validation (training.backbone_val, .backbone_val_films), the probe
study that reruns it (studies.probe_backbone) and the trainer's hard-negative batches (shapes,
keys, masks; not accuracy): a random-init tiny model on a handful of scenes."""
import json
import random
from dataclasses import replace

import pytest
import torch

from cir_core.backbone import save_backbone_dir
from studies import probe_backbone
from training.backbone_val import PROBES, evaluate, heldout_set, probe_alternatives
from training.train_backbone import AUX_HEADS, DEFAULTS, BackboneTask, attribute_labels


def test_heldout_set_is_deterministic():
    a, b = heldout_set(5), heldout_set(12)
    assert a.scenes == b.scenes[:5] and len(b.seeds) == len(b.captions) == 12
    assert heldout_set(5) == a


def test_probe_alternatives_change_one_attribute():
    s = heldout_set(1).scenes[0]
    alts = probe_alternatives(s)
    assert set(alts) == set(PROBES)
    assert len(alts["identity"]) == 23 and len(alts["char_face"]) == 1 and len(alts["char_move"]) == 2
    assert all(x.key() != s.key() for v in alts.values() for x in v)


def test_evaluate_keys_and_ranges(tiny_backbone, one_thread):
    m = evaluate(tiny_backbone.model, tiny_backbone.tokenizer, tiny_backbone.image_size,
                 val_scenes=8, probe_scenes=4)
    assert set(m) == {"t2i_R@1", "t2i_R@5", "i2t_R@1"} | {f"probe_{p}" for p in PROBES} - {
        f"probe_{p}" for p in PROBES if not any(probe_alternatives(s)[p] for s in heldout_set(4).scenes)}
    assert all(0.0 <= v <= 1.0 for v in m.values())


def test_probe_cli_reads_a_local_dir(tiny_backbone, tmp_path, one_thread, capsys):
    folder = save_backbone_dir(tiny_backbone.model, "cir-tiny-vit", tmp_path / "bb")
    out = tmp_path / "m.json"
    metrics = probe_backbone.main(["--backbone", f"local-dir:{folder}", "--val-scenes", "6",
                                   "--probe-scenes", "3", "--json", str(out)])
    assert json.loads(out.read_text())["t2i_R@1"] == metrics["t2i_R@1"]


@pytest.fixture(scope="module")
def task():
    cfg = replace(DEFAULTS, batch_size=16, pair_fraction=0.5, group_size=4, text_negatives=1,
                  aux_weight=0.5, val_scenes=4, probe_scenes=2)
    return BackboneTask(cfg)


def test_batch_groups_and_negatives(task, one_thread):
    batch = task.batch(0, 0, random.Random(0))
    images, tokens, same, img_labels, txt_labels = batch
    assert images.shape == (16, 3, task.size, task.size)
    assert 16 < tokens.shape[0] <= 32 and same.shape == (16, tokens.shape[0])
    assert same[:, :16].diagonal().all()  # every image's own caption
    assert not same[torch.arange(16), 16 + torch.arange(min(16, tokens.shape[0] - 16))].all()
    assert img_labels.shape == (16, len(AUX_HEADS)) and (img_labels >= 0).all()  # pixels say all
    assert txt_labels.shape == (tokens.shape[0], len(AUX_HEADS))
    loss, logs = task.loss(task.model, batch)
    assert torch.isfinite(loss) and set(logs) == {"loss", "scale", "aux"}
    assert {f"clip.{k}" for k in task.clip.state_dict()} < set(task.model.state_dict())  # + heads


def test_attribute_labels_follow_what_the_caption_says():
    s = heldout_set(1).scenes[0]
    full = attribute_labels(s)
    silent = attribute_labels(s, {"name": True, "character": False, "background": False})
    assert silent[:4] == [-100] * 4 and silent[4:] == full[4:]
    assert attribute_labels(s, {"name": False, "character": True, "background": True})[2] == -100


def test_batch_is_deterministic(task):
    a, b = task.batch(3, 0, random.Random("x")), task.batch(3, 0, random.Random("x"))
    assert all(torch.equal(x, y) for x, y in zip(a, b))


@pytest.fixture(scope="module")
def film_task():
    cfg = replace(DEFAULTS, batch_size=16, pair_fraction=0.5, group_size=2, aux_weight=0.5, film_fraction=0.5,
                  val_scenes=4, probe_scenes=2)
    return BackboneTask(cfg)


def test_film_keyframes_join_the_batch_with_slot_labels(film_task, one_thread):
    from training.backbone_films import SLOT_HEADS

    images, tokens, same, img_labels, txt_labels = batch = film_task.batch(0, 0, random.Random(1))
    heads = len(AUX_HEADS) + len(SLOT_HEADS)
    assert images.shape[0] == 16 and tokens.shape[0] == 16 and same.diagonal().all()
    assert img_labels.shape == (16, heads) and txt_labels.shape == (16, heads)
    film_rows = img_labels[8:]
    assert (film_rows[:, :3] == -100).all()  # the world's one-character heads are not asked of films
    assert (film_rows[:, len(AUX_HEADS):] >= 0).all()  # every slot says who (or nobody) is there
    loss, logs = film_task.loss(film_task.model, batch)
    assert torch.isfinite(loss)


def test_film_part_pairs_differ_in_one_thing():
    from training.backbone_films import film_part

    ks = film_part(12, 0.5, random.Random(2))
    assert len(ks) == 12 and all(not k.state.is_novel() for k in ks)
    for a, b in zip(ks[0:6:2], ks[1:6:2]):  # a shot and the next one, or an actor swapped
        assert a.film_id == b.film_id and a.state != b.state


def test_film_probe_alternatives_change_one_thing():
    from training.backbone_val_films import alternatives, probe_frames

    k = probe_frames(5)[0]
    for name, alts in alternatives(k.state).items():
        assert all(a != k.state for a in alts), name


def test_pose_pairs_differ_in_one_pose_alone():
    from training.backbone_films import film_part

    ks = film_part(8, 1.0, random.Random(3), pose_pairs=1.0)
    for a, b in zip(ks[0::2], ks[1::2]):
        changed = [(x, y) for x, y in zip(a.state.figures, b.state.figures) if x != y]
        assert a.shot_seed == b.shot_seed and len(changed) == 1
        (x, y), = changed
        assert x.pose != y.pose and replace(x, pose=y.pose) == y


def test_fine_tuning_starts_from_the_init_weights_without_a_random_init_warning(tiny_backbone, tmp_path, caplog):
    """`init=`: the folder's weights, loaded through the backbone's one loader (a mismatch is a
    one-line CheckpointError), and no open_clip "initialized randomly" line, which would read as
    a failed load."""
    import logging

    from cir_core.errors import CheckpointError

    folder = save_backbone_dir(tiny_backbone.model, "cir-tiny-vit", tmp_path / "bb")
    with caplog.at_level(logging.WARNING):
        t = BackboneTask(replace(DEFAULTS, init=str(folder), val_scenes=2, probe_scenes=1))
    assert not [r for r in caplog.records if "No pretrained weights" in r.getMessage()]
    want = tiny_backbone.model.state_dict()
    assert all(torch.equal(v, want[k]) for k, v in t.clip.state_dict().items())
    from safetensors.torch import save_file

    bad = tmp_path / "bad"
    bad.mkdir()
    save_file({"bogus": torch.zeros(2)}, str(bad / "open_clip_model.safetensors"))
    with pytest.raises(CheckpointError, match="open_clip_model.safetensors"):
        BackboneTask(replace(DEFAULTS, init=str(bad), val_scenes=2, probe_scenes=1))


class _OneHot:
    """An encoder that gives every distinct image (its pixels) or text its own orthonormal axis."""

    def __init__(self) -> None:
        self.seen: dict = {}

    def _axis(self, keys: list) -> "torch.Tensor":
        import torch

        out = torch.zeros(len(keys), 4096)
        for r, key in enumerate(keys):
            out[r, self.seen.setdefault(key, len(self.seen))] = 1.0
        return out

    def images(self, images: list):
        self.batches = getattr(self, "batches", []) + [len(images)]
        return self._axis([im.tobytes() for im in images])

    def texts(self, texts: list):
        return self._axis(list(texts))


def test_attribute_moves_measure_each_change_in_both_towers():
    """Every probe's change is drawn and said: with one axis per distinct image and caption, each
    move is exactly 1; an encoder that sees nothing moves 0."""
    import torch

    from studies.probe_backbone import attribute_moves

    enc = _OneHot()
    moves = attribute_moves(enc, 32, probe_n=3, n=20)
    assert {"films_move_image_pose", "films_move_text_pose", "films_move_image_place"} <= set(moves)
    assert all(v == 1.0 for v in moves.values()), moves
    assert max(enc.batches) == 4  # the frame and at most max_alts=3 alternatives (identity has ~20)
    one = _OneHot()
    attribute_moves(one, 32, probe_n=3, n=20, max_alts=1)
    assert set(one.batches) == {2}

    class Blind(_OneHot):
        def images(self, images):
            return torch.ones(len(images), 1)

    blind = attribute_moves(Blind(), 32, probe_n=3, n=20)
    assert all(v == 0.0 for k, v in blind.items() if "_image_" in k)
    assert all(v == 1.0 for k, v in blind.items() if "_text_" in k)


def test_moves_without_films_is_refused_before_any_probe(capsys):
    from studies.probe_backbone import main

    with pytest.raises(SystemExit) as e:
        main(["--moves", "--backbone", "local-dir:/no/such/backbone"])
    assert e.value.code == 2 and "add --films" in capsys.readouterr().err
