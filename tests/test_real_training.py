"""Every trainer reads real formats: ITT JSONL (PACT, DiCE) and CIRR's train split (PACE, DiCE),
written here in the official layouts with a handful of images; a bad record is an error that
names it; a source lacking what a trainer needs is refused with the reason."""
from __future__ import annotations

import json

import numpy as np
import pytest
from _bench_fixtures import cirr_query, write_cirr, write_image

from cir_core.errors import InputError
from training.itt import make_id
from training.triplets import read_triplets

pytestmark = pytest.mark.usefixtures("one_thread")
NAMES = [f"train-{i}-0-img0" for i in range(8)]


@pytest.fixture
def itt_file(tmp_path):
    folder = tmp_path / "itt"
    rows = []
    for i in range(8):
        write_image(folder / "images" / f"im{i}.png", i, (40, 40))
        src = f"a photo of object number {i} on a table"
        rows.append({"id": make_id(f"im{i}", src, "attribute"), "image": f"images/im{i}.png", "image_id": f"im{i}",
                     "source_caption": src, "edit_type": "attribute", "edit": f"make it colour {i}",
                     "target_caption": f"a photo of a colour {i} object on a table", "negatives": [src],
                     "generator": {"mode": "template", "model": "rules-v1", "seed": 0}})
    path = folder / "itt.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


@pytest.fixture
def cirr_root(tmp_path):
    qs = [cirr_query(i, NAMES[i], NAMES[(i + 1) % 8], f"Change it to {i + 1}. Then more.", NAMES[:4])
          for i in range(8)]
    return write_cirr(tmp_path / "cirr", "train", NAMES, qs)


def _cfg(module, tmp_path, data, **kw):
    base = {"backbone": "cir-tiny-vit", "data": data, "n_train": 8, "cache_root": str(tmp_path / "cache"),
            "val_queries": 0, "batch_size": 4, "steps": 2, "warmup": 1, "eval_every": 1000, "ckpt_every": 1000,
            "device": "cpu", "threads": 0, "out_dir": str(tmp_path / "run"), "export_dir": str(tmp_path / "export"),
            "render_workers": 0, **kw}
    return type(module.DEFAULTS).from_dict({**module.DEFAULTS.to_dict(), **base}, strict=True)


def test_readers_and_their_errors(itt_file, cirr_root):
    itt = read_triplets(f"itt:{itt_file}")
    assert len(itt) == 8 and itt[0].target_caption and itt[0].negatives and itt[0].target_image is None
    cirr = read_triplets(f"cirr:{cirr_root}")
    assert len(cirr) == 8 and cirr[0].target_image and cirr[0].target_caption is None
    lines = itt_file.read_text().splitlines()
    bad = json.loads(lines[3])
    del bad["edit"]
    itt_file.write_text("\n".join(lines[:3] + [json.dumps(bad)] + lines[4:]) + "\n")
    with pytest.raises(InputError, match=r"itt.jsonl line 4: missing field\(s\) edit"):
        read_triplets(f"itt:{itt_file}")
    caps = cirr_root / "captions" / "cap.rc2.train.json"
    entries = json.loads(caps.read_text())
    entries[2]["target_hard"] = "nowhere"
    caps.write_text(json.dumps(entries))
    with pytest.raises(InputError, match=r"cap.rc2.train.json entry 2 \(pairid 2\): target_hard 'nowhere'"):
        read_triplets(f"cirr:{cirr_root}")
    with pytest.raises(InputError, match="expected one of itt:PATH"):
        read_triplets("coco:/x")


def test_dice_trains_on_itt_and_on_cirr(itt_file, cirr_root, tiny_backbone, tmp_path):
    from training import train_dice
    from training.loop import run

    for data in (f"itt:{itt_file}", f"cirr:{cirr_root}"):
        cfg = _cfg(train_dice, tmp_path / data[:4], data)
        task = train_dice.DiCETask(cfg, tiny_backbone)
        assert task.cache.source == data and len(task.cache) == 8
        assert task.cache.has_target_images == data.startswith("cirr")
        run(task, cfg, resume=False)
        assert (tmp_path / data[:4] / "export" / "model.safetensors").is_file()
        assert np.isfinite(task.last_logs["loss"])


def test_pace_needs_target_images(itt_file, cirr_root, tiny_backbone, tmp_path):
    from training import train_pace
    from training.loop import run

    with pytest.raises(SystemExit, match="no target images"):
        train_pace.PACETask(_cfg(train_pace, tmp_path / "i", f"itt:{itt_file}"), tiny_backbone)
    cfg = _cfg(train_pace, tmp_path / "c", f"cirr:{cirr_root}", bank_size=8)
    task = train_pace.PACETask(cfg, tiny_backbone)
    assert task.cache.n_sentences.max() == 2  # "Change it to k. Then more."
    run(task, cfg, resume=False)
    assert (tmp_path / "c" / "export" / "config.json").is_file()


def test_pact_trains_from_an_itt_file_and_refuses_cirr(itt_file, cirr_root, tiny_backbone, tmp_path):
    from training import train_pact
    from training.loop import run

    small = {"mapper_hidden": 16, "lora_rank": 2, "identity_steps": 1, "joint_steps": 1, "replay_batch": 2,
             "identity_warmup": 0, "joint_warmup": 0}
    with pytest.raises(SystemExit, match="no target captions"):
        train_pact.PACTTask(_cfg(train_pact, tmp_path / "c", f"cirr:{cirr_root}", **small), tiny_backbone)
    cfg = _cfg(train_pact, tmp_path / "i", f"itt:{itt_file}", val_queries=4,
               val_cache_root=str(tmp_path / "val"), **small)
    task = train_pact.PACTTask(cfg, tiny_backbone)
    run(task, cfg, resume=False)
    saved = json.loads((tmp_path / "i" / "export" / "config.json").read_text())
    assert saved["training"]["data"] == f"itt:{itt_file}"


def test_lambda_chosen_on_a_real_val_split(cirr_root, tiny_backbone, tmp_path):
    """val=cirr:ROOT: Chord λ is chosen on CIRR's own val split, scored by its evaluator."""
    from _bench_fixtures import write_cirr as wc

    from training import train_dice
    from training.loop import run

    val_names = [f"dev-{i}-0-img0" for i in range(8)]
    wc(cirr_root, "val", val_names, [cirr_query(i, val_names[i], val_names[(i + 3) % 8], "more", val_names[:4])
                                     for i in range(4)])
    cfg = _cfg(train_dice, tmp_path, f"cirr:{cirr_root}", val=f"cirr:{cirr_root}", val_cache_root=str(tmp_path / "v"))
    task = train_dice.DiCETask(cfg, tiny_backbone)
    run(task, cfg, resume=False)
    saved = json.loads((tmp_path / "export" / "config.json").read_text())
    search = saved["lambda_search"]
    # 8 gallery images: R@10 is not defined, so the next criterion (R@5) chooses
    assert search["benchmark"] == "cirr" and search["criterion"] == "R@5" and search["n_queries"] == 4
