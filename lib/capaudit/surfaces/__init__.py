"""Caption surfaces: loaders (JSONL, JSON, Parquet, CSV/TSV, text, Hugging Face) → one Surface table;
key normalisation and fair slices (reference-spec §2.1, §11)."""

from .keys import KEY_NORMALIZERS, normalize_key
from .surface import (CAPTION_FIELDS, LoadStats, Record, SourceFile, Surface, detect_caption, iter_captions,
                      load_surface, no_records_error, resolve_sources, row_captions)
from .slices import SliceManifest, build_fair_slice

__all__ = [
    "CAPTION_FIELDS", "KEY_NORMALIZERS", "LoadStats", "Record", "SliceManifest", "SourceFile", "Surface",
    "build_fair_slice", "detect_caption", "iter_captions", "load_surface", "normalize_key", "resolve_sources",
    "no_records_error", "row_captions",
]
