"""load_image: every mode to RGB, EXIF orientation, and a named ImageLoadError for bad input."""
import io

import numpy as np
import pytest
from PIL import Image

from cir_core.errors import ImageLoadError
from cir_core.imageio import load_image


def _save(img: Image.Image, path, **kw):
    img.save(path, **kw)
    return path


def test_exif_orientation_applied(tmp_path):
    img = Image.new("RGB", (40, 20), (200, 30, 30))
    exif = Image.Exif()
    exif[0x0112] = 6  # "rotate 90 CW to display": stored 40x20, shown 20x40
    path = _save(img, tmp_path / "rot.jpg", exif=exif.tobytes())
    out = load_image(path)
    assert out.mode == "RGB" and out.size == (20, 40)


def test_rgba_composited_on_white(tmp_path):
    img = Image.new("RGBA", (8, 8), (0, 0, 255, 0))
    img.putpixel((0, 0), (0, 0, 255, 255))
    out = np.asarray(load_image(_save(img, tmp_path / "a.png")))
    assert tuple(out[0, 0]) == (0, 0, 255) and tuple(out[4, 4]) == (255, 255, 255)


def test_la_composited_on_white(tmp_path):
    img = Image.new("LA", (4, 4), (0, 0))
    out = np.asarray(load_image(_save(img, tmp_path / "la.png")))
    assert out.shape == (4, 4, 3) and (out == 255).all()


def test_palette_transparency_composited_on_white(tmp_path):
    img = Image.new("P", (4, 4), 0)
    img.putpalette([0, 0, 0, 255, 0, 0] + [0] * 762)
    img.putpixel((1, 1), 1)
    path = _save(img, tmp_path / "p.png", transparency=0)
    out = np.asarray(load_image(path))
    assert tuple(out[0, 0]) == (255, 255, 255) and tuple(out[1, 1]) == (255, 0, 0)


def test_16bit_gray_scaled_not_clipped(tmp_path):
    arr = np.array([[0, 32768, 65535]], dtype=np.uint16)
    path = _save(Image.fromarray(arr), tmp_path / "g16.png")
    with Image.open(path) as check:
        assert check.mode.startswith("I")
    out = np.asarray(load_image(path))[0, :, 0]
    assert out[0] == 0 and 126 <= out[1] <= 129 and out[2] == 255


def test_float_image_scaled(tmp_path):
    img = Image.fromarray(np.array([[0.0, 0.5, 1.0]], dtype=np.float32), mode="F")
    out = np.asarray(load_image(img))[0, :, 0]
    assert out[0] == 0 and 126 <= out[1] <= 129 and out[2] == 255


@pytest.mark.parametrize("mode, ext", [("CMYK", "jpg"), ("1", "png"), ("L", "png"), ("RGB", "webp")])
def test_other_modes_to_rgb(tmp_path, mode, ext):
    path = _save(Image.new(mode, (10, 6)), tmp_path / f"x.{ext}")
    out = load_image(path)
    assert out.mode == "RGB" and out.size == (10, 6)


def test_animated_gif_first_frame(tmp_path):
    frames = [Image.new("P", (6, 6), i) for i in range(3)]
    path = tmp_path / "anim.gif"
    frames[0].save(path, save_all=True, append_images=frames[1:])
    assert load_image(path).size == (6, 6)


def test_bytes_and_pil_inputs():
    buf = io.BytesIO()
    Image.new("RGB", (5, 5), (1, 2, 3)).save(buf, format="PNG")
    assert load_image(buf.getvalue()).getpixel((0, 0)) == (1, 2, 3)
    assert load_image(Image.new("L", (3, 3), 7)).getpixel((0, 0)) == (7, 7, 7)


def test_truncated_jpeg_named(tmp_path):
    rng = np.random.default_rng(0)
    img = Image.fromarray(rng.integers(0, 255, (64, 64, 3), dtype=np.uint8))
    data = (_save(img, tmp_path / "full.jpg")).read_bytes()
    path = tmp_path / "cut.jpg"
    path.write_bytes(data[: len(data) // 2])
    with pytest.raises(ImageLoadError, match="cut.jpg"):
        load_image(path)


@pytest.mark.parametrize("name, content", [("noise.jpg", bytes(range(256)) * 4),
                                           ("notes.png", b"just some text, not a PNG\n")])
def test_not_an_image_named(tmp_path, name, content):
    path = tmp_path / name
    path.write_bytes(content)
    with pytest.raises(ImageLoadError, match=name):
        load_image(path)


def test_bad_bytes_say_uploaded():
    with pytest.raises(ImageLoadError, match="uploaded image"):
        load_image(b"\x89PNG garbage")


def test_missing_file_and_directory(tmp_path):
    with pytest.raises(ImageLoadError, match="nope.png.*not found"):
        load_image(tmp_path / "nope.png")
    with pytest.raises(ImageLoadError, match="directory"):
        load_image(tmp_path)


def test_bomb_guard_reads_header_only(tmp_path):
    # 20000x20000 1-bit compresses to a few KB but would be 400 M pixels decoded.
    path = _save(Image.new("1", (20000, 20000)), tmp_path / "bomb.png")
    assert path.stat().st_size < 200_000
    with pytest.raises(ImageLoadError, match="bomb.png.*exceeds"):
        load_image(path, max_pixels=1_000_000)
    with pytest.raises(ImageLoadError, match="exceeds"):
        load_image(path.read_bytes(), max_pixels=1_000_000)


def test_pil_decompression_bomb_error_converted(tmp_path, monkeypatch):
    path = _save(Image.new("L", (100, 100)), tmp_path / "small.png")
    monkeypatch.setattr(Image, "MAX_IMAGE_PIXELS", 1000)  # PIL refuses at > 2x this
    with pytest.raises(ImageLoadError, match="small.png"):
        load_image(path, max_pixels=10**9)
