"""Filter funnels: a pipeline (ordered blocks) streamed over rows, with a funnel table.

:func:`build_pipeline` accepts a shipped pipeline name (``cc3m``, ``cc12m``), a YAML file holding a
list of blocks (or ``{blocks: [...]}``) or the list itself.  :meth:`Pipeline.run` streams a
:class:`~capaudit.alttext.rows.RowSource` in batches (memory: one batch plus the rare-word count
table), calls ``on_kept(item)`` / ``on_dropped(item, rule)`` for every row in input order, and
returns a :class:`Funnel`: per block rows in / dropped / kept (plus ``unchecked`` rows that passed
because there was nothing to check, and ``changed`` rows a transformation rewrote).  The first row
of every funnel is the built-in ``empty_text`` step (rows whose text is null or blank).  Two-pass
blocks (``rare_words``) observe every input text in a first pass.

:func:`capaudit.alttext.file_runs.filter_file` is the CLI/stage entry: kept rows → JSONL, dropped
rows (with ``dropped_by``) → JSONL, funnel → CSV, all written atomically.
"""

from __future__ import annotations

import csv
import io
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Callable, Dict, Iterable, List, Mapping, Optional, Sequence, Tuple, Union

import yaml

from capaudit.errors import InputError

from .blocks import CHANGED, DROP, KEEP, UNCHECKED, Block, Context, Item, build_block
from .resources import shipped_pipelines
from .rows import RowSource, dumps_row, get_field

EMPTY_RULE = "empty_text"
FUNNEL_COLUMNS = ["order", "rule", "block", "kind", "rows_in", "dropped", "kept", "unchecked", "changed", "backend"]
PipelineSpec = Union[str, Path, Sequence[Mapping[str, Any]], Mapping[str, Any]]


@dataclass
class FunnelRow:
    order: int
    rule: str
    block: str
    kind: str
    rows_in: int = 0
    dropped: int = 0
    kept: int = 0
    unchecked: int = 0
    changed: int = 0
    backend: str = ""


@dataclass
class Funnel:
    """Funnel table of one run: one :class:`FunnelRow` per step, in pipeline order."""

    pipeline: str
    rows: List[FunnelRow]
    input_rows: int = 0
    seconds: float = 0.0
    extra: Dict[str, Any] = field(default_factory=dict)

    @property
    def kept(self) -> int:
        return self.rows[-1].kept if self.rows else 0

    @property
    def dropped(self) -> int:
        return sum(r.dropped for r in self.rows)

    def check(self) -> None:
        """Assert the counts add up (each step: in − dropped = kept = next step's in)."""
        prev = self.input_rows
        for r in self.rows:
            if r.rows_in != prev or r.rows_in - r.dropped != r.kept:
                raise AssertionError(f"funnel step {r.rule!r} does not add up: in {r.rows_in} (expected {prev}), "
                                     f"dropped {r.dropped}, kept {r.kept}")
            prev = r.kept
        if self.dropped + self.kept != self.input_rows:
            raise AssertionError("dropped + kept != input rows")

    def to_records(self) -> List[Dict[str, Any]]:
        return [asdict(r) for r in self.rows]

    def to_frame(self):  # -> pandas.DataFrame
        import pandas as pd

        return pd.DataFrame(self.to_records(), columns=FUNNEL_COLUMNS)

    def to_csv_text(self) -> str:
        buf = io.StringIO()
        w = csv.DictWriter(buf, fieldnames=FUNNEL_COLUMNS, lineterminator="\n")
        w.writeheader()
        for r in self.to_records():
            w.writerow(r)
        return buf.getvalue()

    def to_dict(self) -> Dict[str, Any]:
        return {"pipeline": self.pipeline, "input_rows": self.input_rows, "kept": self.kept, "dropped": self.dropped,
                "seconds": round(self.seconds, 3), "rows": self.to_records(), **self.extra}


class Pipeline:
    """An ordered list of blocks under a name."""

    def __init__(self, name: str, blocks: Sequence[Block], specs: Optional[List[Dict[str, Any]]] = None):
        if not blocks:
            raise InputError(f"pipeline {name!r} has no blocks")
        names = [b.name for b in blocks]
        dup = sorted({n for n in names if names.count(n) > 1})
        if dup:
            raise InputError(f"pipeline {name!r}: block names must be unique; repeated: {dup} (set 'name')")
        if EMPTY_RULE in names:
            raise InputError(f"pipeline {name!r}: {EMPTY_RULE!r} is reserved")
        seen_transform = False
        for b in blocks:
            if b.kind == "transform":
                seen_transform = True
            elif seen_transform and b.two_pass:
                raise InputError(f"pipeline {name!r}: two-pass block {b.name!r} must come before the transformations")
        self.name = name
        self.blocks = list(blocks)
        self.specs = specs or []

    @property
    def needs(self) -> frozenset:
        out: set = set()
        for b in self.blocks:
            out |= set(b.needs)
        return frozenset(out)

    def describe(self) -> List[Dict[str, Any]]:
        return [{"name": b.name, "block": b.type, "kind": b.kind, "params": _jsonable(b.params)} for b in self.blocks]

    # -- running ----------------------------------------------------------------------------------
    def run(self, source: Union[RowSource, Iterable[Tuple[Dict[str, Any], str]]], text_field: str, *,
            batch_size: int = 256, spacy_batch_size: int = 256,
            on_kept: Optional[Callable[[Item], None]] = None,
            on_dropped: Optional[Callable[[Item, str], None]] = None,
            progress: Optional[Callable[[int], None]] = None) -> Funnel:
        """Stream ``source`` (a :class:`RowSource` or any re-iterable of ``(row, where)``; iterated twice
        when a block is two-pass) through the blocks; see the module docstring."""
        if batch_size < 1:
            raise InputError("batch_size must be >= 1")
        t0 = time.perf_counter()
        label = getattr(source, "label", "input")
        if self.two_pass_blocks:
            self.observe(source, text_field, label)
        steps, n_in, parsed = self.filter_rows(source, text_field, batch_size=batch_size,
                                               spacy_batch_size=spacy_batch_size, on_kept=on_kept,
                                               on_dropped=on_dropped, progress=progress, label=label)
        return self.funnel(steps, n_in, parsed, time.perf_counter() - t0)

    @property
    def two_pass_blocks(self) -> List[Block]:
        return [b for b in self.blocks if b.two_pass]

    def observe(self, rows: Iterable[Tuple[Dict[str, Any], str]], text_field: str, label: str = "input") -> int:
        """Pass 1 of the two-pass blocks: reset them, then let them observe the text of every row whose
        text is not empty (whatever the blocks before them would do). Returns the number of rows."""
        two_pass = self.two_pass_blocks
        for b in two_pass:
            b.reset()
        n = 0
        for row, where in rows:
            n += 1
            text = _text_of(row, text_field, where, label)
            if text is not None:
                for b in two_pass:
                    b.observe(text)
        return n

    def new_steps(self) -> List[FunnelRow]:
        """Empty funnel rows: the built-in ``empty_text`` step, then one per block."""
        steps = [FunnelRow(0, EMPTY_RULE, "input", "input", backend="built-in")]
        steps += [FunnelRow(i + 1, b.name, b.type, b.kind, backend=b.backend) for i, b in enumerate(self.blocks)]
        return steps

    def filter_rows(self, rows: Iterable[Tuple[Dict[str, Any], str]], text_field: str, *, start: int = 0,
                    batch_size: int = 256, spacy_batch_size: int = 256,
                    on_kept: Optional[Callable[[Item], None]] = None,
                    on_dropped: Optional[Callable[[Item, str], None]] = None,
                    progress: Optional[Callable[[int], None]] = None,
                    label: str = "input") -> Tuple[List[FunnelRow], int, int]:
        """Pass 2 over ``rows`` (two-pass blocks already hold their tables): batches of ``batch_size``
        consecutive rows, numbered from ``start``. Returns (funnel rows, rows read, texts parsed by spaCy).

        A sharded run (:mod:`capaudit.alttext.sharded`) starts every piece at a multiple of
        ``batch_size``, so its batches are exactly those of a single-process run.
        """
        if batch_size < 1:
            raise InputError("batch_size must be >= 1")
        ctx = Context(self.needs, spacy_batch_size)
        steps = self.new_steps()
        n_in = 0
        batch: List[Tuple[int, Dict[str, Any], str]] = []
        for row, where in rows:
            batch.append((start + n_in, row, where))
            n_in += 1
            if len(batch) >= batch_size:
                self._batch(batch, text_field, label, ctx, steps, on_kept, on_dropped)
                batch = []
                if progress:
                    progress(n_in)
        if batch:
            self._batch(batch, text_field, label, ctx, steps, on_kept, on_dropped)
            if progress:
                progress(n_in)
        return steps, n_in, ctx.parsed

    def funnel(self, steps: List[FunnelRow], n_in: int, parsed: int, seconds: float) -> Funnel:
        """The checked :class:`Funnel` of a run (``extra``: texts parsed, two-pass table sizes)."""
        extra: Dict[str, Any] = {"spacy_parsed": parsed}
        for b in self.two_pass_blocks:
            extra[f"{b.name}_table_size"] = b.table_size()
        funnel = Funnel(self.name, steps, n_in, seconds, extra)
        funnel.check()
        return funnel

    def _batch(self, batch, text_field, label, ctx, steps, on_kept, on_dropped) -> None:
        ctx.new_batch()
        fate: Dict[int, str] = {}
        items: List[Item] = []
        empty = steps[0]
        empty.rows_in += len(batch)
        for idx, row, where in batch:
            text = _text_of(row, text_field, where, label)
            it = Item(idx, row, where, text or "", text or "")
            if text is None:
                fate[idx] = EMPTY_RULE
                empty.dropped += 1
            else:
                items.append(it)
        empty.kept += len(items)
        order = {idx: i for i, (idx, _, _) in enumerate(batch)}
        all_items = {idx: None for idx, _, _ in batch}
        for it in items:
            all_items[it.index] = it
        alive = items
        for b, step in zip(self.blocks, steps[1:]):
            step.rows_in += len(alive)
            if not alive:
                continue
            outcomes = b.apply(alive, ctx)
            if len(outcomes) != len(alive):
                raise RuntimeError(f"block {b.name!r} returned {len(outcomes)} outcomes for {len(alive)} rows")
            nxt = []
            for it, o in zip(alive, outcomes):
                if o == DROP:
                    fate[it.index] = b.name
                    step.dropped += 1
                    continue
                if o == UNCHECKED:
                    step.unchecked += 1
                elif o == CHANGED:
                    step.changed += 1
                elif o != KEEP:
                    raise RuntimeError(f"block {b.name!r} returned unknown outcome {o!r}")
                nxt.append(it)
            step.kept += len(nxt)
            alive = nxt
        for idx in sorted(order):
            rule = fate.get(idx)
            it = all_items[idx]
            if rule is None:
                if on_kept:
                    on_kept(it)
            elif on_dropped:
                if it is None:
                    _, row, where = batch[order[idx]]
                    it = Item(idx, row, where, "", "")
                on_dropped(it, rule)


def _text_of(row: Mapping[str, Any], text_field: str, where: str, label: str) -> Optional[str]:
    try:
        v = get_field(row, text_field)
    except KeyError:
        fields = sorted(k for k in row if not str(k).startswith("__"))
        raise InputError(f"{where}: no field {text_field!r} (fields: {', '.join(map(str, fields))})",
                         field=text_field) from None
    if v is None:
        return None
    if not isinstance(v, str):
        raise InputError(f"{where}: text is {type(v).__name__}, not a string", field=text_field)
    return v if v.strip() else None


def _jsonable(obj: Any) -> Any:
    if isinstance(obj, Mapping):
        return {str(k): _jsonable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple, set, frozenset)):
        return [_jsonable(v) for v in obj]
    if obj is None or isinstance(obj, (bool, int, float, str)):
        return obj
    return str(obj)


def build_pipeline(spec: PipelineSpec, name: Optional[str] = None,
                   overrides: Optional[Mapping[str, Mapping[str, Any]]] = None) -> Pipeline:
    """A pipeline from a shipped name, a YAML file, a list of block specs or ``{name, blocks}``.

    ``overrides`` maps a block name to parameter values that replace the shipped ones
    (e.g. ``{"rare_words": {"min_count": 3}}``).
    """
    specs: Any
    if isinstance(spec, (str, Path)):
        shipped = shipped_pipelines()
        if str(spec) in shipped:
            name, specs = name or str(spec), shipped[str(spec)]
        else:
            p = Path(spec)
            if not p.is_file():
                raise InputError(f"not a shipped pipeline ({', '.join(sorted(shipped))}) and not a file", path=spec,
                                 field="pipeline")
            try:
                specs = yaml.safe_load(p.read_text(encoding="utf-8"))
            except yaml.YAMLError as exc:
                raise InputError(f"not valid YAML ({exc})", path=p) from None
            name = name or p.stem
    else:
        specs = spec
    if isinstance(specs, Mapping):
        name = name or specs.get("name")
        specs = specs.get("blocks")
    if not isinstance(specs, list):
        raise InputError("a pipeline must be a list of block specs", field="pipeline")
    specs = [dict(s) for s in specs]
    if overrides:
        known = {s.get("name") or s.get("block") for s in specs}
        unknown = set(overrides) - known
        if unknown:
            raise InputError(f"overrides name unknown block(s) {sorted(unknown)} (blocks: {sorted(known)})",
                             field="overrides")
        for s in specs:
            s.update(overrides.get(s.get("name") or s.get("block"), {}))
    blocks = [build_block(s) for s in specs]
    return Pipeline(str(name or "pipeline"), blocks, specs)


def dedup_block(option: Optional[Mapping[str, Any]]) -> Optional[Block]:
    """The ``url_dedup`` block of ``alttext.filters.dedup`` (its URL list read once), or ``None``."""
    if not option:
        return None
    opt = dict(option)
    label, url_field = str(opt.pop("label")), str(opt.pop("url_field", "url"))
    return build_block({"block": "url_dedup", "name": f"url_dedup_{label}", "against": opt, "url_field": url_field,
                        "label": label})


def with_dedup(pipe: Pipeline, block: Optional[Block]) -> Pipeline:
    """``pipe`` with the ``url_dedup`` ``block`` as its first step (``pipe`` itself when ``None``)."""
    return pipe if block is None else Pipeline(pipe.name, [block, *pipe.blocks], pipe.specs)


def kept_line(it: Item, text_field: str) -> str:
    """The kept-rows JSONL line of ``it``: the text field holds the final text, ``alttext_original`` the
    input text, ``alttext_row`` the 0-based input row."""
    row = dict(it.row)
    _set_text(row, text_field, it.text)
    row["alttext_original"] = it.original
    row["alttext_row"] = it.index
    return dumps_row(row) + "\n"


def dropped_line(it: Item, rule: str) -> str:
    """The dropped-rows JSONL line of ``it`` (``alttext_row``, ``dropped_by``)."""
    row = dict(it.row)
    row["alttext_row"] = it.index
    row["dropped_by"] = rule
    return dumps_row(row) + "\n"


def _set_text(row: Dict[str, Any], text_field: str, text: str) -> None:
    if text_field in row or "." not in text_field:
        row[text_field] = text
        return
    obj = row
    parts = text_field.split(".")
    for p in parts[:-1]:
        obj[p] = dict(obj[p])
        obj = obj[p]
    obj[parts[-1]] = text


__all__ = ["EMPTY_RULE", "FUNNEL_COLUMNS", "FunnelRow", "Funnel", "Pipeline", "PipelineSpec", "build_pipeline",
           "dedup_block", "dropped_line", "kept_line", "with_dedup"]
