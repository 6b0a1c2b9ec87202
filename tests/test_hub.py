"""cir_core.hub against a local folder standing in for the Hub (never the network), plus the real
huggingface_hub cache read with local_files_only=True for the offline fallback."""
from __future__ import annotations

import json
import logging
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
from safetensors.numpy import save_file

from cir_core.hub.__main__ import main
from cir_core.storage import FolderStore, HFStore, StorageError
from cir_core.storage.manifest import MANIFEST
from cir_core.storage.repo import parse_spec, pull, push


def _methods(folder: Path, scale: float = 1.0) -> Path:
    for name in ("pact", "dice"):
        (folder / name).mkdir(parents=True, exist_ok=True)
        (folder / name / "config.json").write_text(json.dumps({"name": name, "scale": scale}))
        save_file({"w": np.full((3, 4), scale, np.float32)}, str(folder / name / "model.safetensors"))
    return folder


def _tree(folder: Path) -> dict[str, bytes]:
    return {p.relative_to(folder).as_posix(): p.read_bytes()
            for p in sorted(folder.rglob("*")) if p.is_file() and p.name != MANIFEST}


@pytest.fixture
def hub(tmp_path):
    return FolderStore(tmp_path / "hub", tmp_path / "hf-cache")


def test_push_then_pull_round_trip(tmp_path, hub):
    src = _methods(tmp_path / "src")
    done = push("methods", src, "org/cir-methods", backend=hub)
    assert sorted(done.files) == ["dice/config.json", "dice/model.safetensors",
                                  "pact/config.json", "pact/model.safetensors"]
    got = pull("methods", "org/cir-methods", tmp_path / "out", backend=hub, env={})
    assert got.commit == done.commit and got.note is None
    assert _tree(tmp_path / "out") == _tree(src)
    assert not (src / MANIFEST).exists()  # the source folder is never written to


def test_revision_pinning_picks_the_right_version(tmp_path, hub):
    v1 = push("methods", _methods(tmp_path / "a", 1.0), "org/m", tag="v1", backend=hub)
    v2 = push("methods", _methods(tmp_path / "b", 2.0), "org/m", backend=hub)
    push("methods", _methods(tmp_path / "c", 3.0), "org/m@dev", backend=hub)
    assert v1.commit != v2.commit

    def scale(spec, **kw):
        got = pull("methods", spec, backend=hub, env=kw.pop("env", {}), **kw)
        return json.loads((got.folder / "pact" / "config.json").read_text())["scale"], got.commit

    assert scale("org/m") == (2.0, v2.commit)  # main moved on
    assert scale("org/m@v1") == (1.0, v1.commit)  # a tag
    assert scale("hf-hub:org/m@" + v1.commit) == (1.0, v1.commit)  # a full sha
    assert scale("org/m", revision=v1.commit[:10])[0] == 1.0  # a short sha via --revision
    assert scale("org/m@dev")[0] == 3.0  # a branch
    assert scale("org/m", env={"CIR_CHECKPOINTS_REVISION": "v1"})[0] == 1.0
    with pytest.raises(StorageError, match="no such revision"):
        pull("methods", "org/m@v9", backend=hub, env={})
    with pytest.raises(StorageError, match="give one"):
        parse_spec("org/m@v1", revision="v2")


def test_tampered_file_is_rejected(tmp_path, hub):
    done = push("methods", _methods(tmp_path / "src"), "org/m", backend=hub)
    stored = tmp_path / "hub" / "models" / "org" / "m" / "commits" / done.commit
    save_file({"w": np.zeros((3, 4), np.float32)}, str(stored / "pact" / "model.safetensors"))
    with pytest.raises(StorageError, match=r"pact/model.safetensors does not match the sha256"):
        pull("methods", "org/m", tmp_path / "out", backend=hub, env={})
    assert not (tmp_path / "out").exists()  # nothing copied out of a rejected snapshot
    (stored / "pact" / "evil.pkl").write_bytes(b"cos\nsystem\n")
    with pytest.raises(StorageError, match="pickle-capable"):
        pull("methods", "org/m", backend=hub, env={})


def test_pushing_a_pickle_or_a_broken_layout_uploads_nothing(tmp_path, hub):
    src = _methods(tmp_path / "src")
    (src / "pact" / "model.bin").write_bytes(b"\x80\x04")
    with pytest.raises(StorageError, match="refusing pickle-capable file.*pact/model.bin"):
        push("methods", src, "org/m", backend=hub)
    (src / "pact" / "model.bin").unlink()
    (src / "dice" / "model.safetensors").write_bytes(b"not safetensors")
    with pytest.raises(StorageError, match="not a readable safetensors"):
        push("methods", src, "org/m", backend=hub)
    assert not (tmp_path / "hub").exists()


def test_offline_fallback_says_what_it_uses(tmp_path, hub, caplog):
    done = push("methods", _methods(tmp_path / "src"), "org/m", tag="v1", backend=hub)
    pull("methods", "org/m@v1", backend=hub, env={})  # online once: fills the cache
    hub.online = False
    with caplog.at_level(logging.WARNING, logger="cir_core.storage.repo"):
        got = pull("methods", "org/m@v1", tmp_path / "out", backend=hub, env={})
    want = f"offline: using the cached snapshot of org/m at revision v1 (commit {done.commit[:12]}) from "
    assert got.note.startswith(want) and str(tmp_path / "hf-cache") in got.note
    assert want in caplog.text and _tree(tmp_path / "out") == _tree(tmp_path / "src")
    with pytest.raises(StorageError, match=r"org/m at revision main: the Hub is unreachable .* no snapshot"
                                       r".*python -m cir_core.hub pull methods org/m"):
        pull("methods", "org/m", backend=hub, env={})  # main was never fetched


def test_offline_fallback_through_the_real_huggingface_cache(tmp_path, monkeypatch):
    """HFStore on huggingface_hub's own cache layout, HF_HUB_OFFLINE set: no network."""
    from huggingface_hub import constants

    sha = "0123456789abcdef0123456789abcdef01234567"
    repo = tmp_path / "models--org--m"
    _methods(tmp_path / "src")
    push("methods", tmp_path / "src", "org/m", backend=FolderStore(tmp_path / "h", tmp_path / "c"))
    snap = next((tmp_path / "h" / "models" / "org" / "m" / "commits").iterdir())
    (repo / "snapshots").mkdir(parents=True)
    import shutil

    shutil.copytree(snap, repo / "snapshots" / sha)
    (repo / "refs").mkdir()
    (repo / "refs" / "v1").write_text(sha)
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(tmp_path))
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)
    got = pull("methods", "org/m@v1", backend=HFStore(cache_dir=str(tmp_path)), env={})
    assert got.commit == sha and got.note.startswith("offline: using the cached snapshot of org/m at "
                                                     f"revision v1 (commit {sha[:12]})")
    with pytest.raises(StorageError, match="org/absent at revision main: the Hub is unreachable"):
        pull("methods", "org/absent", backend=HFStore(cache_dir=str(tmp_path)), env={})


@pytest.mark.parametrize("spec", ["not-a-repo", "a/b/c", "org/", "-org/x", "org/na me", "org/x@", "o--g/x"])
def test_bad_repo_id_is_a_clear_error(spec, hub):
    with pytest.raises(StorageError, match="bad Hub (repo id|spec)"):
        pull("methods", spec, backend=hub, env={})


def test_unknown_repo_names_it(hub):
    with pytest.raises(StorageError, match="Hub repo org/none: .*no such repository"):
        pull("methods", "org/none", backend=hub, env={})


def test_backbone_round_trip_and_app_paths(tmp_path, hub, monkeypatch):
    """A pushed backbone loads as hf-hub:org/name@tag; checkpoints resolve as org/name@tag."""
    from cir_core.backbone import DEFAULT_BACKBONE_DIR, load_backbone
    from cir_core.engine import resolve_checkpoints

    if not (DEFAULT_BACKBONE_DIR / "open_clip_config.json").is_file():
        pytest.skip("shipped backbone not built")
    push("backbone", DEFAULT_BACKBONE_DIR, "org/tiny", tag="v1", backend=hub)
    got = pull("backbone", "org/tiny@v1", tmp_path / "bb", backend=hub, env={})
    assert _tree(tmp_path / "bb") == _tree(DEFAULT_BACKBONE_DIR)
    monkeypatch.setenv("CIR_LOCAL_HUB", str(tmp_path / "hub"))
    via_hub = load_backbone("hf-hub:org/tiny@v1")
    assert via_hub.id == load_backbone(f"local-dir:{got.folder}").id
    push("methods", _methods(tmp_path / "src"), "org/m", tag="v1", backend=hub)
    src = resolve_checkpoints("org/m@v1", ["pact", "dice"])
    assert src.error is None and (src.folder_for("pact") / "model.safetensors").is_file()
    bad = resolve_checkpoints("org/m@v7", ["pact"])
    assert "could not fetch" in bad.error and "org/m" in bad.error


def test_embeddings_round_trip(tmp_path, hub):
    from cir_core.gallery import EmbeddingCache, Gallery, GalleryItem

    class Fake:
        id, dim = "fake-bb", 4

        def encode_images(self, images, batch_size=64, progress=False, with_norms=False):
            emb = np.eye(4, dtype=np.float32)[: len(images)]
            return (emb, np.full(len(images), 2.0, np.float32)) if with_norms else emb

    gallery = Gallery.from_items("g", [GalleryItem(f"i{k}", meta={"fingerprint": f"f{k}"}) for k in range(3)],
                                 image_fn=lambda item, size: None)
    emb = EmbeddingCache(tmp_path / "cache").embed(gallery, Fake())
    push("embeddings", tmp_path / "cache", "org/emb", backend=hub)
    pull("embeddings", "org/emb", tmp_path / "cache2", backend=hub, env={})
    assert _tree(tmp_path / "cache2") == _tree(tmp_path / "cache")
    Fake.encode_images = None  # a cache hit must not encode
    assert np.array_equal(EmbeddingCache(tmp_path / "cache2").embed(gallery, Fake()), emb)


def test_cli_push_pull(tmp_path, capsys):
    src = _methods(tmp_path / "src")
    local = str(tmp_path / "hub")
    assert main(["push", "methods", str(src), "org/m", "--tag", "v1", "--local-hub", local]) == 0
    commit = capsys.readouterr().out.strip()
    assert main(["pull", "methods", "org/m", "--revision", "v1", "--out", str(tmp_path / "o"),
                 "--local-hub", local]) == 0
    assert capsys.readouterr().out.strip() == str(tmp_path / "o") and len(commit) == 40
    assert main(["pull", "methods", "bad id", "--local-hub", local]) == 2
    assert "bad Hub repo id" in capsys.readouterr().err


def test_hf_backend_upload_calls(monkeypatch, tmp_path):
    """HFStore's push talks to HfApi as documented (a recording stand-in, no network)."""
    calls = []

    class Api:
        def __getattr__(self, name):
            return lambda *a, **kw: calls.append((name, a, kw)) or SimpleNamespace(oid="c0ffee")

    monkeypatch.setattr(HFStore, "_api", lambda self: Api())
    push("methods", _methods(tmp_path / "src"), "org/m@dev", tag="v2", backend=HFStore())
    names = [c[0] for c in calls]
    assert names == ["create_repo", "create_branch", "upload_folder", "create_tag"]
    up = calls[2][2]
    assert up["revision"] == "dev" and up["delete_patterns"] == "*" and up["repo_type"] == "model"
    assert calls[3][2] == {"tag": "v2", "revision": "c0ffee", "repo_type": "model"}


def test_a_gallery_layout_is_checked_by_the_gallery_module(tmp_path):
    """storage.manifest sits below the index builder, so a gallery's layout check is passed in."""
    from cir_core.hub.gallery import check_gallery_layout
    from cir_core.storage.manifest import check_layout

    (tmp_path / "gallery.json").write_text("{}")
    with pytest.raises(StorageError, match="checked by cir_core.hub.gallery"):
        check_layout(tmp_path, "gallery", ["gallery.json"], "here")
    with pytest.raises(StorageError):  # the gallery's own check runs, and refuses this folder
        check_layout(tmp_path, "gallery", ["gallery.json"], "here", check_gallery_layout)
