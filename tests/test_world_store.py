"""The world split on disk (cir_core.world.store): exact round trip, keyed by the generator's
code, bad files ignored, and the shipped file current with the code."""
import gzip
import json

import pytest

from cir_core.engine.core import SHOWCASE, open_gallery
from cir_core.paths import ASSETS_DIR
from cir_core.world import build_benchmark, store
from cir_core.world.spec import Character, Obj, Scene


@pytest.fixture(scope="module")
def small():
    return build_benchmark("test", 40, showcase=2)


def test_round_trip_is_exact(small, tmp_path):
    back = store.read(store.write(small, tmp_path / "s.json.gz"))
    assert back == small
    # queries share their scenes with the items, as a built split does
    assert back.queries[3].target is back.items[back.target_idx[3]].scene
    assert back.gt_sets() == small.gt_sets() and back.edit_ok_sets() == small.edit_ok_sets()


def test_key_follows_parameters_and_code(monkeypatch, tmp_path):
    keys = {store.split_key("test", 40, 2), store.split_key("test", 41, 2),
            store.split_key("val", 40, 2), store.split_key("test", 40, 0)}
    assert len(keys) == 4
    before = store.split_key("test", 40, 2)
    fake = tmp_path / "world"
    fake.mkdir()
    for name in store._SOURCES:
        (fake / name).write_bytes((store.Path(store.__file__).parent / name).read_bytes())
    (fake / "data.py").write_text((fake / "data.py").read_text() + "\n# an edit\n")
    monkeypatch.setattr(store, "__file__", str(fake / "store.py"))
    assert store.split_key("test", 40, 2) != before  # an older file is a miss, never a stale hit


def test_load_or_build_caches_then_reads(small, tmp_path, monkeypatch):
    built = store.load_or_build("test", 40, 2, [tmp_path], cache=tmp_path)
    assert built == small and (tmp_path / store.file_name("test", 40, 2)).is_file()
    monkeypatch.setattr(store, "build_benchmark", lambda *a, **k: pytest.fail("built twice"))
    assert store.load_or_build("test", 40, 2, [tmp_path]) == small


@pytest.mark.parametrize("damage", ["truncated", "not gzip", "corrupt deflate", "not an object", "bad scene",
                                    "bad edit object", "index outside", "wrong format", "missing key"])
def test_a_bad_file_is_skipped_for_the_build(small, tmp_path, damage, caplog):
    path = store.write(small, tmp_path / store.file_name("test", 40, 2))
    d = store.to_json(small)
    if damage == "truncated":
        path.write_bytes(path.read_bytes()[:500])
    elif damage == "not gzip":
        path.write_text("{}")
    elif damage == "corrupt deflate":  # the header is fine, the compressed stream is not
        raw = bytearray(path.read_bytes())
        raw[200:260] = bytes(b ^ 0x5A for b in raw[200:260])
        path.write_bytes(bytes(raw))
    elif damage == "not an object":
        path.write_bytes(gzip.compress(b"[]"))
    else:
        if damage == "bad scene":
            d["items"][5][1][0] = "moon"  # an unknown background
        elif damage == "bad edit object":
            q = next(q for q in d["queries"] if any(isinstance(e[2], dict) for e in q["edits"]))
            next(e for e in q["edits"] if isinstance(e[2], dict))[2]["obj"][0] = "blob"
        elif damage == "index outside":
            d["reference_idx"][0] = -1
        elif damage == "wrong format":
            d["format"] = 99
        else:
            del d["queries"][0]["edits"]
        path.write_bytes(gzip.compress(json.dumps(d).encode()))
    assert store.load_or_build("test", 40, 2, [tmp_path]) == small
    assert str(path) in caplog.text


def test_invalid_scenes_name_the_problem():
    ok = Obj("star", "red", "small", "left")
    for scene, msg in [(Scene("moon", Character(0, "left", "left"), (ok,)), "unknown background 'moon'"),
                       (Scene("beach", Character(30, "left", "left"), (ok,)), "identity 30"),
                       (Scene("beach", Character(0, "up", "left"), (ok,)), "character position 'up'"),
                       (Scene("beach", Character(0, "left", "up"), (ok,)), "facing 'up'"),
                       (Scene("beach", Character(0, "left", "left"), ()), "1-3 objects"),
                       (Scene("beach", Character(0, "left", "left"), (ok, ok)), "distinct"),
                       (Scene("beach", Character(0, "left", "left"),
                              (ok, Obj("cross", "red", "small", "left"))), "one object per slot"),
                       (Scene("beach", Character(0, "left", "left"), (Obj("blob", "red", "small", "left"),)),
                        "bad object")]:
        with pytest.raises(ValueError, match=msg):
            scene.validate()


def test_the_shipped_split_is_the_generators(tmp_path):
    """The app's default world split ships (a clean clone's first start generates nothing); when
    this fails the world's code changed: run `python -m training.ship_gallery`."""
    name = store.file_name("test", 1000, SHOWCASE)
    shipped = ASSETS_DIR / "world" / name
    assert shipped.is_file(), f"{shipped} missing: run python -m training.ship_gallery"
    assert [p.name for p in shipped.parent.glob("*.json.gz")] == [name], "an older split is still shipped"
    assert store.read(shipped) == build_benchmark("test", 1000, showcase=SHOWCASE)
    gallery, bench = open_gallery("world", 1000, 32, cache=tmp_path)
    assert len(gallery) == len(bench.items) and not any(tmp_path.rglob("*.json.gz"))  # read, not built


def test_an_unwritable_cache_costs_only_the_build(small, tmp_path, monkeypatch, caplog):
    def refuse(*a, **k):
        raise PermissionError("read-only file system")

    monkeypatch.setattr(store, "write", refuse)
    assert store.load_or_build("test", 40, 2, [tmp_path], cache=tmp_path) == small
    assert "could not cache the world split" in caplog.text


def test_without_the_generators_source_the_split_is_built_uncached(small, tmp_path, monkeypatch, caplog):
    monkeypatch.setattr(store, "_SOURCES", ("no_such_module.py",))
    assert store.load_or_build("test", 40, 2, [tmp_path], cache=tmp_path) == small
    assert not any(tmp_path.iterdir()) and "cannot key the world split" in caplog.text


def test_a_failed_write_leaves_the_old_file_and_no_temp_file(small, tmp_path, monkeypatch):
    path = store.write(small, tmp_path / "s.json.gz")
    before = path.read_bytes()
    real = store.gzip.GzipFile.write
    monkeypatch.setattr(store.gzip.GzipFile, "write", lambda self, d: (real(self, d[:10]), 1 / 0))
    with pytest.raises(ZeroDivisionError):  # fails half-way through the file
        store.write(small, path)
    assert path.read_bytes() == before and sorted(p.name for p in tmp_path.iterdir()) == ["s.json.gz"]
