"""Image preprocessing of the captioning runner (reference-spec §6) on hand-checked cases."""

from __future__ import annotations

import base64
import io
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from capaudit.recap.preprocess import (
    IdTemplate, ImageFailure, Job, PrepOptions, check_file_image, decode, encode_jpeg, prepare, preprocess_bytes,
    target_size, to_rgb,
)


def _png(im: Image.Image, **kw) -> bytes:
    buf = io.BytesIO()
    im.save(buf, "PNG", **kw)
    return buf.getvalue()


def _jpeg(im: Image.Image, **kw) -> bytes:
    buf = io.BytesIO()
    im.save(buf, "JPEG", **kw)
    return buf.getvalue()


def _sent(url: str) -> Image.Image:
    assert url.startswith("data:image/jpeg;base64,")
    im = Image.open(io.BytesIO(base64.b64decode(url.split(",", 1)[1])))
    assert im.format == "JPEG" and im.mode == "RGB"
    return im


def _px(im: Image.Image) -> list:
    a = np.asarray(im)
    return [tuple(int(v) for v in row) for row in a.reshape(-1, a.shape[-1] if a.ndim == 3 else 1)]


def _close(a, b, tol=6):
    return all(abs(int(x) - int(y)) <= tol for x, y in zip(a, b))


# -- pixel rules ----------------------------------------------------------------------------------
def test_rgba_is_composited_on_white():
    im = Image.new("RGBA", (3, 1))
    im.putdata([(255, 0, 0, 0), (0, 0, 255, 255), (0, 0, 0, 128)])
    rgb = to_rgb(im)
    assert rgb.mode == "RGB"
    # transparent red -> white; opaque blue stays; half-transparent black -> 255 * (1 - 128/255) = 127
    assert _px(rgb) == [(255, 255, 255), (0, 0, 255), (127, 127, 127)]


def test_palette_with_transparency_and_grey_alpha():
    p = Image.new("P", (2, 1))
    p.putpalette([255, 0, 0, 0, 255, 0] + [0] * 762)
    p.putdata([0, 1])
    p.info["transparency"] = 0  # index 0 (red) is transparent
    assert _px(to_rgb(p)) == [(255, 255, 255), (0, 255, 0)]
    # round trip through a PNG file keeps the transparency key
    p2 = decode(_png(p, transparency=0))
    assert _px(to_rgb(p2)) == [(255, 255, 255), (0, 255, 0)]
    la = Image.new("LA", (2, 1))
    la.putdata([(0, 0), (10, 255)])
    assert _px(to_rgb(la)) == [(255, 255, 255), (10, 10, 10)]
    plain_p = Image.new("P", (1, 1))
    plain_p.putpalette([12, 34, 56] + [0] * 765)
    assert _px(to_rgb(plain_p)) == [(12, 34, 56)]


def test_16_bit_greyscale_is_scaled_not_saturated():
    a = np.array([[0, 256, 32768, 65535]], dtype=np.uint16)
    im = decode(_png(Image.fromarray(a)))
    assert im.mode.startswith("I")
    # v >> 8: 0 -> 0, 256 -> 1, 32768 -> 128, 65535 -> 255 (Pillow's own RGB conversion gives all 255)
    assert [p[0] for p in _px(to_rgb(im))] == [0, 1, 128, 255]
    f = Image.fromarray(np.array([[0.0, 0.5, 1.0]], dtype=np.float32))
    assert [p[0] for p in _px(to_rgb(f))] == [0, 128, 255]


def test_cmyk_jpeg_becomes_rgb():
    cmyk = Image.new("CMYK", (16, 16), (255, 0, 0, 0))  # pure cyan ink
    assert to_rgb(cmyk).getpixel((0, 0)) == (0, 255, 255)
    url, size, sent = preprocess_bytes(_jpeg(cmyk, quality=95))
    assert size == sent == (16, 16)
    assert _close(_sent(url).getpixel((8, 8)), (0, 255, 255))


def test_exif_orientation_is_applied():
    im = Image.new("RGB", (32, 16), (255, 0, 0))
    im.paste((0, 0, 255), (16, 0, 32, 16))  # stored: left half red, right half blue
    exif = Image.Exif()
    exif[0x0112] = 6  # display rotated 90 degrees clockwise
    url, size, sent = preprocess_bytes(_jpeg(im, quality=95, exif=exif.tobytes()))
    out = _sent(url)
    # rotating 90 degrees clockwise puts the stored left column on top: red above, blue below
    assert size == sent == out.size == (16, 32)
    assert _close(out.getpixel((8, 4)), (255, 0, 0), 40) and _close(out.getpixel((8, 27)), (0, 0, 255), 40)


# -- sizes ----------------------------------------------------------------------------------------
@pytest.mark.parametrize("size,expected", [
    ((1, 1), (1, 1)),                 # tiny: untouched
    ((640, 480), (640, 480)),         # COCO size: shorter edge 480 <= 768
    ((768, 5000), (768, 5000)),       # shorter edge exactly 768: untouched
    ((4000, 3000), (1024, 768)),      # 4000 * 768 / 3000 = 1024
    ((3001, 1000), (2304, 768)),      # 2304.768 truncated
    ((769, 2000), (768, 1997)),       # 2000 * 768 / 769 = 1997.4 truncated
    ((1000, 1000), (768, 768)),
])
def test_target_size(size, expected):
    assert target_size(*size) == expected


def test_huge_image_resized_with_lanczos_and_jpeg_q90():
    rng = np.random.default_rng(0)
    im = Image.fromarray(rng.integers(0, 256, (2000, 3000, 3), dtype=np.uint8))  # 3000 x 2000
    data = _png(im)
    url, size, sent = preprocess_bytes(data)
    assert size == (3000, 2000) and sent == (1152, 768)
    expected = encode_jpeg(im.resize((1152, 768), Image.Resampling.LANCZOS), 90)
    assert base64.b64decode(url.split(",", 1)[1]) == expected  # exactly LANCZOS + quality 90


def test_tiny_image_roundtrip():
    url, size, sent = preprocess_bytes(_png(Image.new("RGB", (1, 1), (200, 100, 50))))
    assert size == sent == (1, 1) and _sent(url).size == (1, 1)


# -- failures -------------------------------------------------------------------------------------
def test_truncated_jpeg_zero_byte_and_unsupported_fail_with_reason():
    rng = np.random.default_rng(1)
    full = _jpeg(Image.fromarray(rng.integers(0, 256, (64, 64, 3), dtype=np.uint8)), quality=90)
    with pytest.raises(ImageFailure) as e:
        preprocess_bytes(full[: len(full) // 2], name="cut.jpg")
    assert e.value.stage == "decode" and "cut.jpg" in e.value.reason and "truncated" in e.value.reason
    with pytest.raises(ImageFailure) as e:
        preprocess_bytes(b"", name="empty.jpg")
    assert e.value.stage == "read" and e.value.reason == "empty.jpg: zero-byte file"
    with pytest.raises(ImageFailure) as e:
        preprocess_bytes(b"<svg xmlns='http://www.w3.org/2000/svg'/>", name="vector.svg")
    assert e.value.reason == "vector.svg: unsupported or unrecognised image format"
    with pytest.raises(ImageFailure) as e:
        check_file_image("x.png", b"\x89PNG\r\n\x1a\n" + b"\0" * 20)
    assert e.value.stage == "decode"


TMPL = IdTemplate.build("recap_caption", 1, "m", None, "p@1#x", {"type": "string"}, {"max_tokens": 8},
                        PrepOptions().fingerprint())


def test_prepare_counts_failures_with_path(tmp_path: Path):
    (tmp_path / "zero.jpg").write_bytes(b"")
    out = prepare(Job("zero", str(tmp_path / "zero.jpg"), file=str(tmp_path / "zero.jpg")), TMPL, PrepOptions())
    assert out.url is None and out.stage == "read" and out.error == f"{tmp_path / 'zero.jpg'}: zero-byte file"
    # a zero-byte file still has a content hash and a request id (so a later success replaces it)
    assert out.image_key == "sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
    assert out.request_id is not None
    missing = prepare(Job("gone", "/nonexistent/gone.png", file="/nonexistent/gone.png"), TMPL, PrepOptions())
    assert missing.error == "/nonexistent/gone.png: file not found" and missing.request_id is None
    big = tmp_path / "big.png"
    big.write_bytes(_png(Image.fromarray(np.random.default_rng(2).integers(0, 256, (64, 64, 3), dtype=np.uint8))))
    opts = PrepOptions(mode="file", max_file_url_bytes=100)
    out = prepare(Job("big", str(big), file=str(big)), TMPL, opts)
    assert out.stage == "size" and "over the limit of 100 bytes" in out.error
    ok = prepare(Job("big", str(big), file=str(big)), TMPL, PrepOptions(mode="file"))
    assert ok.error is None and ok.url == big.resolve().as_uri() and ok.size == (64, 64)
    embedded = prepare(Job("e", "shard.tar#e.png", data=big.read_bytes()), TMPL, PrepOptions(mode="file"))
    assert embedded.stage == "input" and "file mode needs images on disk" in embedded.error


def test_prepare_skips_answered_without_decoding(tmp_path: Path):
    p = tmp_path / "a.png"
    p.write_bytes(_png(Image.new("RGB", (8, 8))))
    first = prepare(Job("a", str(p), file=str(p)), TMPL, PrepOptions())
    assert first.url and first.request_id
    again = prepare(Job("a", str(p), file=str(p)), TMPL, PrepOptions(), answered=frozenset({first.request_id}))
    assert again.skipped == "answered" and again.url is None
    # same bytes under another id, or another context, is another request
    assert prepare(Job("b", str(p), file=str(p)), TMPL, PrepOptions()).request_id != first.request_id
    assert prepare(Job("a", str(p), file=str(p), context={"rating": "g"}), TMPL, PrepOptions()).request_id \
        != first.request_id
