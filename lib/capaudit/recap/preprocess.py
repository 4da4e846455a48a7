"""Image preprocessing of the captioning runner (reference-spec §6), run in worker processes.

``data`` mode (default), exactly as §6 with two documented completions:

1. decode with Pillow; apply the EXIF orientation (``ImageOps.exif_transpose``) so the model sees
   the picture as a viewer shows it (§6 is silent; the re-encoded JPEG carries no EXIF, so without
   this a rotated phone photo would be sent sideways);
2. images with transparency (RGBA, LA, PA, ``P``/``L``/``RGB`` with a ``transparency`` key) are
   composited on white (§6: "RGBA → composite on white"; palette and grey+alpha images follow
   the same rule); 16-bit greyscale (``I;16*``, ``I``) is scaled to 8 bit (``v >> 8``, Pillow's
   own conversion would saturate it to white), float ``F`` is clipped (scaled by 255 when all
   values lie in [0, 1]); every other mode is converted to RGB (CMYK included);
3. if the shorter edge exceeds ``max_short_edge`` (768) the image is resized with LANCZOS so the
   shorter edge is exactly 768 and the longer one ``long * 768 // short`` (integer truncation,
   aspect kept);
4. encoded as JPEG quality 90 and sent as a ``data:image/jpeg;base64,`` URL.

``file`` mode sends ``file://`` URLs of the original files, unresized; files over 64 MiB are a
failure (§6 "skip if > 64 MiB"), and Pillow only checks the header (``verify``), so zero-byte,
unsupported or header-corrupt files fail here while a truncated body is left to the server.

Every failure is an :class:`ImageFailure` with a reason naming the file; the runner records it as
a failed image (never a crash, never marked done). :func:`prepare` is the worker entry point: it
reads the bytes, hashes them (``image_key = sha256:<hex>``), computes the request id, skips ids
already answered, and only then decodes. The module imports nothing heavy so that spawned
workers start quickly.
"""

from __future__ import annotations

import base64
import ctypes
import hashlib
import io
import json
import os
import signal
import struct
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Dict, FrozenSet, Mapping, Optional, Tuple

from PIL import Image, ImageFile, ImageOps, UnidentifiedImageError

MAX_SHORT_EDGE = 768
JPEG_QUALITY = 90
MAX_FILE_URL_BYTES = 64 * 1024 * 1024
MAX_READ_BYTES = 512 * 1024 * 1024
IMAGE_MODES = ("data", "file")
RESAMPLE = "LANCZOS"
PREPROCESS_VERSION = 1


class ImageFailure(Exception):
    """An image that cannot be sent: ``stage`` (read, decode, encode, size) and ``reason``."""

    def __init__(self, stage: str, reason: str):
        self.stage = stage
        self.reason = reason
        super().__init__(f"{stage}: {reason}")


@dataclass(frozen=True)
class PrepOptions:
    """How images are turned into URLs (module docstring)."""

    mode: str = "data"
    max_short_edge: int = MAX_SHORT_EDGE
    quality: int = JPEG_QUALITY
    max_file_url_bytes: int = MAX_FILE_URL_BYTES
    max_read_bytes: int = MAX_READ_BYTES

    def __post_init__(self) -> None:
        if self.mode not in IMAGE_MODES:
            raise ValueError(f"image mode must be one of {IMAGE_MODES}, got {self.mode!r}")
        if self.max_short_edge < 1 or not 1 <= self.quality <= 100:
            raise ValueError("max_short_edge must be >= 1 and quality in 1..100")

    def fingerprint(self) -> Dict[str, Any]:
        """What changes the pixels the model sees; hashed into the request id."""
        if self.mode == "file":
            return {"mode": "file"}
        return {"mode": "data", "version": PREPROCESS_VERSION, "max_short_edge": self.max_short_edge,
                "resample": RESAMPLE, "format": "jpeg", "quality": self.quality, "exif_transpose": True,
                "alpha": "white"}


# -- pixel operations ------------------------------------------------------------------------------
def _has_alpha(im: Image.Image) -> bool:
    return im.mode in ("RGBA", "LA", "PA", "RGBa", "La") or "transparency" in im.info


def _to_8bit(im: Image.Image) -> Image.Image:
    import numpy as np

    a = np.asarray(im)
    if im.mode == "F":
        a = a.astype("float64")
        finite = a[np.isfinite(a)]
        if finite.size and finite.min() >= 0.0 and finite.max() <= 1.0:
            a = a * 255.0
        a = np.nan_to_num(a, nan=0.0, posinf=255.0, neginf=0.0)
        return Image.fromarray(np.clip(np.rint(a), 0, 255).astype("uint8"), "L")
    a = a.astype("int64")
    if im.mode.startswith("I;16") or (a.size and a.max() > 255):
        a = np.clip(a, 0, 65535) >> 8
    return Image.fromarray(np.clip(a, 0, 255).astype("uint8"), "L")


def to_rgb(im: Image.Image) -> Image.Image:
    """RGB pixels per §6: transparency composited on white, 16-bit/float scaled, others converted."""
    if im.mode == "RGB" and "transparency" not in im.info:
        return im
    if im.mode in ("I", "F") or im.mode.startswith("I;16"):
        return _to_8bit(im).convert("RGB")
    if _has_alpha(im):
        rgba = im.convert("RGBA")
        bg = Image.new("RGB", rgba.size, (255, 255, 255))
        bg.paste(rgba, mask=rgba.getchannel("A"))
        return bg
    return im.convert("RGB")


def target_size(width: int, height: int, max_short_edge: int = MAX_SHORT_EDGE) -> Tuple[int, int]:
    """Size after the §6 resize rule: shorter edge = ``max_short_edge`` if larger, integer truncation."""
    short = min(width, height)
    if short <= max_short_edge:
        return width, height
    if width <= height:
        return max_short_edge, max(1, height * max_short_edge // width)
    return max(1, width * max_short_edge // height), max_short_edge


def decode(data: bytes, name: str = "image") -> Image.Image:
    """Fully decoded, EXIF-oriented Pillow image; :class:`ImageFailure` for anything unreadable."""
    if not data:
        raise ImageFailure("read", f"{name}: zero-byte file")
    fmt = None
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", Image.DecompressionBombWarning)
            im = Image.open(io.BytesIO(data))
            fmt = im.format
            im.load()
    except UnidentifiedImageError:
        raise ImageFailure("decode", f"{name}: unsupported or unrecognised image format") from None
    except Image.DecompressionBombError as exc:
        raise ImageFailure("decode", f"{name}: too many pixels ({exc})") from None
    except (OSError, SyntaxError, ValueError, EOFError, IndexError, TypeError, struct.error) as exc:
        msg = str(exc) or type(exc).__name__
        if "truncated" in msg.lower():
            raise ImageFailure("decode", f"{name}: truncated {fmt or 'image'} file ({msg})") from None
        raise ImageFailure("decode", f"{name}: corrupt {fmt or 'image'} file ({type(exc).__name__}: {msg})") from None
    try:
        ImageOps.exif_transpose(im, in_place=True)
    except Exception:  # a broken EXIF block must not lose the image: keep the stored orientation
        pass
    return im


def encode_jpeg(im: Image.Image, quality: int = JPEG_QUALITY) -> bytes:
    buf = io.BytesIO()
    im.save(buf, "JPEG", quality=quality)
    return buf.getvalue()


def preprocess_bytes(data: bytes, opts: PrepOptions = PrepOptions(), name: str = "image"
                     ) -> Tuple[str, Tuple[int, int], Tuple[int, int]]:
    """``(data_url, original (w, h), sent (w, h))`` of one image in data mode (module docstring)."""
    im = decode(data, name)
    size = im.size
    rgb = to_rgb(im)
    tw, th = target_size(rgb.width, rgb.height, opts.max_short_edge)
    if (tw, th) != rgb.size:
        rgb = rgb.resize((tw, th), Image.Resampling.LANCZOS)
    try:
        jpeg = encode_jpeg(rgb, opts.quality)
    except (OSError, ValueError) as exc:
        raise ImageFailure("encode", f"{name}: cannot encode as JPEG ({exc})") from None
    return "data:image/jpeg;base64," + base64.b64encode(jpeg).decode("ascii"), size, rgb.size


def check_file_image(path: str, data: bytes) -> Tuple[int, int]:
    """Header check for file mode (``Image.verify``): (w, h) or :class:`ImageFailure`."""
    if not data:
        raise ImageFailure("read", f"{path}: zero-byte file")
    try:
        with Image.open(io.BytesIO(data)) as im:
            size = im.size
            im.verify()
    except UnidentifiedImageError:
        raise ImageFailure("decode", f"{path}: unsupported or unrecognised image format") from None
    except Exception as exc:  # verify raises many types
        raise ImageFailure("decode", f"{path}: corrupt image file ({type(exc).__name__}: {exc})") from None
    return size


def read_bytes(path: str, limit: int) -> bytes:
    """The file's bytes, or :class:`ImageFailure` (missing, unreadable, larger than ``limit``)."""
    try:
        size = os.path.getsize(path)
        if size > limit:
            raise ImageFailure("size", f"{path}: file is {size:,} bytes, over the limit of {limit:,} bytes")
        with open(path, "rb", buffering=0) as fh:  # readall() sizes its buffer from fstat
            data = fh.readall()
        if len(data) > limit:
            raise ImageFailure("size", f"{path}: file is {len(data):,} bytes, over the limit of {limit:,} bytes")
        return data
    except FileNotFoundError:
        raise ImageFailure("read", f"{path}: file not found") from None
    except IsADirectoryError:
        raise ImageFailure("read", f"{path}: is a folder, not an image file") from None
    except PermissionError:
        raise ImageFailure("read", f"{path}: permission denied") from None
    except OSError as exc:
        raise ImageFailure("read", f"{path}: cannot read ({exc})") from None


# -- the worker job --------------------------------------------------------------------------------
_INPUT_MARK = "\u0000capaudit-recap-input\u0000"


def canonical_json(obj: Any) -> str:
    """The model-call layer's canonical JSON (``capaudit.io.canonical_json.canonical``; the runner checks
    that both agree before a run), available here without importing ``capaudit.llm``."""
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False)


@dataclass(frozen=True)
class IdTemplate:
    """Request ids of one run, computable in a worker without importing ``capaudit.llm``.

    ``capaudit.llm.requests.request_id`` is blake2b-16 of the canonical JSON of ``{task,
    task_version, model, revision, prompt_version, schema, decoding, input}``; everything but
    ``input`` is fixed per run, so the canonical text is ``prefix + canonical(input) + suffix``
    (:func:`capaudit.recap.runner.id_template` builds the template and proves the identity).
    """

    prefix: str
    suffix: str
    preprocess: Mapping[str, Any]

    @classmethod
    def build(cls, task: str, task_version: int, model: str, revision: Optional[str], prompt_version: str,
              schema: Mapping[str, Any], decoding: Mapping[str, Any], preprocess: Mapping[str, Any]) -> "IdTemplate":
        text = canonical_json({"task": task, "task_version": task_version, "model": model, "revision": revision,
                               "prompt_version": prompt_version, "schema": schema, "decoding": decoding,
                               "input": _INPUT_MARK})
        mark = canonical_json(_INPUT_MARK)
        if text.count(mark) != 1:
            raise ValueError("request-id template: the input marker occurs more than once")
        prefix, _, suffix = text.partition(mark)
        return cls(prefix, suffix, dict(preprocess))

    def request_id(self, image_key: str, image_id: str, context: Mapping[str, Any]) -> str:
        text = self.prefix + canonical_json(request_input(image_key, image_id, self.preprocess, context)) + self.suffix
        return hashlib.blake2b(text.encode("utf-8"), digest_size=16).hexdigest()


def request_input(image_key: str, image_id: str, preprocess: Mapping[str, Any], context: Mapping[str, Any]
                  ) -> Dict[str, Any]:
    """The ``input`` object of a recap request: image content hash, id, preprocessing, context."""
    return {"image_key": image_key, "image_id": image_id, "preprocess": dict(preprocess), "context": dict(context)}


@dataclass
class Job:
    """One image to prepare: from a file (``file``) or embedded bytes (``data``)."""

    image_id: str
    image_path: Optional[str]
    file: Optional[str] = None
    data: Optional[bytes] = None
    context: Dict[str, Any] = field(default_factory=dict)
    error: Optional[str] = None  # an input problem found while listing (e.g. a corrupt shard)
    source: Optional[str] = None  # the input it came from (the --images value)


@dataclass
class Prepared:
    """A prepared image (``url``), a skipped one (``skipped``), or a failure (``error``)."""

    image_id: str
    image_path: Optional[str]
    request_id: Optional[str] = None
    image_key: Optional[str] = None
    url: Optional[str] = None
    size: Optional[Tuple[int, int]] = None
    sent_size: Optional[Tuple[int, int]] = None
    nbytes: int = 0
    skipped: Optional[str] = None  # "answered" | "not_failed"
    error: Optional[str] = None
    stage: Optional[str] = None


def prepare(job: Job, tmpl: IdTemplate, opts: PrepOptions, answered: FrozenSet[str] = frozenset(),
            only: Optional[FrozenSet[str]] = None) -> Prepared:
    """Read → hash → request id → (skip if answered) → decode/encode: the work of one image."""
    out = Prepared(job.image_id, job.image_path)
    if job.error:
        out.error, out.stage = job.error, "input"
        return out
    name = job.image_path or job.image_id
    try:
        if job.data is not None:
            data = job.data
            if opts.mode == "file":
                raise ImageFailure("input", f"{name}: file mode needs images on disk (this one is embedded)")
            if len(data) > opts.max_read_bytes:
                raise ImageFailure("size", f"{name}: {len(data):,} bytes, over the limit of {opts.max_read_bytes:,}")
        else:
            limit = opts.max_file_url_bytes if opts.mode == "file" else opts.max_read_bytes
            data = read_bytes(str(job.file), limit)
        out.nbytes = len(data)
        out.image_key = "sha256:" + hashlib.sha256(data).hexdigest()
        out.request_id = tmpl.request_id(out.image_key, job.image_id, job.context)
        if out.request_id in answered:
            out.skipped = "answered"
            return out
        if only is not None and out.request_id not in only:
            out.skipped = "not_failed"
            return out
        if opts.mode == "file":
            out.size = out.sent_size = check_file_image(name, data)
            out.url = Path(os.path.abspath(str(job.file))).as_uri()
        else:
            out.url, out.size, out.sent_size = preprocess_bytes(data, opts, name)
    except ImageFailure as exc:
        out.error, out.stage = exc.reason, exc.stage
    except MemoryError:
        out.error, out.stage = f"{name}: out of memory while decoding", "decode"
    return out


# -- process-pool plumbing (state set once per worker by the initializer) ---------------------------
_WORKER: Dict[str, Any] = {}


def _set_parent_death_signal() -> None:
    """Linux: the worker gets SIGTERM when its parent dies (a SIGKILLed run leaves no orphans)."""
    try:
        libc = ctypes.CDLL("libc.so.6", use_errno=True)
        libc.prctl(1, signal.SIGTERM, 0, 0, 0)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


def init_worker(tmpl: IdTemplate, opts: PrepOptions, answered: FrozenSet[str],
                only: Optional[FrozenSet[str]]) -> None:
    """Process-pool initializer: ignore SIGINT (the parent stops the run), remember the run's state."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    _set_parent_death_signal()
    ImageFile.LOAD_TRUNCATED_IMAGES = False
    _WORKER.update(tmpl=tmpl, opts=opts, answered=answered, only=only)


def prepare_in_worker(job: Job) -> Prepared:
    """:func:`prepare` with the state :func:`init_worker` stored."""
    return prepare(job, _WORKER["tmpl"], _WORKER["opts"], _WORKER["answered"], _WORKER["only"])


__all__ = ["MAX_SHORT_EDGE", "JPEG_QUALITY", "MAX_FILE_URL_BYTES", "IMAGE_MODES", "ImageFailure", "PrepOptions",
           "to_rgb", "target_size", "decode", "encode_jpeg", "preprocess_bytes", "check_file_image", "read_bytes",
           "IdTemplate", "request_input", "Job", "Prepared", "prepare", "init_worker", "prepare_in_worker"]
