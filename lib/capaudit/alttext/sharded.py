"""The alt-text stage on the engine (issue 15): coverage and filter funnels over shards.

``capaudit coverage`` and ``capaudit alttext filter`` with ``--engine local|ray``, ``--workers``,
``--address``, ``--shards`` cut JSONL / Parquet inputs into shards (:func:`capaudit.engine.list_shards`)
and run them with :func:`capaudit.engine.map_merge`; the outputs are byte-identical to a
single-process run, whatever the engine, workers or shards:

* rows are read exactly as the single-process reader reads them (:func:`shard_rows`: the same JSON
  parser, BOM and blank-line rules, Parquet values; errors name the file and line / row, computed
  only when one is raised), and numbered globally from the per-shard row counts of pass 1;
* **coverage** maps a shard to a :class:`CoveragePart` (integer counts and ``Counter`` s; merge = add,
  in shard order, so ties among top tokens / sites keep the order of first occurrence) and finalises
  (median, per-million, ≥K curve, ratios) once, after the merge;
* **filter**: pass 1 maps shards to their row counts and the two-pass blocks' tables
  (:meth:`~capaudit.alttext.blocks.Block.merge_states`: exact counts added); like the single-process
  run, pass 1 observes *every* non-empty input text, not only the rows that reach the rare-word
  block. Pass 2 gives each shard the batches (of ``batch_size`` rows, starting at multiples of
  ``batch_size`` in global row order) that *start* in it, reading on into the next shards to finish
  its last batch, so every batch, and so every spaCy ``nlp.pipe`` call, holds exactly the rows of the
  single-process run. Each shard writes its kept / dropped rows to part files beside the output;
  the driver sums the funnel counts and concatenates the parts in shard order into the atomically
  written outputs (rows are never held by the driver). The merged table travels once per worker
  process (:class:`Shared`); pipelines are rebuilt from their specs once per worker process, so the
  spaCy / langid / WordNet models load once per process.

A bad row (an :class:`InputError` in a shard) is returned as the shard's part and raised by the merge,
which runs in shard order: the error reported is the first in input order, as on one machine.

Part files go to a temporary folder beside the output: with a remote Ray cluster (``--address``)
the output folder and the inputs must be on a file system every node sees.
"""

from __future__ import annotations

import json
import pickle
import shutil
import tempfile
import time
import uuid
from collections import Counter
from contextlib import ExitStack
from dataclasses import dataclass, field, replace
from functools import partial
from itertools import islice
from pathlib import Path
from typing import Any, Dict, Iterable, Iterator, List, Mapping, Optional, Sequence, Tuple, Union

from capaudit.engine.executors import check_engine, map_merge
from capaudit.engine.shards import (Shard, default_num_shards, file_format, iter_shard_objects, iter_shard_text_lines,
                                     list_shards, open_parquet)
from capaudit.errors import EmptyInputError, InputError
from capaudit.io.atomic import atomic_write, check_output_path

from .coverage import CoverageCounter, HypernymCounts, coverage_of_texts, texts_of_rows
from .funnel import build_pipeline, dropped_line, kept_line
from .rows import RowSource, source_format
from .vocab import Vocabulary

SHARDABLE = ("JSONL (.jsonl, .ndjson, .jsonl.gz) or Parquet input (a file, a folder of Parquet files "
             "or a glob of such files)")
Row = Dict[str, Any]


# --- which inputs shard ----------------------------------------------------------------------------------

def shard_files(src: RowSource) -> Optional[List[str]]:
    """The files of ``src`` in the order a single-process run reads them, when every one is JSONL or
    Parquet (by format and by name) and no ``max_rows`` limits the rows; else None."""
    s = src.spec
    if s.get("rows") is not None or s.get("source") or s.get("format") == "hf" or s.get("max_rows") is not None \
            or not src.files:
        return None
    out: List[str] = []
    for f in src.files:
        p = Path(f)
        try:
            fmt = source_format(p, s)
        except InputError:
            return None
        if fmt == "parquet" and p.is_dir():
            found = sorted(p.rglob("*.parquet"))  # the single-process Parquet reader's order
            if not found:
                return None
            out += [str(x) for x in found]
        elif fmt in ("parquet", "jsonl") and p.is_file():
            out.append(str(p))
        else:
            return None
    for f in out:
        try:
            name_fmt = file_format(f)
        except InputError:
            return None
        if (name_fmt == "parquet") != (source_format(Path(f), s) == "parquet"):
            return None
    return out


def use_engine(src: RowSource, engine: str, workers: int, shards: Optional[int], limited: bool = False
               ) -> Optional[List[str]]:
    """The files to shard when this run goes through the engine; None for a single-process run.

    ``engine="local"`` with one worker and no ``shards`` runs in this process; otherwise a shardable
    input (:func:`shard_files`) is sharded. ``engine="ray"`` on any other input (or with a row limit,
    ``limited``) is an :class:`InputError` naming the input and the formats that shard.
    """
    engine = check_engine(engine)
    if isinstance(workers, bool) or not isinstance(workers, int) or workers < 1:
        raise InputError(f"workers must be an integer >= 1, got {workers!r}", field="workers")
    if shards is not None and (isinstance(shards, bool) or not isinstance(shards, int) or shards < 1):
        raise InputError(f"shards must be an integer >= 1, got {shards!r}", field="shards")
    if engine == "local" and workers <= 1 and shards is None:
        return None
    files = None if limited else shard_files(src)
    if files is None and engine == "ray":
        raise InputError(f"--engine ray needs {SHARDABLE} and no --max-rows", path=src.label)
    return files


def alttext_shards(files: Sequence[str], engine: str = "local", workers: int = 1,
                   shards: Optional[int] = None) -> List[Shard]:
    """Shards of ``files`` (:func:`capaudit.engine.list_shards`), in the single-process reading order
    (``files`` order, then offsets). Default count: one per worker locally (pieces of at most 1 GiB),
    ~128 MiB pieces on Ray, as ``text-stats``."""
    from capaudit.surfaces.readers import not_text_hint

    for f in files:
        if file_format(f) == "parquet":
            open_parquet(f)  # a readable Parquet file, or the single-process reader's error
        else:
            hint = not_text_hint(Path(f))
            if hint:
                raise InputError(hint, path=f)
    target = (1 << 30) if engine == "local" else (128 << 20)
    n = shards if shards is not None else default_num_shards(list(files), workers, target)
    parts = list_shards(list(files), num_shards=n)
    rank = {f: i for i, f in enumerate(files)}
    parts.sort(key=lambda s: (rank[s.path], s.start))
    return [replace(s, index=i, count=len(parts)) for i, s in enumerate(parts)]


def shard_rows(shard: Shard) -> Iterator[Tuple[Row, Any]]:
    """``(row, where)`` of every row of a shard, as :class:`~capaudit.alttext.rows.RowSource` reads the
    file (same values; ``where`` prints as ``<file>: line <n>`` / ``<file>: row <n>``)."""
    return iter_shard_objects(shard)


def count_rows(shard: Shard) -> int:
    """Rows of a shard without parsing them (Parquet: metadata; JSONL: non-blank lines)."""
    if shard.format == "parquet":
        md = open_parquet(shard.path).metadata
        stop = md.num_row_groups if shard.stop < 0 else shard.stop
        return sum(md.row_group(g).num_rows for g in range(shard.start, stop))
    return sum(1 for _ in iter_shard_text_lines(shard))


# --- running: errors in input order ----------------------------------------------------------------------

class _Failed:
    """A shard's :class:`InputError`, returned as its part so that the merge (in shard order) raises the
    first one in input order: the error a single-process run would report."""

    def __init__(self, exc: InputError):
        self.exc = exc


def _catching(fn: Any, item: Any) -> Any:
    try:
        return fn(item)
    except InputError as exc:
        return _Failed(exc)


def _checked(merge: Any, parts: List[Any]) -> Any:
    for p in parts:
        if isinstance(p, _Failed):
            raise p.exc
    return merge(parts)


def run_shards(items: Sequence[Any], fn: Any, merge: Any, engine: str, workers: int, address: Optional[str]) -> Any:
    """:func:`capaudit.engine.map_merge` whose bad-input errors come in input order (:class:`_Failed`)."""
    out = map_merge(items, partial(_catching, fn), partial(_checked, merge), engine=engine, workers=workers,
                    address=address)
    if isinstance(out, _Failed):
        raise out.exc
    return out


# --- broadcast ---------------------------------------------------------------------------------------------

_SHARED: Dict[str, "Shared"] = {}


class Shared:
    """A payload (e.g. the merged rare-word table) pickled once in the driver and unpickled once per
    worker process: tasks of one run find it in a per-process cache (the latest run's only) by token."""

    def __init__(self, payload: Any):
        self.token = uuid.uuid4().hex
        self.payload = payload
        self._blob: Optional[bytes] = None

    def __reduce__(self):
        if self._blob is None:
            self._blob = pickle.dumps(self.payload, protocol=pickle.HIGHEST_PROTOCOL)
        return (_restore_shared, (self.token, self._blob))


def _restore_shared(token: str, blob: bytes) -> Shared:
    hit = _SHARED.get(token)
    if hit is None:
        hit = Shared.__new__(Shared)
        hit.token, hit.payload, hit._blob = token, pickle.loads(blob), blob
        _SHARED.clear()
        _SHARED[token] = hit
    return hit


# --- coverage ------------------------------------------------------------------------------------------------

@dataclass
class CoveragePart:
    """Mergeable exact coverage counts of some records for several vocabularies at once."""

    records: int = 0
    words: int = 0
    urls: int = 0
    tokens: Counter = field(default_factory=Counter)
    hosts: Counter = field(default_factory=Counter)
    sites: Counter = field(default_factory=Counter)
    mentions: Dict[str, Counter] = field(default_factory=dict)
    hypernyms: Optional[HypernymCounts] = None

    @classmethod
    def from_counters(cls, counters: Mapping[str, CoverageCounter], hypernyms: Optional[HypernymCounts] = None
                      ) -> "CoveragePart":
        first = next(iter(counters.values()))
        return cls(first.records, first.words, first.urls, first.tokens, first.hosts, first.sites,
                   {name: c.mentions for name, c in counters.items()}, hypernyms)

    def merge(self, other: "CoveragePart") -> "CoveragePart":
        """Add ``other`` (records after this part's: ``Counter`` insertion order stays first-occurrence)."""
        self.records += other.records
        self.words += other.words
        self.urls += other.urls
        for a, b in ((self.tokens, other.tokens), (self.hosts, other.hosts), (self.sites, other.sites)):
            a.update(b)
        for name, m in other.mentions.items():
            self.mentions.setdefault(name, Counter()).update(m)
        if other.hypernyms is not None:
            if self.hypernyms is None:
                self.hypernyms = other.hypernyms
            else:
                self.hypernyms.merge(other.hypernyms)
        return self

    def counters(self, vocabs: Sequence[Vocabulary], lemmatiser: str) -> Dict[str, CoverageCounter]:
        """One :class:`CoverageCounter` per vocabulary (sharing the text counts, as
        :func:`~capaudit.alttext.coverage.coverage_of_texts` does)."""
        return {v.name: CoverageCounter(v, lemmatiser, self.records, self.words, self.mentions.get(v.name, Counter()),
                                        self.tokens, self.hosts, self.sites, self.urls) for v in vocabs}


def _merge_parts(parts: List[Any]) -> Any:
    acc = parts[0]
    for p in parts[1:]:
        acc = acc.merge(p)
    return acc


def coverage_shard(shard: Shard, *, text_field: str, url_field: Optional[str], vocabs: Sequence[Vocabulary],
                   lemmatiser: str = "wordnet", lists: bool = True,
                   hypernyms: Optional[Sequence[str]] = None) -> CoveragePart:
    """Map step: the :class:`CoveragePart` of one shard (``lists``: the text rules of
    :func:`~capaudit.alttext.coverage.texts_of_rows`; ``hypernyms``: also count the CC3M hypernym check)."""
    texts: Iterable[Tuple[str, Optional[str]]] = texts_of_rows(shard_rows(shard), text_field, url_field, lists=lists)
    hyp = HypernymCounts(tuple(hypernyms)) if hypernyms is not None else None
    if hyp is not None:
        texts = hyp.feed(texts)
    return CoveragePart.from_counters(coverage_of_texts(texts, vocabs, lemmatiser), hyp)


def coverage_sharded(src: RowSource, files: Sequence[str], text_field: str, vocabs: Sequence[Vocabulary], *,
                     url_field: Optional[str] = None, lemmatiser: str = "wordnet", lists: bool = True,
                     hypernyms: Optional[Sequence[str]] = None, engine: str = "local", workers: int = 1,
                     address: Optional[str] = None, shards: Optional[int] = None) -> CoveragePart:
    """:func:`coverage_shard` of every shard of ``files``, merged in shard order."""
    parts = alttext_shards(files, engine, workers, shards)
    fn = partial(coverage_shard, text_field=text_field, url_field=url_field, vocabs=list(vocabs),
                 lemmatiser=lemmatiser, lists=lists, hypernyms=None if hypernyms is None else list(hypernyms))
    return run_shards(parts, fn, _merge_parts, engine, workers, address)


# --- filter funnels ----------------------------------------------------------------------------------------

_PIPELINES: Dict[str, Any] = {}


def _recipe(pipe: Any) -> Tuple[str, Any]:
    """How a worker gets the pipeline: rebuilt from its specs when they describe it exactly, else pickled."""
    if pipe.specs:
        try:
            same = build_pipeline(pipe.specs, name=pipe.name).describe() == pipe.describe()
        except InputError:
            same = False
        if same:
            return "specs", json.dumps([pipe.name, pipe.specs], sort_keys=True, default=str)
    return "pipeline", pipe


def _pipeline(recipe: Tuple[str, Any]) -> Any:
    """The pipeline of ``recipe``, built once per process (its blocks load spaCy / langid / WordNet once)."""
    kind, value = recipe
    if kind == "pipeline":
        return value
    pipe = _PIPELINES.get(value)
    if pipe is None:
        name, specs = json.loads(value)
        pipe = build_pipeline(specs, name=name)
        if len(_PIPELINES) >= 8:
            _PIPELINES.clear()
        _PIPELINES[value] = pipe
    return pipe


def _filter_pass1(shard: Shard, *, recipe: Tuple[str, Any], text_field: str, label: str) -> Dict[str, Any]:
    """Map step of pass 1: the shard's row count and the two-pass blocks' tables of its texts."""
    pipe = _pipeline(recipe)
    two = pipe.two_pass_blocks
    if not two:
        return {"rows": [count_rows(shard)], "states": []}
    n = pipe.observe(shard_rows(shard), text_field, label)
    return {"rows": [n], "states": [b.state() for b in two]}


def _owned(i: int, offsets: Sequence[int], counts: Sequence[int], total: int, batch: int) -> Tuple[int, int]:
    """Global rows [a, b) shard ``i`` filters: the batches that start in it (batches start at multiples
    of ``batch``); consecutive shards' ranges tile [0, total)."""
    up = lambda x: -(-x // batch) * batch  # noqa: E731
    return min(up(offsets[i]), total), min(up(offsets[i] + counts[i]), total)


def _filter_pass2(i: int, *, shared: Shared, recipe: Tuple[str, Any], text_field: str, label: str, batch_size: int,
                  parts_dir: str, with_dropped: bool) -> List[Dict[str, Any]]:
    """Map step of pass 2 for shard ``i``: filter its batches, write kept / dropped part files."""
    ctx = shared.payload
    shards, offsets, counts, total = ctx["shards"], ctx["offsets"], ctx["counts"], ctx["total"]
    a, b = _owned(i, offsets, counts, total, batch_size)
    if a >= b:
        return [{"index": i, "rows": 0, "steps": None, "parsed": 0, "kept": None, "dropped": None}]
    pipe = _pipeline(recipe)
    for blk, st in zip(pipe.two_pass_blocks, ctx["states"]):
        blk.load_state(st)

    def rows() -> Iterator[Tuple[Row, Any]]:
        skip = a - offsets[i]
        for j in range(i, len(shards)):
            for r in shard_rows(shards[j]):
                if skip:
                    skip -= 1
                    continue
                yield r

    kept_path = Path(parts_dir) / f"kept-{i:05d}.jsonl"
    dropped_path = Path(parts_dir) / f"dropped-{i:05d}.jsonl" if with_dropped else None
    with ExitStack() as stack:  # the single-process writer's text mode: same bytes
        kept_fh = stack.enter_context(open(kept_path, "w", encoding="utf-8"))
        dropped_fh = stack.enter_context(open(dropped_path, "w", encoding="utf-8")) if dropped_path else None
        steps, n, parsed = pipe.filter_rows(
            islice(rows(), b - a), text_field, start=a, batch_size=batch_size,
            on_kept=lambda it: kept_fh.write(kept_line(it, text_field)),
            on_dropped=(lambda it, rule: dropped_fh.write(dropped_line(it, rule))) if dropped_fh else None,
            label=label)
    if n != b - a:
        raise InputError(f"the input changed while it was read: expected {b - a} rows from row {a}, read {n}",
                         path=shards[i].path)
    return [{"index": i, "rows": n, "parsed": parsed, "kept": str(kept_path),
             "dropped": str(dropped_path) if dropped_path else None,
             "steps": [(s.rows_in, s.dropped, s.kept, s.unchecked, s.changed) for s in steps]}]


def _concat(parts: List[List[Any]]) -> List[Any]:
    return [x for p in parts for x in p]


def filter_sharded(src: RowSource, files: Sequence[str], text_field: str, pipe: Any, out: Union[str, Path],
                   funnel_path: Union[str, Path], dropped_path: Optional[Union[str, Path]] = None, *,
                   batch_size: int = 256, engine: str = "local", workers: int = 1, address: Optional[str] = None,
                   shards: Optional[int] = None) -> Any:
    """:func:`~capaudit.alttext.file_runs.filter_file` on the engine (module docstring): the same kept /
    dropped JSONL and funnel CSV bytes as a single-process run; returns the :class:`Funnel`."""
    t0 = time.perf_counter()
    for p in (out, funnel_path, dropped_path):
        if p is not None:
            check_output_path(p)
    parts = alttext_shards(files, engine, workers, shards)
    recipe = _recipe(pipe)
    two = pipe.two_pass_blocks

    def merge1(ps: List[Dict[str, Any]]) -> Dict[str, Any]:
        return {"rows": [n for p in ps for n in p["rows"]],
                "states": [b.merge_states([p["states"][k] for p in ps]) for k, b in enumerate(two)]}

    p1 = run_shards(parts, partial(_filter_pass1, recipe=recipe, text_field=text_field, label=src.label), merge1,
                    engine, workers, address)
    counts = p1["rows"]
    total = sum(counts)
    if total == 0:
        raise EmptyInputError("input has no rows", path=src.label)
    for b, st in zip(two, p1["states"]):
        b.load_state(st)  # the driver's pipeline holds the whole-input table, as after a single-process run
    offsets = [0]
    for n in counts[:-1]:
        offsets.append(offsets[-1] + n)
    shared = Shared({"shards": parts, "offsets": offsets, "counts": counts, "total": total, "states": p1["states"]})
    Path(out).parent.mkdir(parents=True, exist_ok=True)
    parts_dir = tempfile.mkdtemp(prefix=f".{Path(out).name}.parts-", dir=Path(out).parent)
    try:
        fn = partial(_filter_pass2, shared=shared, recipe=recipe, text_field=text_field, label=src.label,
                     batch_size=batch_size, parts_dir=parts_dir, with_dropped=dropped_path is not None)
        results = run_shards(list(range(len(parts))), fn, _concat, engine, workers, address)
        steps = pipe.new_steps()
        parsed = 0
        for r in results:
            parsed += r["parsed"]
            for s, c in zip(steps, r["steps"] or ()):
                s.rows_in += c[0]
                s.dropped += c[1]
                s.kept += c[2]
                s.unchecked += c[3]
                s.changed += c[4]
        funnel = pipe.funnel(steps, total, parsed, time.perf_counter() - t0)
        with ExitStack() as stack:  # renamed funnel, dropped, kept: the single-process order
            kept_fh = stack.enter_context(atomic_write(out, "wb"))
            dropped_fh = stack.enter_context(atomic_write(dropped_path, "wb")) if dropped_path else None
            for r in results:
                for part, fh in ((r["kept"], kept_fh), (r["dropped"], dropped_fh)):
                    if part is not None and fh is not None:
                        with open(part, "rb") as src_fh:
                            shutil.copyfileobj(src_fh, fh, 1 << 20)
            with atomic_write(funnel_path, newline="") as fh:
                fh.write(funnel.to_csv_text())
        funnel.seconds = time.perf_counter() - t0
        return funnel
    finally:
        shutil.rmtree(parts_dir, ignore_errors=True)


__all__ = ["SHARDABLE", "CoveragePart", "Shared", "alttext_shards", "count_rows", "coverage_shard", "coverage_sharded",
           "filter_sharded", "shard_files", "shard_rows", "use_engine"]
