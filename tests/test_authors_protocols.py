"""The authors' protocols as named options: benchmark images embedded as the official loaders
decode them (also through the embedding cache), SEARLE's targetpad preprocessing, and a
FashionIQ query text per method where its authors use their own (Pic2Word)."""
import json

import numpy as np
import pytest
import torch
import torchvision.transforms.functional as FT
from _bench_fixtures import cirr_query, write_cirr, write_fashioniq
from PIL import Image

import cir_core  # noqa: F401  (first: sets OMP_WAIT_POLICY before torch loads OpenMP)
from cir_core.backbone import load_backbone
from cir_core.benchmarks import fashioniq, load_benchmark
from cir_core.benchmarks.common import BenchmarkError, Embedded, StoredGallery, target_pad
from cir_core.eval.cli import main as eval_main
from cir_core.gallery import EmbeddingCache, GalleryItem
from cir_core.methods import create_method, get_method_class

N = [f"dev-{i}-0-img0" for i in range(12)]


class SearleTargetPad:
    """miccunifi/SEARLE src/data_utils.py `TargetPad`, as written there (the test's oracle)."""

    def __init__(self, target_ratio, size):
        self.size, self.target_ratio = size, target_ratio

    def __call__(self, image):
        w, h = image.size
        actual_ratio = max(w, h) / min(w, h)
        if actual_ratio < self.target_ratio:
            return image
        scaled_max_wh = max(w, h) / self.target_ratio
        hp = max(int((scaled_max_wh - w) / 2), 0)
        vp = max(int((scaled_max_wh - h) / 2), 0)
        return FT.pad(image, [hp, vp, hp, vp], 0, 'constant')


@pytest.mark.parametrize("size, mode", [((300, 100), "RGB"), ((90, 200), "L"), ((120, 110), "RGB"),
                                        ((50, 40), "P"), ((125, 100), "RGBA")])
def test_target_pad_is_searles(size, mode):
    img = Image.new(mode, size, 77 if mode in ("L", "P") else (10, 200, 30, 255)[:len(mode)])
    ours, theirs = target_pad(img), SearleTargetPad(1.25, 224)(img)
    assert ours.size == theirs.size and ours.mode == theirs.mode
    assert np.array_equal(np.asarray(ours), np.asarray(theirs))


def _exif_jpeg(path):
    im = Image.new("RGB", (40, 20), (200, 10, 10))
    im.paste((10, 10, 200), (0, 0, 10, 20))  # not symmetric: a rotation would show
    exif = im.getexif()
    exif[0x0112] = 6  # rotate 90° on display
    im.save(path, exif=exif.tobytes(), quality=95)


class Recorder:
    """A backbone stand-in that keeps the images the embedding path hands it."""

    id, dim = "recorder@1", 4

    def __init__(self):
        self.seen = []

    def encode_images(self, images, batch_size=64, progress=False, with_norms=False):
        self.seen += [im.copy() for im in images]
        emb = np.eye(self.dim, dtype=np.float32)[np.zeros(len(images), int)]
        return (emb, np.ones(len(images), np.float32)) if with_norms else emb


def test_the_embedding_path_decodes_benchmark_images_as_stored(tmp_path):
    """The official loaders apply no EXIF orientation and no JPEG draft decoding; the embedding
    cache must hand the model those pixels, not the app's upright, draft-decoded ones."""
    path = tmp_path / "a.jpg"
    _exif_jpeg(path)
    for pre, size in (("backbone", (40, 20)), ("targetpad", (40, 32))):
        g = StoredGallery("g", [GalleryItem("a", str(path), {})])
        g.preprocess = pre
        bb = Recorder()
        EmbeddingCache(tmp_path / f"c-{pre}").embed(g, bb)
        assert bb.seen[0].size == size and bb.seen[0].mode == "RGB"
        expect = Image.open(path).convert("RGB")
        if pre == "targetpad":
            expect = SearleTargetPad(1.25, 224)(Image.open(path)).convert("RGB")
        assert np.array_equal(np.asarray(bb.seen[0]), np.asarray(expect))
    assert "targetpad" in g.fingerprint(0) and "targetpad" not in StoredGallery("h", g.items).fingerprint(0)


def _cirr(tmp_path):
    qs = [cirr_query(1, N[0], N[1], "w:1=1", N[:6]), cirr_query(2, N[2], N[3], "w:3=1", N[:6])]
    root = write_cirr(tmp_path / "cirr", "val", N, qs)
    for i in (1, 2):  # wide images: targetpad changes them
        Image.new("RGB", (60, 12), (8 + 24 * i, 8, 128)).save(root / "img_raw" / "dev" / f"{N[i]}.png")
    return root


def test_targetpad_embeds_searles_pipeline_on_a_real_architecture(tmp_path):
    """`--preprocess targetpad`: the gallery row equals SEARLE's targetpad_transform (TargetPad,
    Resize(dim, bicubic), CenterCrop, RGB, ToTensor, Normalize) through the backbone."""
    bench = load_benchmark("cirr", _cirr(tmp_path), "val", preprocess="targetpad")
    bb = load_backbone("ViT-B-32")
    g = bench.gallery
    emb = EmbeddingCache(tmp_path / "cache").embed(g, bb)
    path = g.items[1].path
    from torchvision.transforms import CenterCrop, Compose, InterpolationMode, Normalize, Resize, ToTensor
    cfg = bb.model.visual.preprocess_cfg
    theirs = Compose([SearleTargetPad(1.25, 224), Resize(224, interpolation=InterpolationMode.BICUBIC),
                      CenterCrop(224), lambda im: im.convert("RGB"), ToTensor(),
                      Normalize(cfg["mean"], cfg["std"])])(Image.open(path))
    with torch.no_grad():
        want = torch.nn.functional.normalize(bb.model.encode_image(theirs[None]), dim=-1)[0].numpy()
    assert np.abs(emb[1] - want).max() < 1e-5
    plain = EmbeddingCache(tmp_path / "cache").embed(load_benchmark("cirr", _cirr(tmp_path / "b"), "val").gallery, bb)
    assert np.abs(plain[1] - want).max() > 1e-3  # the default centre crop is another input


def test_the_eval_cli_names_the_preprocessing(tmp_path, capsys):
    root = _cirr(tmp_path)
    out = tmp_path / "r.json"
    assert eval_main(["--benchmark", "cirr", "--root", str(root), "--methods", "sum,image-only",
                      "--backbone", "ViT-B-32", "--preprocess", "targetpad", "--json", str(out)]) == 0
    assert "images: targetpad 1.25" in capsys.readouterr().out
    assert "targetpad 1.25" in json.loads(out.read_text())["protocol"]
    with pytest.raises(BenchmarkError, match="--preprocess applies to benchmarks of image files"):
        load_benchmark("world", None, "val", n_queries=4, preprocess="targetpad")
    with pytest.raises(BenchmarkError, match="--preprocess must be one of backbone, targetpad"):
        load_benchmark("cirr", root, "val", preprocess="letterbox")


def test_pic2word_has_its_own_fashioniq_text():
    caps = ["is RED.", " has stripes? "]
    assert fashioniq.texts_for(caps, "pic2word") == [" has stripes?  and is RED."]  # as given, cap2 first
    with pytest.raises(BenchmarkError, match="no FashionIQ text form"):
        fashioniq.texts_for(caps, "nonsense")


def test_the_authors_protocol_gives_each_method_its_authors_form(tmp_path, tiny_backbone):
    root = tmp_path / "fiq"
    names = [f"d{i}" for i in range(8)]
    trips = [{"candidate": names[0], "target": names[1], "captions": ["is red", "is long"]},
             {"candidate": names[2], "target": names[3], "captions": ["is blue", "has sleeves"]}]
    for cat in fashioniq.CATEGORIES:
        write_fashioniq(root, cat, names, trips)
    bench = load_benchmark("fashioniq", root, "val", protocol="authors")
    assert bench.protocol.startswith(fashioniq.PROTOCOLS["authors"])
    emb = {k: np.eye(len(g), tiny_backbone.dim, dtype=np.float32) for k, g in bench.galleries().items()}
    norms = {k: np.full(len(g), 20.0, np.float32) for k, g in bench.galleries().items()}
    seen = {}
    for name in ("pic2word", "searle", "sum"):
        m = get_method_class(name)(tiny_backbone, {"arch": {"input_scale": 20.0}}) if name != "sum" \
            else create_method("sum", tiny_backbone)  # untrained φ: only the texts matter here
        texts = []
        m.compose = (lambda orig, texts=texts: lambda ref, t: texts.extend(t) or orig(ref, t))(m.compose)  # noqa: B023
        data = Embedded(emb, norms)
        res = bench.score(m, bench.compose(m, data), data, fashioniq.ScoreOpts("cosine"))
        seen[name] = (res.extra["fashioniq_text"], texts[:2])
    assert seen["pic2word"] == ("pic2word", ["is long and is red", "has sleeves and is blue"])
    assert seen["searle"] == ("both-orders", ["is red and is long", "is long and is red"])
    assert seen["sum"] == ("clip4cir", ["Is red and is long", "Is blue and has sleeves"])
