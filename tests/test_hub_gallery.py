"""A gallery on the Hub: `push gallery` to a folder remote standing in for the Hub, then
`--gallery hf:org/name@rev` opening it (thumbnails and index at start-up, frames when opened),
pinned, verified, offline from the cache, and refused for another backbone; the same through the
real huggingface_hub client and cache layout against a local HTTP stand-in for the Hub."""
from __future__ import annotations

import json
import logging
import shutil

import numpy as np
import pytest

from cir_core.errors import GalleryError
from cir_core.hub.__main__ import main as hub_main
from cir_core.hub.gallery import open_hub_gallery, push_gallery
from cir_core.storage import FolderStore, HFStore, StorageError
from cir_core.storage.manifest import MANIFEST

N = 30


@pytest.fixture(scope="module")
def source(tmp_path_factory):
    """A manifest of N JPEG frames (two folders, 200 x 150) with the gallery's own columns."""
    from _fake_hub import write_frames

    return write_frames(tmp_path_factory.mktemp("frames"), N)


@pytest.fixture(scope="module")
def index(source, tiny_backbone, tmp_path_factory):
    from cir_core.index.build import build

    out = tmp_path_factory.mktemp("idx") / "frames.index"
    build(str(source), tiny_backbone, None, out, workers=0, progress=False)
    return out


@pytest.fixture
def hub(tmp_path):
    return FolderStore(tmp_path / "hub", tmp_path / "hf-cache")


def pushed(source, index, hub, tmp_path, tag="v1"):
    return push_gallery(str(source), "org/frames", indexes=[str(index)], work=tmp_path / f"work-{tag}", tag=tag,
                        backend=hub, progress=False)


def test_push_writes_an_imagefolder_dataset_with_thumbnails_and_the_index(source, index, hub, tmp_path):
    done = pushed(source, index, hub, tmp_path)
    tree = tmp_path / "hub" / "datasets" / "org" / "frames" / "commits" / done.commit
    meta = [json.loads(line) for line in (tree / "frames" / "metadata.jsonl").read_text().splitlines()]
    assert len(meta) == N and meta[3] == {"file_name": "film1/shot_0003.jpg", "id": "film1/shot_0003.jpg",
                                          "character": meta[3]["character"], "caption": "frame 3", "box": [1, 2, 30, 40]}
    assert all((tree / "frames" / m["file_name"]).read_bytes() == (source.parent / m["id"]).read_bytes() for m in meta)
    card = (tree / "README.md").read_text()
    assert 'path:\n    - "frames/metadata.jsonl"\n    - "frames/**/*.jpg"' in card and "hf:org/frames@" in card
    info = json.loads((tree / "gallery.json").read_text())
    (slug, entry), = info["backbones"].items()
    assert entry == {"backbone": "cir-tiny-vit@random-seed0", "dim": 256, "n": N, "kind": "flat"}
    assert info["frames"] == N and info["columns"] == ["box", "caption", "character"]
    for f in ("embeddings.npy", "norms.npy", "build.json", "gallery.jsonl"):
        assert (tree / "index" / slug / f).is_file()
    assert not (tree / "index" / slug / "index.faiss").exists()  # exact: searched from the embeddings
    listed = json.loads((tree / MANIFEST).read_text())["files"]
    assert sorted(listed) == sorted(p.relative_to(tree).as_posix() for p in tree.rglob("*")
                                    if p.is_file() and p.name != MANIFEST)
    texts = [p.read_text(errors="ignore") for p in tree.rglob("*") if p.suffix in (".json", ".jsonl", ".md")]
    assert not any(str(source.parent) in t for t in texts)  # the pusher's local paths stay home


def test_the_app_opens_it_with_thumbnails_first_and_frames_when_opened(source, index, hub, tmp_path, tiny_backbone):
    from cir_core.imageio import load_image

    done = pushed(source, index, hub, tmp_path)
    calls = []
    got = open_hub_gallery("hf:org/frames@v1", tiny_backbone, progress_cb=lambda *a: calls.append(a),
                           backend=hub, env={}, progress=False)
    snap = tmp_path / "hf-cache" / "datasets--org--frames" / "snapshots" / done.commit
    assert got.ref.revision == done.commit and got.note is None and calls[-1][0] == calls[-1][1] > 0
    assert not (snap / "frames").exists()  # no frame downloaded at start-up
    g = got.gallery
    np.testing.assert_array_equal(got.prebuilt.embeddings, np.load(index / "embeddings.npy"))
    assert g.items[4].meta["character"] and g.items[4].meta["caption"] == "frame 4"
    thumb = g.load_image(4, 128)
    assert max(thumb.size) == 128 and not (snap / "frames").exists()
    full = g.load_image(4, 512)  # larger than a thumbnail: the full frame, fetched now
    assert full.size == (200, 150)
    assert np.array_equal(np.asarray(full), np.asarray(load_image(source.parent / g.items[4].id)))
    assert [p.relative_to(snap).as_posix() for p in (snap / "frames").rglob("*.jpg")] == [f"frames/{g.items[4].id}"]


def test_load_engine_from_a_folder_remote(source, index, tmp_path, monkeypatch):
    from cir_core.engine import load_engine
    from cir_core.settings import EngineConfig

    monkeypatch.setenv("CIR_LOCAL_HUB", str(tmp_path / "hub"))
    pushed(source, index, FolderStore(tmp_path / "hub", tmp_path / "hub" / ".cache"), tmp_path)
    eng = load_engine(EngineConfig(backbone="cir-tiny-vit", gallery="hf:org/frames@v1", methods=("sum",)))
    res = eng.compare(eng.view.reference_from_id("film0/shot_0002.jpg"), "Make the square blue.", k=3)
    assert res.methods[0].ok and len(res.methods[0].hits) == 3 and eng.view.gallery.name == "frames"
    assert eng.view.character(2) == json.loads((source).read_text().splitlines()[2])["character"]


def test_revision_pinning(source, index, hub, tmp_path, tiny_backbone):
    v1 = pushed(source, index, hub, tmp_path, "v1")
    rows = [json.loads(line) for line in source.read_text().splitlines()]
    other = tmp_path / "src2" / "frames.jsonl"  # the same frames, captions edited: the index still fits
    other.parent.mkdir()
    other.write_text("".join(json.dumps({**r, "path": str(source.parent / r["path"]), "caption": "v2"}) + "\n"
                             for r in rows))
    v2 = push_gallery(str(other), "org/frames", indexes=[str(index)], work=tmp_path / "w2", tag="v2",
                      backend=hub, progress=False)

    def caption(spec, env=None):
        return open_hub_gallery(spec, tiny_backbone, backend=hub, env=env or {}, progress=False).gallery.items[0].meta["caption"]

    assert caption("hf:org/frames@v1") == "frame 0" and caption("hf:org/frames") == "v2"  # main moved on
    assert caption(f"hf:org/frames@{v1.commit}") == "frame 0" and caption("hf:org/frames@v2") == "v2"
    assert caption("hf:org/frames", {"CIR_GALLERY_REVISION": "v1"}) == "frame 0"
    assert v1.commit != v2.commit
    with pytest.raises(StorageError, match="no such revision"):
        caption("hf:org/frames@v9")


def test_a_stale_or_foreign_index_folder_is_refused(source, index, hub, tmp_path):
    copy = tmp_path / "copy"
    shutil.copytree(source.parent, copy)
    with pytest.raises(GalleryError, match="holds item .* which the source gallery"):
        push_gallery(str(copy / "film0"), "org/x", indexes=[str(index)], work=tmp_path / "w", backend=hub, progress=False)
    with pytest.raises(GalleryError, match="is stale: item 'film0/shot_0000.jpg' changed"):
        push_gallery(str(copy / "frames.jsonl"), "org/x", indexes=[str(index)], work=tmp_path / "w", backend=hub,
                     progress=False)  # another copy of the files: other fingerprints
    assert not (tmp_path / "hub").exists()  # nothing pushed


def test_tampering_and_pickles_are_refused(source, index, hub, tmp_path, tiny_backbone):
    done = pushed(source, index, hub, tmp_path)
    tree = tmp_path / "hub" / "datasets" / "org" / "frames" / "commits" / done.commit
    slug = next((tree / "index").iterdir()).name
    emb = np.load(tree / "index" / slug / "embeddings.npy")
    np.save(tree / "index" / slug / "embeddings.npy", emb[::-1].copy())
    with pytest.raises(StorageError, match=f"index/{slug}/embeddings.npy does not match the sha256.*delete"):
        open_hub_gallery("hf:org/frames@v1", tiny_backbone, backend=hub, env={}, progress=False)
    np.save(tree / "index" / slug / "embeddings.npy", emb)
    shutil.rmtree(tmp_path / "hf-cache")
    got = open_hub_gallery("hf:org/frames@v1", tiny_backbone, backend=hub, env={}, progress=False)
    (tree / "frames" / "film1" / "shot_0005.jpg").write_bytes(b"\xff\xd8 not the frame that was pushed")
    with pytest.raises(GalleryError, match="frames/film1/shot_0005.jpg does not match the sha256"):
        got.gallery.load_image(got.gallery.index_of("film1/shot_0005.jpg"), 400)
    manifest = json.loads((tree / MANIFEST).read_text())
    manifest["files"]["frames/evil.pkl"] = {"sha256": "0" * 64, "size": 1}
    (tree / MANIFEST).write_text(json.dumps(manifest))
    shutil.rmtree(tmp_path / "hf-cache")  # a commit's files never change: the cache is trusted by commit
    with pytest.raises(StorageError, match="refusing pickle-capable file.*frames/evil.pkl"):
        open_hub_gallery("hf:org/frames@v1", tiny_backbone, backend=hub, env={}, progress=False)


def test_another_backbone_is_refused_naming_both(source, index, hub, tmp_path):
    from cir_core.backbone import load_backbone

    pushed(source, index, hub, tmp_path)
    other = load_backbone("cir-tiny-vit", None, seed=1)
    with pytest.raises(GalleryError, match=r"embedded with backbone 'cir-tiny-vit@random-seed0' \(dim 256\), "
                                           r"but the app runs 'cir-tiny-vit@random-seed1' \(dim 256\)"):
        open_hub_gallery("hf:org/frames@v1", other, backend=hub, env={}, progress=False)


def test_offline_from_the_cache(source, index, hub, tmp_path, tiny_backbone, caplog):
    done = pushed(source, index, hub, tmp_path)
    first = open_hub_gallery("hf:org/frames@v1", tiny_backbone, backend=hub, env={}, progress=False)
    first.gallery.load_image(2, 400)  # one frame opened while online
    hub.online = False
    with caplog.at_level(logging.WARNING):
        got = open_hub_gallery("hf:org/frames@v1", tiny_backbone, backend=hub, env={}, progress=False)
        assert got.note.startswith(f"offline: using the cached snapshot of org/frames at revision v1 "
                                   f"(commit {done.commit[:12]})")
        assert got.gallery.load_image(2, 400).size == (200, 150)  # cached: the full frame
        assert max(got.gallery.load_image(3, 400).size) == 160  # never fetched: its thumbnail, said so
    assert "full frame frames/film1/shot_0003.jpg unavailable" in caplog.text
    with pytest.raises(StorageError, match="the Hub is unreachable .* no snapshot"):
        open_hub_gallery("hf:org/frames@main", tiny_backbone, backend=hub, env={}, progress=False)


def test_cli_push_gallery_builds_and_pushes(source, tmp_path, capsys, tiny_backbone):
    local = str(tmp_path / "hub")
    assert hub_main(["push", "gallery", str(source), "org/cli", "--backbone", "cir-tiny-vit", "--tag", "v1",
                     "--local-hub", local, "--work", str(tmp_path / "w"), "--device", "cpu"]) == 0
    commit = capsys.readouterr().out.strip().splitlines()[-1]
    got = open_hub_gallery("hf:org/cli@v1", tiny_backbone, backend=FolderStore(local, tmp_path / "c"), env={},
                           progress=False)
    assert got.ref.revision == commit and len(got.gallery) == N
    assert hub_main(["push", "gallery", str(source), "org/cli", "--local-hub", local]) == 2
    assert "at least one --backbone" in capsys.readouterr().err


def test_real_huggingface_hub_client_and_cache_layout(source, index, hub, tmp_path, tiny_backbone, monkeypatch):
    """HFStore, i.e. huggingface_hub itself, against an HTTP stand-in for the Hub: the files land
    in its cache layout (blobs + snapshot links), frames only when opened, then offline from it."""
    from _fake_hub import FakeHub
    from huggingface_hub import constants

    done = pushed(source, index, hub, tmp_path)
    cache = tmp_path / "real-hf-cache"
    with FakeHub(tmp_path / "hub") as fake:
        monkeypatch.setattr(constants, "ENDPOINT", fake.url)  # what HF_ENDPOINT sets at import
        monkeypatch.setattr(constants, "HUGGINGFACE_CO_URL_TEMPLATE", fake.url + "/{repo_id}/resolve/{revision}/{filename}")
        monkeypatch.setattr(constants, "HF_HUB_OFFLINE", False)
        store = HFStore(cache_dir=str(cache))
        got = open_hub_gallery("hf:org/frames@v1", tiny_backbone, backend=store, env={}, progress=False)
        assert got.ref.revision == done.commit and got.note is None
        assert not any(p.startswith("frames/") for _, p in fake.files)
        got.gallery.load_image(7, 300)
        assert [p for m, p in fake.files if p.startswith("frames/") and m == "GET"] == ["frames/film1/shot_0007.jpg"]
    repo = cache / "datasets--org--frames"
    assert (repo / "refs" / "v1").read_text() == done.commit
    frame = repo / "snapshots" / done.commit / "frames" / "film1" / "shot_0007.jpg"
    assert frame.is_symlink() and frame.resolve().parent == (repo / "blobs").resolve()
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)  # the server is gone too
    again = open_hub_gallery("hf:org/frames@v1", tiny_backbone, backend=HFStore(cache_dir=str(cache)), env={},
                             progress=False)
    assert again.note.startswith("offline: using the cached snapshot of org/frames at revision v1")
    assert again.gallery.load_image(7, 300).size == (200, 150)


def test_frames_to_a_space_as_documented(source, tmp_path, monkeypatch, capsys):
    """docs/SPACES.md, "A gallery of your own frames": push gallery, push methods, the Space's
    variables, then the app's engine from them (the shipped backbone and checkpoints stand in for
    ViT-L-14 and its methods: no real weights here)."""
    from cir_core.engine import load_engine
    from cir_core.paths import DEFAULT_BACKBONE, DEFAULT_CHECKPOINTS
    from ui.settings import from_args

    local = str(tmp_path / "hub")
    assert hub_main(["push", "gallery", str(source.parent), "my-org/my-frames", "--backbone", DEFAULT_BACKBONE,
                     "--tag", "v1", "--local-hub", local, "--device", "cpu"]) == 0
    gallery = capsys.readouterr().out.strip().splitlines()[-1]
    assert hub_main(["push", "methods", str(DEFAULT_CHECKPOINTS), "my-org/cir-methods", "--tag", "v1",
                     "--local-hub", local]) == 0
    methods = capsys.readouterr().out.strip().splitlines()[-1]
    env = {"CIR_GALLERY": f"hf:my-org/my-frames@{gallery}", "CIR_CHECKPOINTS": f"my-org/cir-methods@{methods}"}
    monkeypatch.setenv("CIR_LOCAL_HUB", local)
    cfg = from_args([], env)
    assert cfg.uses_hub()  # so the app stays online for it
    eng = load_engine(cfg)
    res = eng.compare(eng.view.reference_from_id("film1/shot_0003.jpg"), "Make the square blue. Add a star.", k=4)
    assert [m.name for m in res.methods] == ["pact", "dice", "pace", "compose-only", "sum"]
    assert all(m.ok and len(m.hits) == 4 for m in res.methods), [m.error for m in res.methods]
    assert len(eng.view) == N and len(res.progression.steps) == 2
