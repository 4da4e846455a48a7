"""Where each image lies in a set of WebDataset shards: by normalised sidecar URL, by key, by
(shard name, member). The first sample in sorted shard order wins; later ones are counted."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

from capaudit.errors import InputError

from .shards import ShardSample, index_shard

MATCH_MODES = ("url", "key")


@dataclass
class ShardIndex:
    shards: List[Path]
    by_url: Dict[str, ShardSample] = field(default_factory=dict)
    by_key: Dict[str, ShardSample] = field(default_factory=dict)
    by_location: Dict[Tuple[str, str], ShardSample] = field(default_factory=dict)
    samples: int = 0
    samples_without_image: int = 0
    samples_without_url: int = 0
    duplicate_urls: int = 0
    duplicate_keys: int = 0
    extra_image_members: int = 0

    def stats(self) -> Dict[str, Any]:
        return {"shards": len(self.shards), "samples": self.samples,
                "samples_without_image": self.samples_without_image,
                "samples_without_url": self.samples_without_url, "duplicate_urls": self.duplicate_urls,
                "duplicate_keys": self.duplicate_keys, "extra_image_members": self.extra_image_members}

    def find(self, row: Mapping[str, Any], match: str) -> Optional[ShardSample]:
        """The sample of a manifest row: its recorded location, else its URL or key."""
        if row.get("shard") and row.get("member"):
            return self.by_location.get((str(row["shard"]), str(row["member"])))
        if match == "url":
            return self.by_url.get(str(row.get("normalized_url")))
        return self.by_key.get(str(row.get("key")))


def build_index(shards: Sequence[Path]) -> ShardIndex:
    """Index every shard (names must be unique: manifests record a shard by its file name)."""
    names: Dict[str, Path] = {}
    for p in shards:
        if p.name in names:
            raise InputError(f"two shards share the file name {p.name!r} ({names[p.name]})", path=p)
        names[p.name] = p
    idx = ShardIndex(shards=list(shards))
    for path in shards:
        for s in index_shard(path).values():
            idx.samples += 1
            idx.extra_image_members += s.extra_images
            if s.image_member is None:
                idx.samples_without_image += 1
                continue
            idx.by_location[(path.name, s.image_member)] = s
            url = s.normalized_url
            if url is None:
                idx.samples_without_url += 1
            elif url in idx.by_url:
                idx.duplicate_urls += 1
            else:
                idx.by_url[url] = s
            if s.short_key in idx.by_key:
                idx.duplicate_keys += 1
            else:
                idx.by_key[s.short_key] = s
    return idx


__all__ = ["MATCH_MODES", "ShardIndex", "build_index"]
