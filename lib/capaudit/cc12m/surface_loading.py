"""Read one caption surface into ``join value → row``, counting every row it does not keep.

Rules (the reference's loaders): the join value is the normalised key or URL; the caption is the
first caption field holding non-blank text, stripped; a repeated join value keeps the first row
(later ones counted as duplicates). A row without a join value or caption is refused (one line
naming file, row and field) unless ``skip_incomplete`` — the reference's behaviour — where it is
counted and skipped. Keys that are neither text nor integers (floats from a lossy reader, lists)
are always refused: the reference's ``str()`` would turn them into keys that never match.
"""

from __future__ import annotations

import glob
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Dict, Iterator, List, Mapping, Optional, Tuple

from capaudit.errors import InputError
from capaudit.surfaces.readers import infer_format, iter_json_lines, read_csv, read_parquet

from .surface_spec import SurfaceSpec
from .urls import key_text, normalize_key, normalize_url


@dataclass(frozen=True)
class SurfaceRow:
    caption: str
    key: Optional[str]  # the key as text (not padded), when the surface has a key field
    url: Optional[str]  # the URL as written, when the surface has a URL field
    normalized_key: Optional[str]
    normalized_url: Optional[str]


@dataclass
class LoadedSurface:
    spec: SurfaceSpec
    files: List[str]
    rows: Dict[str, SurfaceRow] = field(default_factory=dict)  # join value → first row
    seen: int = 0
    duplicates: int = 0
    skipped_missing_join: int = 0
    skipped_missing_caption: int = 0
    loaded_without_url: int = 0  # anchor rows kept without the URL the URL-joined surfaces need

    def stats(self) -> Dict[str, Any]:
        join = self.spec.join
        return {"files": self.files, "join": join, "join_field": self.spec.join_field, "seen": self.seen,
                "loaded": len(self.rows), f"duplicate_{join}s": self.duplicates,
                f"skipped_missing_{join}": self.skipped_missing_join,
                "skipped_missing_caption": self.skipped_missing_caption,
                **({"loaded_without_url": self.loaded_without_url} if self.loaded_without_url else {})}


def expand_inputs(pattern: str, label: str) -> List[Path]:
    """The files of one surface path: a file, a Parquet folder, or a glob (sorted)."""
    if any(ch in pattern for ch in "*?["):
        paths = [Path(p) for p in sorted(glob.glob(pattern, recursive=True))]
        if not paths:
            raise InputError(f"no file matches the pattern of surface '{label}'", path=pattern)
        return paths
    path = Path(pattern)
    if not path.exists():
        raise InputError(f"file of surface '{label}' not found", path=pattern)
    return [path]


def iter_rows(path: Path, fmt: Optional[str]) -> Iterator[Tuple[Mapping[str, Any], str]]:
    """``(row, "FILE: line N")`` of a JSONL, Parquet, CSV or TSV file."""
    fmt = fmt or infer_format(path)
    if fmt == "jsonl":
        for lineno, row in iter_json_lines(path):
            yield row, f"{path}: line {lineno}"
    elif fmt == "parquet":
        yield from read_parquet(path)
    elif fmt in ("csv", "tsv"):
        yield from read_csv(path, "," if fmt == "csv" else "\t")
    else:
        raise InputError(f"format {fmt!r} is not a caption table (use JSONL, Parquet, CSV or TSV)", path=path)


def _refuse(where: str, field_name: str, message: str) -> InputError:
    return InputError(f"{where}: field {field_name!r}: {message}")


def _check_key_type(value: Any, where: str, field_name: str) -> None:
    if value is not None and (isinstance(value, bool) or not isinstance(value, (str, int))):
        raise _refuse(where, field_name, f"a key must be text or an integer, got {type(value).__name__} {value!r}")


def _caption(row: Mapping[str, Any], fields: Tuple[str, ...]) -> Optional[str]:
    for name in fields:
        value = row.get(name)
        if isinstance(value, str) and value.strip():
            return value.strip()
    return None


def load_surface(spec: SurfaceSpec, *, key_mode: str = "zfill9", need_url: bool = False,
                 skip_incomplete: bool = False) -> LoadedSurface:
    """Load ``spec``; ``need_url`` (the anchor when URL-joined surfaces exist) makes its URL field
    required as well."""
    files = expand_inputs(spec.path, spec.name)
    out = LoadedSurface(spec=spec, files=[str(p) for p in files])
    for path in files:
        for row, where in iter_rows(path, spec.format):
            out.seen += 1
            if spec.key_field is not None:
                _check_key_type(row.get(spec.key_field), where, spec.key_field)
            raw_url = row.get(spec.url_field) if spec.url_field else None
            if raw_url is not None and not isinstance(raw_url, str):
                raise _refuse(where, spec.url_field or "", f"a URL must be text, got {type(raw_url).__name__}")
            key = key_text(row.get(spec.key_field)) if spec.key_field else None
            nkey = normalize_key(key, key_mode) if key is not None else None
            nurl = normalize_url(raw_url)
            join_value = nkey if spec.join == "key" else nurl
            if join_value is None:
                if not skip_incomplete:
                    raise _refuse(where, spec.join_field, f"missing or blank {spec.join} of surface '{spec.name}' "
                                                          f"(--skip-incomplete counts and skips such rows)")
                out.skipped_missing_join += 1
                continue
            caption = _caption(row, spec.caption_fields)
            if caption is None:
                if not skip_incomplete:
                    raise _refuse(where, "|".join(spec.caption_fields),
                                  f"no caption text in surface '{spec.name}' (--skip-incomplete counts and skips "
                                  f"such rows)")
                out.skipped_missing_caption += 1
                continue
            if join_value in out.rows:
                out.duplicates += 1
                continue
            if need_url and nurl is None:
                if not skip_incomplete:
                    raise _refuse(where, spec.url_field or "url", f"missing or blank URL of anchor surface "
                                  f"'{spec.name}', needed by the URL-joined surfaces (--skip-incomplete keeps "
                                  f"the row, as the reference does, and counts it unmatched)")
                out.loaded_without_url += 1
            out.rows[join_value] = SurfaceRow(caption=caption, key=key, url=raw_url, normalized_key=nkey,
                                              normalized_url=nurl)
    return out


__all__ = ["SurfaceRow", "LoadedSurface", "expand_inputs", "iter_rows", "load_surface"]
