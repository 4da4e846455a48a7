"""Detailness scoring on an engine (issue 15): shards on this machine, a local process pool or Ray.

``capaudit detail score --engine local|ray`` maps :func:`score_shard` over the shards of JSONL /
Parquet inputs (:func:`capaudit.engine.list_shards`: files, folders, globs, fsspec URLs) and
concatenates the score rows **in shard order**, so the output file is the same bytes as a
single-process run (:func:`capaudit.detail.score.score_file`) whatever the engine, the number of
workers or of shards. Rows are read with the same rules (:class:`~capaudit.detail.score.RecordReader`)
and errors still name the file, line and field: a shard reports its first bad row instead of
raising, and the driver raises the first one in input order (line numbers of byte-range shards are
counted only then); whole-input errors (a field no row has, a row without the caption field, no
rows) are checked once every shard is in.

Backends are described by a picklable :class:`BackendSpec` and built **once per worker process**:
by the local pool's initializer, lazily on a Ray worker (kept in a module-level cache keyed by the
spec and the grounding files' size and mtime). A single-process run builds them once in this
process and passes them in. The LLM parser is not sharded: it already fans model calls out with its
own concurrency (``capaudit llm run --engine ray`` fans requests out on Ray). The offline parser, COCO
grounding and annotation-precision ITM score each caption on its own (exact equality is tested); a
CLIP ITM scorer embeds in batches, and batch composition changes with the shard cut, so its floats
may differ in the last bits between shardings.

:func:`score_records_engine` does the same for records already in memory (the detail stage).
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any, Dict, Iterator, List, Optional, Sequence, Tuple

from capaudit.engine.shards import iter_shard_objects, line_at
from capaudit.errors import InputError

from .grounding import icr_name
from .metrics import DEFAULT_LENGTH_UNIT, DEFAULT_RELATION_ENDS, LENGTH_UNITS, RELATION_ENDS, relation_ends_label
from .score import CaptionRecord, RecordReader, grounding_info, manifest_path, score_records

#: default shard size (bytes) when ``shards`` is not given: scoring costs ~2 ms a caption per core
DEFAULT_TARGET_BYTES = 16 << 20
#: captions per task when records already in memory are cut (default)
DEFAULT_RECORDS_PER_TASK = 2048
COUNT_KEYS = ("rows", "icr_ok", "icr_unavailable", "parse_failed")
_STATUS_KEY = {"ok": "icr_ok", "unavailable": "icr_unavailable", "parse_failed": "parse_failed"}


# -- backends, built once per worker process ---------------------------------------------------------
@dataclass(frozen=True)
class BackendSpec:
    """What a worker needs to build the scoring backends: ``graphs`` (``claims``: the offline parser),
    ``grounding`` (CLI specs: ``coco:PATH``, ``coco_mini``, ``coco-panoptic:PATH``, ``seg:module:function``,
    ``none``), ``itm``
    (``annotation_precision`` | ``clip:PATH`` | ``open_clip:ARCH[:PRETRAINED]`` | ``none``) and
    ``image_root`` (relative image paths of CLIP / segmentation backends)."""

    graphs: str = "claims"
    grounding: Tuple[str, ...] = ()
    itm: Optional[str] = None
    image_root: Optional[str] = None

    def validate(self) -> None:
        """Check the spec without loading anything (the driver of a sharded run calls this)."""
        from .grounding import grounding_spec, load_segmenter

        if self.graphs not in ("claims", "offline"):
            raise InputError(f"--graphs {self.graphs} is not sharded: it sends model calls with its own "
                             f"concurrency; run it with --engine local --workers 1", field="--engine")
        coco = False
        for spec in self.grounding:
            kind, arg = grounding_spec(spec)
            if kind == "seg":
                load_segmenter(arg)
            coco = coco or kind != "none"
        kind, _, arg = str(self.itm or "none").partition(":")
        if kind in ("annotation_precision", "annotation-precision") and not arg:
            if not coco:
                raise InputError("the annotation-precision ITM scorer needs a grounding source", field="--itm")
        elif not (kind == "none" or (kind in ("clip", "open_clip") and arg)):
            raise InputError(f"unknown ITM scorer {self.itm!r}; expected annotation_precision, clip:PATH, "
                             "open_clip:ARCH[:PRETRAINED] or none", field="--itm")

    def build(self) -> Tuple[Any, Any, Any]:
        """``(parser, grounding, itm scorer)`` as ``capaudit detail score`` builds them."""
        from .grounding import parse_grounding_specs
        from .itm import make_itm_scorer
        from .parser_factory import offline_parser

        self.validate()
        parser = offline_parser()
        grounding = parse_grounding_specs(list(self.grounding))
        try:
            itm = make_itm_scorer(self.itm, grounding, parser, self.image_root)
        except ValueError as exc:
            if isinstance(exc, InputError):
                raise
            raise InputError(str(exc), field="--itm") from None
        return parser, grounding, itm

    def key(self) -> Tuple[Any, ...]:
        """The cache key: the spec and the size/mtime of its grounding files (edited files reload)."""
        sig = []
        for spec in self.grounding:
            kind, _, arg = str(spec).partition(":")
            if kind in ("coco", "coco-panoptic") and arg:
                arg = arg.partition(":")[0] if kind == "coco-panoptic" else arg
                try:
                    st = os.stat(arg)
                    sig.append((arg, st.st_size, st.st_mtime_ns))
                except OSError:
                    sig.append((arg, None, None))
        return (self, tuple(sig))


_WORKER_BACKENDS: Dict[Tuple[Any, ...], Tuple[Any, Any, Any]] = {}


def worker_backends(spec: BackendSpec) -> Tuple[Any, Any, Any]:
    """The backends of ``spec`` in this worker process: built on first use, then reused."""
    key = spec.key()
    got = _WORKER_BACKENDS.get(key)
    if got is None:
        got = _WORKER_BACKENDS[key] = spec.build()
    return got


def init_worker(spec: BackendSpec) -> None:
    """Local pool initializer: build the backends (spaCy, grounding index) once per process."""
    worker_backends(spec)


def backend_info(parser: Any, grounding: Any, itm: Any) -> Dict[str, Any]:
    """The manifest's ``parser``/``grounding``/``itm`` entries (as :func:`score_file` writes them)."""
    return {"parser": {"name": parser.name, "label": getattr(parser, "label", parser.name),
                       "version": getattr(parser, "version", None) or getattr(parser, "revision", None)},
            "grounding": grounding_info(grounding),
            "itm": {"name": itm.name, "label": itm.label} if itm is not None else None}


# -- reading a shard -----------------------------------------------------------------------------------
@dataclass
class ShardScores:
    """The map result of one shard: its score rows as JSONL ``text`` (``None`` once written), counts,
    what :meth:`RecordReader.finish` needs, the backends' names and the shard's first bad row."""

    text: Optional[str] = ""
    counts: Dict[str, int] = field(default_factory=lambda: dict.fromkeys(COUNT_KEYS, 0))
    has: Dict[str, bool] = field(default_factory=dict)
    seen_fields: List[str] = field(default_factory=list)
    first_missing: Optional[Tuple[str, Optional[int]]] = None
    records: int = 0
    backends: Optional[Dict[str, Any]] = None
    error: Optional[Tuple[str, Optional[str], Optional[int], Optional[str]]] = None  # message, path, line, field


def _shard_rows(shard: Any) -> Iterator[Tuple[Dict[str, Any], Any]]:
    """``(row, line)`` of a shard's non-blank rows; ``line`` is an int (gzip line, Parquet row) or a
    callable (byte-range shards count lines only when an error needs one). Parsing errors match the
    whole-file reader's (:func:`capaudit.engine.shards.iter_shard_objects`)."""
    for row, where in iter_shard_objects(shard):
        yield row, where if where.known is None else where.known


def _resolve(line: Any) -> Optional[int]:
    return line() if callable(line) else line


def _error(exc: InputError) -> Tuple[str, Optional[str], Optional[int], Optional[str]]:
    return (str(exc), exc.path, exc.line, exc.field)


def _raise(err: Tuple[str, Optional[str], Optional[int], Optional[str]]) -> None:
    """Raise a shard's error as the same one-line :class:`InputError` (message, path, line, field)."""
    message, path, line, fld = err
    exc = InputError(message)
    exc.path, exc.line, exc.field = path, line, fld
    raise exc


def score_shard(item: Tuple[Any, int], spec: BackendSpec, caption_field: str = "caption", image_field: str = "image",
                id_field: Optional[str] = "id", relation_ends: str = DEFAULT_RELATION_ENDS,
                length_unit: str = DEFAULT_LENGTH_UNIT, backends: Optional[Tuple[Any, Any, Any]] = None) -> ShardScores:
    """The map step: score the captions of one shard (``item`` = ``(shard, rows before it)``, the
    second used for ``row<N>`` ids) in input order. ``backends``: built ones (else :func:`worker_backends`)."""
    shard, base = item
    parser, grounding, itm = backends if backends is not None else worker_backends(spec)
    reader = RecordReader(caption_field, image_field, id_field)
    out = ShardScores(backends=backend_info(parser, grounding, itm))
    records: List[CaptionRecord] = []
    try:
        for n, (row, line) in enumerate(_shard_rows(shard), start=base):
            rec = reader.record(row, n, shard.path, line)
            if rec is not None:
                records.append(rec)
    except InputError as exc:  # the driver raises the first bad row in input order
        out.error = _error(exc)
        out.text = None
        return out
    out.has = dict(reader.has)
    out.seen_fields = sorted(reader.seen_fields)
    if reader.first_missing is not None:
        out.first_missing = (str(reader.first_missing[0]), _resolve(reader.first_missing[1]))
    out.records = reader.records
    lines = []
    for row in score_records(records, parser, grounding, itm, relation_ends, length_unit):
        out.counts["rows"] += 1
        out.counts[_STATUS_KEY[row["icr_status"]]] += 1
        lines.append(json.dumps(row, ensure_ascii=False) + "\n")
    out.text = "".join(lines)
    return out


class _OrderedWriter:
    """The merge step: parts arrive in shard order (the engine's guarantee); each part's rows are
    written once, the first bad row raises, the rest is summed. Associative: a merged part is a part
    whose text is already written."""

    def __init__(self, fh: Any):
        self.fh = fh

    def __call__(self, parts: Sequence[ShardScores]) -> ShardScores:
        out = ShardScores(text=None)
        seen: set = set()
        for p in parts:
            if p.error is not None:
                _raise(p.error)
            if p.text:
                self.fh.write(p.text)
            for k, v in p.counts.items():
                out.counts[k] = out.counts.get(k, 0) + v
            for k, v in p.has.items():
                out.has[k] = out.has.get(k, False) or v
            seen.update(p.seen_fields)
            if out.first_missing is None:
                out.first_missing = p.first_missing
            out.records += p.records
            out.backends = out.backends or p.backends
        out.seen_fields = sorted(seen)
        return out


def row_bases(shards: Sequence[Any]) -> List[int]:
    """Non-blank rows before each shard (all input files in order): the N of ``row<N>`` ids."""
    from capaudit.engine.shards import iter_shard_lines

    bases, total = [], 0
    for s in shards:
        bases.append(total)
        if s.format == "parquet":
            import pyarrow.parquet as pq

            from capaudit.engine.shards import open_binary

            with open_binary(s.path) as fh:
                md = pq.ParquetFile(fh).metadata
                stop = md.num_row_groups if s.stop < 0 else s.stop
                total += sum(md.row_group(g).num_rows for g in range(s.start, stop))
        else:
            for off, raw in iter_shard_lines(s):
                if off == 0 and raw.startswith(b"\xef\xbb\xbf"):
                    raw = raw[3:]
                if raw.decode("utf-8", "surrogateescape").strip():
                    total += 1
    return bases


def _input_label(inputs: Any) -> str:
    """How whole-input errors name the input (a single local path as :class:`pathlib.Path` prints it)."""
    if isinstance(inputs, (str, Path)):
        return str(inputs) if "://" in str(inputs) else str(Path(inputs))
    return ", ".join(map(str, inputs))


def _check_options(relation_ends: str, length_unit: str) -> None:
    if relation_ends not in RELATION_ENDS:
        raise InputError(f"relation_ends must be one of {RELATION_ENDS}", field="relation_ends")
    if length_unit not in LENGTH_UNITS:
        raise InputError(f"length unit must be one of {LENGTH_UNITS}", field="length_unit")


def score_file_engine(inputs: Any, out: Any, spec: BackendSpec, caption_field: str = "caption",
                      image_field: str = "image", id_field: Optional[str] = "id",
                      relation_ends: str = DEFAULT_RELATION_ENDS, length_unit: str = DEFAULT_LENGTH_UNIT, *,
                      engine: str = "local", workers: int = 1, address: Optional[str] = None,
                      shards: Optional[int] = None) -> Dict[str, Any]:
    """``capaudit detail score`` on an engine (module docstring): score rows of JSONL / Parquet
    ``inputs`` to ``out`` (atomic) and ``OUT.manifest.json`` (last); returns the manifest.

    ``shards`` defaults to pieces of about 16 MiB, at least one per worker. With several input
    files, ``row<N>`` ids (no id field) number the rows of all files in order."""
    from capaudit.engine.executors import check_engine, map_merge
    from capaudit.engine.shards import default_num_shards, list_shards
    from capaudit.io.atomic import atomic_path, write_json_atomic

    t0 = time.monotonic()
    engine = check_engine(engine)
    _check_options(relation_ends, length_unit)
    spec.validate()
    n = shards if shards is not None else default_num_shards(inputs, workers, DEFAULT_TARGET_BYTES)
    parts = list_shards(inputs, num_shards=n)
    bases = row_bases(parts) if not id_field else [0] * len(parts)
    in_process = engine == "local" and (workers <= 1 or len(parts) == 1)
    fn = partial(score_shard, spec=spec, caption_field=caption_field, image_field=image_field, id_field=id_field,
                 relation_ends=relation_ends, length_unit=length_unit,
                 backends=spec.build() if in_process else None)
    out = Path(out)
    with atomic_path(out) as tmp:
        with open(tmp, "w", encoding="utf-8") as fh:
            writer = _OrderedWriter(fh)
            total = map_merge(list(zip(parts, bases)), fn, writer, engine=engine, workers=workers, address=address,
                              initializer=None if in_process else init_worker, initargs=(spec,))
            total = writer([total])  # a single part is returned unmerged: write it
        reader = RecordReader(caption_field, image_field, id_field)
        reader.has, reader.seen_fields, reader.records = dict(total.has), set(total.seen_fields), total.records
        reader.first_missing = total.first_missing
        reader.finish(_input_label(inputs))
    info = total.backends or {}
    manifest = {
        "command": "capaudit detail score", "input": str(inputs), "output": out.name,
        "fields": {"caption": caption_field, "image": image_field, "id": id_field},
        "parser": info.get("parser"), "grounding": info.get("grounding"), "itm": info.get("itm"),
        "relation_ends": relation_ends, "relation_ends_label": relation_ends_label(relation_ends),
        "icr": (info.get("grounding") or {}).get("icr") or icr_name([]), "length_unit": length_unit,
        "counts": total.counts,
        "engine": {"engine": engine, "workers": workers, "shards": len(parts)},
        "elapsed_sec": round(time.monotonic() - t0, 3),
    }
    write_json_atomic(manifest_path(out), manifest)
    return manifest


# -- records already in memory ----------------------------------------------------------------------------
def _score_slice(records: Sequence[CaptionRecord], spec: BackendSpec, relation_ends: str, length_unit: str,
                 backends: Optional[Tuple[Any, Any, Any]] = None) -> List[Dict[str, Any]]:
    parser, grounding, itm = backends if backends is not None else worker_backends(spec)
    return list(score_records(records, parser, grounding, itm, relation_ends, length_unit))


def _concat(parts: Sequence[List[Dict[str, Any]]]) -> List[Dict[str, Any]]:
    out: List[Dict[str, Any]] = []
    for p in parts:
        out += p
    return out


def score_records_engine(records: Sequence[CaptionRecord], spec: BackendSpec,
                         relation_ends: str = DEFAULT_RELATION_ENDS, length_unit: str = DEFAULT_LENGTH_UNIT, *,
                         engine: str = "local", workers: int = 1, address: Optional[str] = None,
                         shards: Optional[int] = None,
                         backends: Optional[Tuple[Any, Any, Any]] = None) -> List[Dict[str, Any]]:
    """:func:`capaudit.detail.score.score_records` of in-memory records on an engine: ``shards``
    contiguous slices (default: ~2,048 captions each, at least one per worker), rows concatenated in
    input order. ``backends``: already built ones, used when the slices run in this process."""
    from capaudit.engine.executors import check_engine, map_merge

    engine = check_engine(engine)
    _check_options(relation_ends, length_unit)
    if not records:
        return []
    k = shards if shards is not None else max(workers, -(-len(records) // DEFAULT_RECORDS_PER_TASK))
    k = max(1, min(int(k), len(records)))
    cuts = [len(records) * i // k for i in range(k + 1)]
    slices = [list(records[cuts[i]:cuts[i + 1]]) for i in range(k)]
    in_process = engine == "local" and (workers <= 1 or k == 1)
    if not in_process:
        spec.validate()
    fn = partial(_score_slice, spec=spec, relation_ends=relation_ends, length_unit=length_unit,
                 backends=(backends or spec.build()) if in_process else None)
    return map_merge(slices, fn, _concat, engine=engine, workers=workers, address=address,
                     initializer=None if in_process else init_worker, initargs=(spec,))


__all__ = ["BackendSpec", "ShardScores", "backend_info", "init_worker", "line_at", "row_bases", "score_file_engine",
           "score_records_engine", "score_shard", "worker_backends"]
