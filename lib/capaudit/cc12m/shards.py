"""WebDataset tar shards: index samples (``<key>.jpg|.jpeg|.png|.webp`` + ``<key>.json`` with ``url``)
without extracting anything, and read one member's bytes.

A sample's key is its member path without the last suffix; its short key (matched against
manifest keys) is the file stem, as the reference's ``Path(member).stem``. Image suffixes are the
reference's, compared lower-cased. In every shard the first image member of a key is used (a
second one is counted); shards are read in sorted path order.
"""

from __future__ import annotations

import glob
import json
import tarfile
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Dict, Iterator, List, Optional, Tuple

from capaudit.errors import InputError

from .urls import normalize_url

IMAGE_SUFFIXES = (".jpg", ".jpeg", ".png", ".webp")


@dataclass
class ShardSample:
    shard: Path
    key: str  # member path without its last suffix
    image_member: Optional[str] = None
    url: Optional[str] = None  # as the .json sidecar writes it
    extra_images: int = 0  # further image members of the same key (ignored)
    other_members: List[str] = field(default_factory=list)  # e.g. a .gif: not an image suffix of the reference

    @property
    def short_key(self) -> str:
        return PurePosixPath(self.key).name

    @property
    def normalized_url(self) -> Optional[str]:
        return normalize_url(self.url)

    @property
    def suffix(self) -> str:
        return PurePosixPath(self.image_member or "").suffix.lower()


def expand_shards(pattern: str) -> List[Path]:
    """``*.tar`` files of a folder, a glob, or one file; sorted. No match is an error."""
    p = Path(pattern)
    if p.is_dir():
        paths = sorted(p.glob("*.tar"))
    elif any(ch in pattern for ch in "*?["):
        paths = sorted(Path(x) for x in glob.glob(pattern, recursive=True))
    elif p.is_file():
        paths = [p]
    else:
        raise InputError("shard file or folder not found", path=pattern)
    if not paths:
        raise InputError("no .tar shard here", path=pattern)
    return paths


def _open(path: Path) -> tarfile.TarFile:
    try:
        return tarfile.open(path, "r:")
    except (tarfile.TarError, OSError) as exc:
        raise InputError(f"not a readable (uncompressed) tar shard ({type(exc).__name__}: {exc})", path=path) from None


def index_shard(path: Path) -> Dict[str, ShardSample]:
    """Every sample of one shard by key, in member order (headers and sidecars only are read)."""
    samples: Dict[str, ShardSample] = {}
    with _open(path) as tf:
        try:
            for info in tf:
                if not info.isfile():
                    continue
                pp = PurePosixPath(info.name)
                key = str(pp.with_suffix("")) if pp.suffix else str(pp)
                s = samples.setdefault(key, ShardSample(shard=path, key=key))
                suffix = pp.suffix.lower()
                if suffix in IMAGE_SUFFIXES:
                    if s.image_member is None:
                        s.image_member = info.name
                    else:
                        s.extra_images += 1
                elif suffix == ".json":
                    s.url = _sidecar_url(tf, info, path)
                elif suffix not in (".txt", ".cls", ".caption"):
                    s.other_members.append(info.name)
        except tarfile.TarError as exc:
            raise InputError(f"tar shard is damaged ({type(exc).__name__}: {exc})", path=path) from None
    return samples


def _sidecar_url(tf: tarfile.TarFile, info: tarfile.TarInfo, path: Path) -> Optional[str]:
    fh = tf.extractfile(info)
    raw = fh.read() if fh is not None else b""
    try:
        meta = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise InputError(f"member {info.name!r}: sidecar is not JSON ({exc})", path=path) from None
    if not isinstance(meta, dict):
        raise InputError(f"member {info.name!r}: sidecar is not a JSON object", path=path)
    url = meta.get("url")
    if url is not None and not isinstance(url, str):
        raise InputError(f"member {info.name!r}: field 'url' is not text", path=path)
    return url


def read_members(path: Path, members: List[str]) -> Iterator[Tuple[str, bytes]]:
    """``(member, bytes)`` for each of ``members`` of one shard (an absent one is an error)."""
    with _open(path) as tf:
        for name in members:
            try:
                info = tf.getmember(name)
                fh = tf.extractfile(info)
            except KeyError:
                raise InputError(f"member {name!r} is not in this shard", path=path) from None
            if fh is None:
                raise InputError(f"member {name!r} is not a regular file", path=path)
            yield name, fh.read()


__all__ = ["IMAGE_SUFFIXES", "ShardSample", "expand_shards", "index_shard", "read_members"]
