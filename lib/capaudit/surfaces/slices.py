"""Fair slices: the same images captioned by 2+ surfaces, joined on a normalised key (reference-spec §11.1).

Algorithm (§11.1 steps 1, 3, 4; the manifest gate of step 2 is not part of this project's data):
each surface keeps the first non-empty caption per (already normalised) key, in file order; the
matched keys are the keys present in every surface, sorted; if more than ``n`` matched, they are
shuffled with ``random.Random(seed)`` and the first ``n`` kept, otherwise all matched keys are kept
in sorted order.

A slice is written under ``<out_dir>/<name>/n<n|all>_seed<seed>/``: ``pairs.parquet`` and
``pairs.jsonl`` (one row per key: ``pair_id`` = sha1 of ``name\\0key\\0...`` (one key per
surface, as §11.1), ``key``, ``<surface>_caption`` per surface, plus ``local_caption`` /
``reference_caption`` when there are exactly two surfaces, first = local) and ``manifest.json``
(counts, seed, inputs with sha256, unmatched keys).  An existing slice is never silently
replaced: rebuilding with identical inputs and result reuses it, anything else raises
:class:`SliceExistsError` unless ``overwrite=True``.
"""

from __future__ import annotations

import hashlib
import json
import os
import random
import shutil
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence, Union

import pandas as pd

from ..data.registry import sha256_file
from ..errors import InputError
from ..io.manifest import check_against
from .surface import Surface

UNMATCHED_LIST_LIMIT = 1000
MANIFEST_VERSION = 1


class SliceExistsError(FileExistsError):
    """A slice folder already holds a different slice and ``overwrite`` was not given."""


@dataclass
class SliceManifest:
    """What ``manifest.json`` of a slice records; ``dir`` is the slice folder."""

    name: str
    dir: Path
    n: Optional[int]
    seed: int
    surfaces: List[str]
    matched: int
    sampled: int
    per_surface: Dict[str, Dict[str, Any]]
    fingerprint: str
    raw: Dict[str, Any] = field(repr=False, default_factory=dict)
    reused: bool = False

    @property
    def pairs_path(self) -> Path:
        return self.dir / "pairs.parquet"

    def pairs(self) -> pd.DataFrame:
        self.verify("pairs.parquet")
        return pd.read_parquet(self.pairs_path)

    def verify(self, name: str = "pairs.parquet") -> None:
        """Check a slice file against the sha256 its manifest records (InputError on mismatch)."""
        files = self.raw.get("files") or {}
        if name in files:
            check_against(self.dir / name, files[name], self.dir / "manifest.json",
                          hint="rebuild the slice (capaudit slice ... --overwrite, or the surfaces stage)")

    @classmethod
    def from_dict(cls, d: Dict[str, Any], folder: Path, reused: bool = False) -> "SliceManifest":
        return cls(name=d["name"], dir=Path(folder), n=d["n"], seed=d["seed"], surfaces=list(d["surfaces"]),
                   matched=d["counts"]["matched"], sampled=d["counts"]["sampled"],
                   per_surface=d["per_surface"], fingerprint=d["fingerprint"], raw=d, reused=reused)

    @classmethod
    def load(cls, folder: Union[str, Path]) -> "SliceManifest":
        folder = Path(folder)
        path = folder / "manifest.json"
        try:
            d = json.loads(path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            raise FileNotFoundError(f"{path}: no slice manifest here") from None
        except json.JSONDecodeError as exc:
            raise ValueError(f"{path}: not valid JSON ({exc.msg})") from None
        return cls.from_dict(d, folder)


def slice_dir(out_dir: Union[str, Path], name: str, n: Optional[int], seed: int) -> Path:
    """``<out_dir>/<name>/n<n|all>_seed<seed>`` (reference layout, spec §11.1 step 5)."""
    return Path(out_dir) / name / f"n{'all' if n is None else int(n)}_seed{int(seed)}"


def pair_id(name: str, key: str, n_surfaces: int) -> str:
    """sha1 of ``name\\0key\\0key...`` (the §11.1 ``name\\0local_key\\0public_key`` with one shared key)."""
    return hashlib.sha1("\0".join([name] + [key] * n_surfaces).encode("utf-8")).hexdigest()


def _inputs(s: Surface) -> List[Dict[str, Any]]:
    out = []
    for src in s.sources:
        d: Dict[str, Any] = {"sha256": src.sha256}
        if src.dataset:
            d.update(dataset=src.dataset, path=src.registry_path)
        elif src.hf:
            d.update(hf=src.hf)
        else:
            d.update(path=src.path)
        out.append(d)
    return out


def build_fair_slice(surfaces: Sequence[Surface], n: Optional[int], seed: int, out_dir: Union[str, Path],
                     name: str, *, overwrite: bool = False) -> SliceManifest:
    """Join 2+ surfaces on their shared keys, sample ``n`` keys with ``Random(seed)``, write the slice (§11.1)."""
    if len(surfaces) < 2:
        raise ValueError(f"slice '{name}': needs at least 2 surfaces, got {len(surfaces)}")
    names = [s.name for s in surfaces]
    if len(set(names)) != len(names):
        raise ValueError(f"slice '{name}': surface names must be distinct, got {names}")
    columns = [f"{s}_caption" for s in names]
    if len(surfaces) == 2 and set(columns) & {"local_caption", "reference_caption"}:
        raise ValueError(f"slice '{name}': surfaces may not be named 'local'/'reference' (column clash)")
    if n is not None and int(n) < 1:
        raise ValueError(f"slice '{name}': n must be a positive integer or null (all matched keys), got {n}")
    seed = int(seed)
    firsts = [s.first_caption_per_key() for s in surfaces]
    matched_set = set(firsts[0]).intersection(*firsts[1:])
    matched = sorted(matched_set)
    if not matched:
        examples = "; ".join(f"{s.name}: {', '.join(repr(k) for k in list(first)[:3]) or 'no keys'}"
                             for s, first in zip(surfaces, firsts))
        raise InputError(f"slice '{name}': the surfaces share no key, so the slice would be empty "
                         f"(first keys per surface: {examples}); check key_field and key_normalization")
    keys = list(matched)
    if n is not None and len(keys) > int(n):
        random.Random(seed).shuffle(keys)
        keys = keys[: int(n)]

    rows = []
    for k in keys:
        row: Dict[str, Any] = {"pair_id": pair_id(name, k, len(surfaces)), "key": k}
        for col, first in zip(columns, firsts):
            row[col] = first[k]
        if len(surfaces) == 2:
            row["local_caption"] = firsts[0][k]
            row["reference_caption"] = firsts[1][k]
        rows.append(row)
    pairs = pd.DataFrame(rows, columns=["pair_id", "key", *columns]
                         + (["local_caption", "reference_caption"] if len(surfaces) == 2 else []))

    per_surface: Dict[str, Dict[str, Any]] = {}
    for s, first in zip(surfaces, firsts):
        unmatched = sorted(set(first) - matched_set)
        per_surface[s.name] = {
            "records": int(len(s.frame)), "rows_read": int(s.stats.rows),
            "rows_without_caption": int(s.stats.rows_without_caption), "keys": len(first),
            "unmatched_count": len(unmatched), "unmatched_keys": unmatched[:UNMATCHED_LIST_LIMIT],
            "unmatched_truncated": max(0, len(unmatched) - UNMATCHED_LIST_LIMIT),
            "inputs": _inputs(s), "spec": {k: v for k, v in s.spec.items()},
        }
    body: Dict[str, Any] = {
        "version": MANIFEST_VERSION, "name": name, "n": None if n is None else int(n), "seed": seed,
        "surfaces": names,
        "roles": {"local": names[0], "reference": names[1]} if len(names) == 2 else None,
        "sampling": ("all matched keys, sorted" if n is None or len(matched) <= int(n) else
                     f"random.Random({seed}).shuffle(sorted matched keys)[:{int(n)}]"),
        "counts": {"matched": len(matched), "sampled": len(keys),
                   **{f"{k}_records": v["records"] for k, v in per_surface.items()}},
        "per_surface": per_surface,
        "sampled_keys_sha256": hashlib.sha256("\n".join(keys).encode("utf-8")).hexdigest(),
    }
    captions_sha = hashlib.sha256(pairs.to_json(orient="records", force_ascii=False).encode("utf-8")).hexdigest()
    fp_src = json.dumps({**body, "pairs_sha256": captions_sha}, sort_keys=True, ensure_ascii=False, default=str)
    body["fingerprint"] = hashlib.sha256(fp_src.encode("utf-8")).hexdigest()

    target = slice_dir(out_dir, name, n, seed)
    if target.exists() and any(target.iterdir()):
        try:
            existing = SliceManifest.load(target)
        except (FileNotFoundError, ValueError):
            existing = None
        if existing is not None and existing.fingerprint == body["fingerprint"] and not overwrite \
                and (target / "pairs.parquet").exists():
            existing.reused = True
            return existing
        if not overwrite:
            raise SliceExistsError(f"{target}: a different slice '{name}' already exists here "
                                   f"(inputs, seed or result changed); pass overwrite=True (--overwrite) to replace it")
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.parent / f".{target.name}.tmp-{uuid.uuid4().hex}"
    tmp.mkdir()  # (not mkdtemp: keep the umask's permissions on the final folder)
    try:
        pairs.to_parquet(tmp / "pairs.parquet", index=False)
        with open(tmp / "pairs.jsonl", "w", encoding="utf-8") as fh:
            for row in rows:
                fh.write(json.dumps(row, ensure_ascii=False) + "\n")
        body["files"] = {f: sha256_file(tmp / f) for f in ("pairs.parquet", "pairs.jsonl")}
        (tmp / "manifest.json").write_text(json.dumps(body, indent=2, ensure_ascii=False, default=str) + "\n",
                                           encoding="utf-8")
        old = None
        if target.exists():  # move the old slice aside first, so a slice folder is always whole
            old = target.parent / f".{target.name}.old-{uuid.uuid4().hex}"
            os.replace(target, old)
        os.replace(tmp, target)
        if old is not None:
            shutil.rmtree(old, ignore_errors=True)
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)
    return SliceManifest.from_dict(body, target)
