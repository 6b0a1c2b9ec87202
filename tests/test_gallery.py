import json
import os

import numpy as np
import pytest
from PIL import Image

from cir_core.errors import GalleryError, ImageLoadError
from cir_core.gallery import EmbeddingCache, Gallery, GalleryItem


class FakeBackbone:
    """Deterministic stand-in: embedding = normalised mean colour + size, counts what it encodes."""

    def __init__(self, id: str = "fake@1"):
        self.id, self.dim = id, 5
        self.calls, self.encoded = 0, 0

    def encode_images(self, images, batch_size=64, progress=False, with_norms=False):
        self.calls += 1
        self.encoded += len(images)
        rows = [[*np.asarray(im, np.float32).mean((0, 1)), im.width, 1.0] for im in images]
        x = np.asarray(rows, np.float32).reshape(-1, self.dim)
        norms = np.linalg.norm(x, axis=1)
        return (x / norms[:, None], norms) if with_norms else x / norms[:, None]


def _png(path, colour, size=(8, 6)):
    path.parent.mkdir(parents=True, exist_ok=True)
    Image.new("RGB", size, colour).save(path)


@pytest.fixture
def folder(tmp_path):
    root = tmp_path / "imgs"
    _png(root / "b.png", (255, 0, 0))
    _png(root / "a.jpg", (0, 255, 0))
    _png(root / "sub" / "c.PNG", (0, 0, 255))
    (root / "notes.txt").write_text("not an image")
    _png(root / "._a.jpg", (1, 1, 1))  # macOS resource-fork name: skipped
    return root


def test_from_folder_sorted_relative_ids(folder):
    g = Gallery.from_folder(folder)
    assert g.ids == ["a.jpg", "b.png", "sub/c.PNG"] and len(g) == 3 and g.name == "imgs"
    assert g.index_of("sub/c.PNG") == 2
    assert Gallery.from_folder(folder, recursive=False).ids == ["a.jpg", "b.png"]
    assert Gallery.from_folder(folder, exts=(".png",)).ids == ["b.png", "sub/c.PNG"]
    img = g.load_image(1)
    assert img.mode == "RGB" and img.size == (8, 6) and img.getpixel((0, 0)) == (255, 0, 0)
    assert g.load_image(1, size=4).size == (4, 3)
    with pytest.raises(GalleryError, match="nope"):
        g.index_of("nope")


def test_from_folder_errors_name_the_folder(tmp_path):
    with pytest.raises(GalleryError, match="missing"):
        Gallery.from_folder(tmp_path / "missing")
    (tmp_path / "empty").mkdir()
    with pytest.raises(GalleryError, match="empty"):
        Gallery.from_folder(tmp_path / "empty")


def test_fingerprint_from_file_stat_or_meta(folder):
    g = Gallery.from_folder(folder)
    fp = g.fingerprint(0)
    assert fp.startswith(str((folder / "a.jpg").resolve()) + "|")
    gen = Gallery.from_items("w", [GalleryItem("x", None, {"fingerprint": "spec-1", "character": 3})])
    assert gen.fingerprint(0) == "spec-1"


def test_from_items_with_image_fn_renders_at_size():
    seen = []

    def render(item, size):
        seen.append((item.id, size))
        return Image.new("RGB", (size or 16, size or 16), tuple(item.meta["rgb"]))

    g = Gallery.from_items("world", [GalleryItem("s0", None, {"rgb": [1, 2, 3]})], image_fn=render)
    assert g.load_image(0, size=32).size == (32, 32) and seen == [("s0", 32)]
    with pytest.raises(GalleryError, match="duplicate"):
        Gallery.from_items("w", [GalleryItem("a"), GalleryItem("a")])


def test_from_manifest_jsonl_and_csv(folder):
    jl = folder / "m.jsonl"
    jl.write_text(
        json.dumps({"path": "b.png", "id": "red", "character": 3}) + "\n\n"
        + json.dumps({"path": str(folder / "a.jpg")}) + "\n"
    )
    g = Gallery.from_manifest(jl)
    assert g.name == "m" and g.ids == ["red", str(folder / "a.jpg")]
    assert g.items[0].meta == {"character": 3} and g.items[0].path == str(folder / "b.png")
    cs = folder / "m.csv"
    cs.write_text("id,path,split\nx,sub/c.PNG,test\n")
    g = Gallery.from_manifest(cs)
    assert g.ids == ["x"] and g.items[0].meta == {"split": "test"}
    assert g.load_image(0).getpixel((0, 0)) == (0, 0, 255)


def test_from_manifest_errors_name_the_line(folder):
    bad = folder / "bad.jsonl"
    bad.write_text(json.dumps({"path": "b.png"}) + "\n" + json.dumps({"path": "gone.png"}) + "\n")
    with pytest.raises(GalleryError, match="line 2.*gone.png"):
        Gallery.from_manifest(bad)
    bad.write_text(json.dumps({"path": "b.png"}) + "\n{oops\n")
    with pytest.raises(GalleryError, match="line 2"):
        Gallery.from_manifest(bad)
    cs = folder / "bad.csv"
    cs.write_text("path\nb.png\nmissing.jpg\n")
    with pytest.raises(GalleryError, match="line 3.*missing.jpg"):
        Gallery.from_manifest(cs)
    cs.write_text("file\nb.png\n")
    with pytest.raises(GalleryError, match="path"):
        Gallery.from_manifest(cs)
    with pytest.raises(GalleryError, match="nothere"):
        Gallery.from_manifest(folder / "nothere.csv")


def test_cache_encodes_once_then_only_changes(folder, tmp_path):
    cache, bb = EmbeddingCache(tmp_path / "cache"), FakeBackbone()
    g = Gallery.from_folder(folder)
    calls = []
    first = cache.embed(g, bb, batch_size=2, progress_cb=lambda d, t: calls.append((d, t)))
    assert first.shape == (3, 5) and first.dtype == np.float32
    assert bb.encoded == 3 and bb.calls == 2 and calls == [(0, 3), (2, 3), (3, 3)]
    d = cache.folder(g, bb)
    assert json.loads((d / "backbone.json").read_text())["id"] == bb.id
    assert len(json.loads((d / "keys.json").read_text())) == 3

    # Restart with nothing changed: nothing encoded, same rows.
    bb2 = FakeBackbone()
    np.testing.assert_array_equal(cache.embed(Gallery.from_folder(folder), bb2), first)
    assert bb2.calls == 0

    # One changed file, one removed, one added: only the changed and the added are encoded.
    _png(folder / "b.png", (9, 9, 9), size=(10, 6))
    os.utime(folder / "b.png", ns=(1, 1))  # a different mtime even on coarse-clock filesystems
    (folder / "a.jpg").unlink()
    _png(folder / "z.png", (5, 5, 5))
    g3, bb3 = Gallery.from_folder(folder), FakeBackbone()
    got = cache.embed(g3, bb3)
    assert bb3.encoded == 2 and g3.ids == ["b.png", "sub/c.PNG", "z.png"]
    np.testing.assert_allclose(got, FakeBackbone().encode_images([g3.load_image(i) for i in range(3)]))
    assert len(json.loads((d / "keys.json").read_text())) == 3


def test_cache_new_backbone_id_reencodes_in_its_own_folder(folder, tmp_path):
    cache, g = EmbeddingCache(tmp_path / "cache"), Gallery.from_folder(folder)
    cache.embed(g, FakeBackbone("a"))
    other = FakeBackbone("b")
    cache.embed(g, other)
    assert other.encoded == 3 and cache.folder(g, other) != cache.folder(g, FakeBackbone("a"))


def test_cache_survives_kill_between_writes(folder, tmp_path, monkeypatch):
    cache, g = EmbeddingCache(tmp_path / "cache"), Gallery.from_folder(folder)
    good = cache.embed(g, FakeBackbone())
    _png(folder / "b.png", (9, 9, 9), size=(10, 6))
    os.utime(folder / "b.png", ns=(1, 1))
    real_replace = os.replace

    def killed(src, dst):  # the process dies right after embeddings.npy is replaced
        if str(dst).endswith("keys.json"):
            raise KeyboardInterrupt
        real_replace(src, dst)

    monkeypatch.setattr(os, "replace", killed)
    with pytest.raises(KeyboardInterrupt):
        cache.embed(g, FakeBackbone())
    monkeypatch.setattr(os, "replace", real_replace)
    # No keys.json -> old keys are never paired with new rows: full, correct re-encode.
    bb = FakeBackbone()
    got = cache.embed(g, bb)
    assert bb.encoded == 3
    np.testing.assert_array_equal(got[[0, 2]], good[[0, 2]])


def test_cache_unreadable_image_names_the_file(folder, tmp_path):
    (folder / "broken.png").write_bytes(b"not a png")
    with pytest.raises(ImageLoadError, match="broken.png"):
        EmbeddingCache(tmp_path / "c").embed(Gallery.from_folder(folder), FakeBackbone())


def test_cache_generated_items_use_meta_fingerprint(tmp_path):
    def render(item, size):
        return Image.new("RGB", (size or 8, size or 8), (item.meta["v"],) * 3)

    items = [GalleryItem(f"s{i}", None, {"fingerprint": f"spec{i}", "v": i * 40}) for i in range(4)]
    cache = EmbeddingCache(tmp_path / "c")
    cache.embed(Gallery.from_items("world/v1", items, render), FakeBackbone())
    bb = FakeBackbone()
    items[1] = GalleryItem("s1", None, {"fingerprint": "spec1-changed", "v": 200})
    out = cache.embed(Gallery.from_items("world/v1", items, render), bb)
    assert bb.encoded == 1 and out.shape == (4, 5)


def test_cache_checkpoints_so_a_killed_ingest_resumes(tmp_path):
    def render(item, size):
        return Image.new("RGB", (8, 8), (item.meta["v"],) * 3)

    g = Gallery.from_items("w", [GalleryItem(f"s{i}", None, {"v": i}) for i in range(5)], render)
    cache = EmbeddingCache(tmp_path / "c")
    cache.checkpoint_s = 0.0  # save after the first batch

    class Dies(FakeBackbone):
        def encode_images(self, images, batch_size=64, progress=False, with_norms=False):
            if self.calls == 1:  # dies on the second batch
                raise KeyboardInterrupt
            return super().encode_images(images, batch_size, progress, with_norms)

    with pytest.raises(KeyboardInterrupt):
        cache.embed(g, Dies(), batch_size=2)
    bb = FakeBackbone()
    out = cache.embed(g, bb, batch_size=2)
    assert bb.encoded == 3  # the first batch (2 rows) was checkpointed before the kill
    np.testing.assert_allclose(out, FakeBackbone().encode_images([g.load_image(i) for i in range(5)]))


def test_shipped_embeddings_give_a_cold_cache_a_head_start_only_when_they_match(tmp_path, folder):
    from cir_core.gallery import read_shipped, shipped_name, write_shipped

    g = Gallery.from_folder(folder)
    bb = FakeBackbone()
    emb, norms = EmbeddingCache(tmp_path / "first").embed(g, bb, with_norms=True)
    keys = [g.fingerprint(i) for i in range(len(g))]
    shipped = tmp_path / "shipped"
    write_shipped(shipped / shipped_name(g), keys, emb, norms, bb)
    fresh = FakeBackbone()
    got, got_norms = EmbeddingCache(tmp_path / "cold", shipped=shipped).embed(g, fresh, with_norms=True)
    assert fresh.encoded == 0  # nothing encoded: every row came from the shipped file (float16)
    np.testing.assert_allclose(got, emb, atol=2e-3)
    np.testing.assert_array_equal(got_norms, norms)  # raw norms travel in float32
    other = FakeBackbone(id="fake@2")  # another backbone: the shipped rows do not apply
    assert read_shipped(shipped / shipped_name(g), other) == {}
    EmbeddingCache(tmp_path / "cold2", shipped=shipped).embed(g, other)
    assert other.encoded == len(g)
    (shipped / shipped_name(g)).write_bytes(b"not an npz")  # unreadable: ignored, not fatal
    assert read_shipped(shipped / shipped_name(g), bb) == {}


class _Source:
    """A `RowSource` of n items that counts its reads; `drop` rows it never returns."""

    def __init__(self, n: int, drop: frozenset[int] = frozenset()):
        self.n, self.drop, self.reads = n, drop, []

    def __len__(self):
        return self.n

    def items(self, rows):
        self.reads.append(list(rows))
        return [GalleryItem(f"id{r}", None, {"row": r}) for r in rows if r not in self.drop]

    def row_of(self, item_id):
        return int(item_id[2:]) if item_id.startswith("id") and int(item_id[2:]) < self.n else None

    def find(self, words, limit):
        return []


def test_remote_gallery_reads_rows_once_and_a_source_that_loses_one_is_an_error():
    from cir_core.gallery import RemoteGallery

    src = _Source(10)
    g = RemoteGallery("remote", src, keep=4)
    g.prefetch([3, 1, 3])
    assert src.reads == [[1, 3]] and g.items[1].id == "id1" and g.items[-1].id == "id9"
    assert src.reads == [[1, 3], [9]]  # row 1 remembered, row 9 read alone
    assert g.index_of("id7") == 7 and [it.id for it in g.items[2:4]] == ["id2", "id3"]
    with pytest.raises(IndexError, match="row 10"):
        g.items[10]
    lossy = RemoteGallery("lossy", _Source(10, drop=frozenset({5})))
    with pytest.raises(GalleryError, match="gave 0 items for 1 rows"):
        lossy.items[5]  # once: None, handed on as an item
    with pytest.raises(GalleryError, match="gave 2 items for 3 rows"):
        lossy.prefetch([4, 5, 6])  # once: row 5 silently remembered as item id6
