"""Claimed-CBU summarizer (reference-spec §4.4, ``--mode claimed``; golden checks §14 G3, G7).

Per answered caption:

* unit records = items of ``claimed_units`` whose ``category`` is one of the eight types and whose
  ``unit`` is a non-empty (after strip) string; ``span``/``target`` stripped, default ``""``. The
  legacy dict-of-lists form (``{"object": ["dog", ...], ...}``) is accepted too;
* every unit record counts in ``claimed_total`` and ``claimed_<type>`` (raw);
* ``normalize_unit`` = lower-cased lex units, leading ``a/an/the`` dropped repeatedly, joined by
  spaces; a record whose normalized unit is empty is then dropped silently: it stays in the raw
  counts but is neither deduplicated, nor a duplicate, nor suspicious. (The reference files show
  this: e.g. the lexical-window summary has ``claimed_total - claimed_dedup_total -
  duplicate_units - suspicious_units = 1``.)
* dedup key ``category|normalize(unit)|normalize(target)``; a key seen before in the caption is a
  ``duplicate_units``; a first-seen key that is suspicious (``count`` unit equal to an article —
  unreachable after article stripping, kept for fidelity — or ``text_rendering`` unit containing
  "no text", "no visible", "not visible" or "without text") is a ``suspicious_units`` and not
  deduplicated; the rest are ``claimed_dedup_total`` / ``claimed_dedup_<type>``;
* ``caption_tokens`` = lex units of the request's ``caption`` (the window).

Per surface and ``__all__``: summed counts, ratios (:class:`ClaimedSurface.from_counts`) and
distributions of ``claimed``, ``claimed_dedup``, ``claimed_dedup_per_100_tokens`` (per caption
``100·dedup/max(lex, 1)``) and ``caption_tokens``: median (``statistics.median``), p25/p75 (nearest
rank: sorted value at index ``round((n-1)·q)``, Python's banker's rounding), trimmed mean (drop
``⌊0.1n⌋`` values at each end). The CBU/cap denominator is every caption with an ok response,
zero-claim captions included.

Requests with no response row at all (a store that is still being filled) are counted in the
summary's ``input.unanswered_requests`` (of ``input.requests_total``) whenever request files are
known, and ``capaudit claims summarize`` reports them.

Merging several response files picks the winners of :func:`capaudit.llm.store.merge_lines` (one row
per request id, an answered row is never replaced by a failed one, order independent), parsing each
row once (:func:`_merge_counted`). This deliberately fixes the
reference's last-row-wins ``--latest-by-request`` (§13.5). ``status`` = ``{responses: merged
ids, captions: ok ids, bad: failed ids}``; failed rows are skipped.

Each response row needs its request's surface and window: from the row's own ``request`` object
(reference-style logs: ``request.surface`` / ``request.caption``, or ``request.input.*``) or from
the request files (``capaudit.llm.requests`` rows: ``input.surface`` / ``input.caption``).

Speed (issue 24): each row is decoded once; units are counted by :class:`UnitCounter` (memoised
``normalize_unit``, type checks on plain ``dict``/``str`` first, the reference functions for anything
else) and windows by :func:`lex_counts` (the lexical-unit kernel, a batch at a time); both are tested
equal to the reference functions
(tests/test_claims_summarize_fast.py).
"""

from __future__ import annotations

import math
import operator
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Dict, Iterable, List, Mapping, Optional, Sequence, Tuple, Union

from capaudit.io.atomic import atomic_path, check_output_path
from capaudit.io.canonical_json import canonical, loads, loads_lenient
from capaudit.llm.requests import REQUIRED_FIELDS, ROLES, check_request
from capaudit.llm.store import iter_rows_with_lines, rank_better
from capaudit.summaries.categories import UNIT_CATEGORIES
from capaudit.summaries.claimed import (
    ALL,
    COUNT_FIELDS,
    DISTRIBUTIONS,
    ClaimedStatus,
    ClaimedSummary,
    ClaimedSurface,
    Distribution,
    write_claimed_summary,
)
from capaudit.text.lexical import lex_units
from capaudit.text.lexkernel import unit_spans

PathLike = Union[str, Path]
ARTICLES = frozenset({"a", "an", "the"})
NO_TEXT_MARKERS = ("no text", "no visible", "not visible", "without text")
_CATS = frozenset(UNIT_CATEGORIES)


def normalize_unit(text: Any) -> str:
    """Lower-cased lex units with leading ``a``/``an``/``the`` dropped repeatedly, space-joined."""
    units = lex_units(str(text or ""))
    i = 0
    while i < len(units) and units[i] in ARTICLES:
        i += 1
    return " ".join(units[i:])


def lex_count(text: str) -> int:
    """``len(lex_units(text))``: the lexical units of the lower-cased window (one text)."""
    return len(lex_units(text))


def lex_counts(windows: Sequence[str]) -> List[int]:
    """:func:`lex_count` of many windows at once, by the lexical-unit kernel
    (:func:`capaudit.text.lexkernel.unit_spans` on the lower-cased windows)."""
    if not windows:
        return []
    return unit_spans([w.lower() for w in windows]).counts.tolist()


#: windows counted per kernel call while request files are indexed
_COUNT_BATCH = 20_000


@dataclass(frozen=True)
class UnitRecord:
    """One claimed unit (strings stripped)."""

    category: str
    unit: str
    span: str = ""
    target: str = ""


def _str(v: Any) -> str:
    return v.strip() if isinstance(v, str) else ""


def unit_records(parsed: Any) -> List[UnitRecord]:
    """Valid unit records of one parsed answer (module docstring); malformed items are skipped."""
    if not isinstance(parsed, Mapping):
        return []
    units = parsed.get("claimed_units")
    out: List[UnitRecord] = []
    if isinstance(units, list):
        for item in units:
            if not isinstance(item, Mapping):
                continue
            cat, unit = item.get("category"), item.get("unit")
            if cat in _CATS and isinstance(unit, str) and unit.strip():
                out.append(UnitRecord(cat, unit.strip(), _str(item.get("span")), _str(item.get("target"))))
    elif isinstance(units, Mapping):  # legacy dict-of-lists form
        for cat in UNIT_CATEGORIES:
            for item in units.get(cat) or ():
                if isinstance(item, str) and item.strip():
                    out.append(UnitRecord(cat, item.strip()))
                elif isinstance(item, Mapping) and isinstance(item.get("unit"), str) and item["unit"].strip():
                    out.append(UnitRecord(cat, item["unit"].strip(), _str(item.get("span")), _str(item.get("target"))))
    return out


def is_suspicious(category: str, norm_unit: str) -> bool:
    """§4.4 suspicious units: an article as a count (dead code after stripping), or an absence claim as text."""
    if category == "count" and norm_unit in ARTICLES:
        return True
    return category == "text_rendering" and any(m in norm_unit for m in NO_TEXT_MARKERS)


def caption_counter(records: Sequence[UnitRecord], window: Union[str, int]) -> Dict[str, int]:
    """Per-caption counter of §4.4 (keys: COUNT_FIELDS + ``claimed_<type>``, ``claimed_dedup_<type>``);
    ``window``: the caption window, or its lexical-unit count."""
    c: Dict[str, int] = {k: 0 for k in COUNT_FIELDS}
    for t in UNIT_CATEGORIES:
        c[f"claimed_{t}"] = 0
        c[f"claimed_dedup_{t}"] = 0
    c["captions"] = 1
    c["caption_tokens"] = window if isinstance(window, int) else len(lex_units(window))
    seen = set()
    for r in records:
        c["claimed_total"] += 1
        c[f"claimed_{r.category}"] += 1
        nu = normalize_unit(r.unit)
        if not nu:
            continue
        key = f"{r.category}|{nu}|{normalize_unit(r.target)}"
        if key in seen:
            c["duplicate_units"] += 1
            continue
        seen.add(key)
        if is_suspicious(r.category, nu):
            c["suspicious_units"] += 1
            continue
        c["claimed_dedup_total"] += 1
        c[f"claimed_dedup_{r.category}"] += 1
    c["rows_with_duplicate"] = int(c["duplicate_units"] > 0)
    c["rows_with_suspicious"] = int(c["suspicious_units"] > 0)
    return c


#: field names of a :meth:`UnitCounter.count` tuple, in order
UNIT_COUNT_FIELDS: Tuple[str, ...] = (
    ("claimed_total", "claimed_dedup_total", "duplicate_units", "suspicious_units")
    + tuple(f"claimed_{t}" for t in UNIT_CATEGORIES) + tuple(f"claimed_dedup_{t}" for t in UNIT_CATEGORIES)
)
_CAT_INDEX = {t: i for i, t in enumerate(UNIT_CATEGORIES)}
_NCAT = len(UNIT_CATEGORIES)
_CI_COUNT, _CI_TEXT = _CAT_INDEX["count"], _CAT_INDEX["text_rendering"]  # is_suspicious's two categories
_FIELDS = operator.itemgetter("category", "unit", "target")


class _Fallback(Exception):
    """A parsed answer the fast path of :class:`UnitCounter` does not take."""


class _NormMemo(dict):
    """``normalize_unit`` per distinct string (units repeat across captions)."""

    def __missing__(self, text: str) -> str:
        v = self[text] = normalize_unit(text)
        return v


class UnitCounter:
    """The unit part of :func:`caption_counter` ∘ :func:`unit_records`, fast, for many answers.

    :meth:`count` returns the counts named by :data:`UNIT_COUNT_FIELDS` as one tuple (equal tuples
    shared). It equals :func:`caption_counter` on every answer (tests/test_claims_summarize_fast.py
    checks it on real captions):

    * the fast path takes a dict answer whose ``claimed_units`` is a list of dicts that all have
      ``category``, ``unit`` and ``target`` (every well-formed answer: the extraction schema
      requires them); ``normalize_unit`` is memoised per distinct raw string (it ignores
      surrounding whitespace, so the raw unit/target stands for the stripped one), and the
      ``category|unit|target`` dedup key is compared as a tuple (the same equality: neither
      categories nor lexical units contain ``|``);
    * anything else (the legacy dict-of-lists form, missing fields, odd types) goes through
      :func:`unit_records` and :func:`caption_counter` themselves, which also raise whatever they
      raise.

    The memo is cleared when it reaches ``max_entries`` strings (bounded memory).
    """

    def __init__(self, max_entries: int = 1 << 20):
        self.max_entries = max_entries
        self._norm: Dict[str, str] = _NormMemo()
        self._interned: Dict[Tuple[int, ...], Tuple[int, ...]] = {}

    def count(self, parsed: Any) -> Tuple[int, ...]:
        """The counts of one parsed answer (class docstring)."""
        try:
            uc = self._fast(parsed)
        except (_Fallback, TypeError, KeyError):
            uc = self._reference(parsed)
        return self._interned.setdefault(uc, uc)

    def _fast(self, parsed: Any) -> Tuple[int, ...]:
        units = parsed.get("claimed_units") if type(parsed) is dict else None
        if type(units) is not list:
            raise _Fallback
        norm = self._norm
        if len(norm) >= self.max_entries:
            norm.clear()
            self._interned.clear()
        index, articles, markers, ci_count, ci_text = _CAT_INDEX, ARTICLES, NO_TEXT_MARKERS, _CI_COUNT, _CI_TEXT
        raw = [0] * _NCAT
        ded = [0] * _NCAT
        dup = susp = 0
        seen = set()
        # an item that is no JSON object (list, string, number, null) makes _FIELDS raise TypeError,
        # one without the three fields KeyError, an unhashable category TypeError: the reference path
        for cat, unit, target in map(_FIELDS, units):
            ci = index.get(cat)
            if ci is None or not isinstance(unit, str):
                continue
            nu = norm[unit]
            if not nu:
                if unit.strip():
                    raw[ci] += 1
                continue
            raw[ci] += 1
            # the key category|unit|target, with the category's index standing for its name
            key = (ci, nu, norm[target] if isinstance(target, str) else "")
            if key in seen:
                dup += 1
                continue
            seen.add(key)
            if (ci == ci_count and nu in articles) or (ci == ci_text and any(m in nu for m in markers)):
                susp += 1
                continue
            ded[ci] += 1
        return (sum(raw), sum(ded), dup, susp, *raw, *ded)

    @staticmethod
    def _reference(parsed: Any) -> Tuple[int, ...]:
        c = caption_counter(unit_records(parsed), 0)
        return tuple(c[k] for k in UNIT_COUNT_FIELDS)

    @staticmethod
    def expand(uc: Sequence[int]) -> Dict[str, int]:
        """A :meth:`count` tuple (or a field-wise sum of them) by ``caption_counter`` name."""
        return dict(zip(UNIT_COUNT_FIELDS, uc))


def nearest_rank(sorted_values: Sequence[float], q: float) -> float:
    """Sorted value at index ``round((n-1)*q)`` (banker's rounding); 0.0 when empty."""
    if not sorted_values:
        return 0.0
    return float(sorted_values[round((len(sorted_values) - 1) * q)])


def trimmed_mean(values: Sequence[float], proportion: float = 0.1) -> float:
    """Mean after dropping ``⌊proportion·n⌋`` values from each end of the sorted values; 0.0 when empty."""
    return _trimmed_mean_sorted(sorted(values), proportion)


def _trimmed_mean_sorted(vals: Sequence[float], proportion: float = 0.1) -> float:
    k = int(math.floor(proportion * len(vals)))
    kept = vals[k: len(vals) - k]
    return float(sum(kept) / len(kept)) if kept else 0.0


def _sorted_values(values: Sequence[float]) -> List[float]:
    """``sorted(values)`` (ints or floats, no NaN), sorted by numpy when there are many: the same
    Python numbers in the same order."""
    if len(values) < 4096:
        return sorted(values)
    import numpy as np

    return np.sort(np.asarray(values), kind="stable").tolist()


def distribution(values: Sequence[float]) -> Distribution:
    """Median / p25 / p75 / trimmed mean of §4.4."""
    vals = _sorted_values(values)
    n = len(vals)
    if not n:
        return Distribution(0.0, 0.0, 0.0, 0.0)
    median = vals[n // 2] if n % 2 else (vals[n // 2 - 1] + vals[n // 2]) / 2  # = statistics.median
    return Distribution(float(median), nearest_rank(vals, 0.25), nearest_rank(vals, 0.75), _trimmed_mean_sorted(vals))


@dataclass
class SurfaceAccumulator:
    """Summed counts and per-caption values of one surface (mergeable with ``+=``)."""

    counts: Dict[str, int] = field(default_factory=lambda: defaultdict(int))
    values: Dict[str, List[float]] = field(default_factory=lambda: {d: [] for d in DISTRIBUTIONS})
    #: :meth:`add_counts` rows not yet folded into ``counts`` and ``values``: lexical units, unit counts
    _lex: List[int] = field(default_factory=list, repr=False)
    _units: List[Tuple[int, ...]] = field(default_factory=list, repr=False)

    def add(self, counter: Mapping[str, int]) -> None:
        self._fold()
        for k, v in counter.items():
            self.counts[k] += int(v)
        lex = int(counter["caption_tokens"])
        dedup = int(counter["claimed_dedup_total"])
        self.values["claimed"].append(int(counter["claimed_total"]))
        self.values["claimed_dedup"].append(dedup)
        self.values["claimed_dedup_per_100_tokens"].append(100.0 * dedup / max(lex, 1))
        self.values["caption_tokens"].append(lex)

    def add_counts(self, lex: int, uc: Tuple[int, ...]) -> None:
        """:meth:`add` of ``caption_counter`` for a caption of ``lex`` lexical units whose
        :meth:`UnitCounter.count` is ``uc`` (folded in later, column by column)."""
        self._lex.append(lex)
        self._units.append(uc)

    def _fold(self) -> None:
        """Fold the pending :meth:`add_counts` rows into ``counts`` and ``values`` (the same sums
        and per-caption values, in the same order, as :meth:`add` row by row)."""
        if not self._units:
            return
        lex, cols = self._lex, list(zip(*self._units))
        c = self.counts
        for k, col in zip(UNIT_COUNT_FIELDS, cols):
            c[k] += sum(col)
        n = len(lex)
        c["captions"] += n
        c["caption_tokens"] += sum(lex)
        c["rows_with_duplicate"] += n - cols[2].count(0)
        c["rows_with_suspicious"] += n - cols[3].count(0)
        v = self.values
        v["claimed"].extend(cols[0])
        v["claimed_dedup"].extend(cols[1])
        v["claimed_dedup_per_100_tokens"].extend([100.0 * d / max(x, 1) for d, x in zip(cols[1], lex)])
        v["caption_tokens"].extend(lex)
        self._lex, self._units = [], []

    def __iadd__(self, other: "SurfaceAccumulator") -> "SurfaceAccumulator":
        self._fold()
        other._fold()
        for k, v in other.counts.items():
            self.counts[k] += v
        for d in DISTRIBUTIONS:
            self.values[d].extend(other.values[d])
        return self

    def finalize(self) -> ClaimedSurface:
        self._fold()
        return ClaimedSurface.from_counts(dict(self.counts), {d: distribution(self.values[d]) for d in DISTRIBUTIONS})


@dataclass
class ClaimedAccumulator:
    """Per-surface accumulators plus status counts; ``finalize`` → :class:`ClaimedSummary`."""

    surfaces: Dict[str, SurfaceAccumulator] = field(default_factory=dict)
    responses: int = 0
    bad: int = 0

    def add(self, surface: str, ok: bool, parsed: Any = None, window: Union[str, int] = "") -> Optional[Dict[str, int]]:
        """Add one (merged) response row; returns the caption counter (``None`` for a failed row)."""
        self.responses += 1
        if not ok:
            self.bad += 1
            return None
        counter = caption_counter(unit_records(parsed), window)
        self.surfaces.setdefault(surface, SurfaceAccumulator()).add(counter)
        return counter

    def finalize(self, input: Any = None) -> ClaimedSummary:  # noqa: A002
        total = SurfaceAccumulator()
        for acc in self.surfaces.values():
            total += acc
        surfaces = {ALL: total.finalize()}
        surfaces.update({name: self.surfaces[name].finalize() for name in sorted(self.surfaces)})
        status = ClaimedStatus(responses=self.responses, captions=self.responses - self.bad, bad=self.bad)
        summary = ClaimedSummary(status=status, surfaces=surfaces, input=input)
        summary.validate()
        return summary


# ---------------------------------------------------------------------------------------------
RequestInfo = Tuple[str, str]  # (surface, window caption)
#: one surface's answered captions: lexical units of each window, its unit counts
#: (:data:`UNIT_COUNT_FIELDS`), its request id (in the same order)
CaptionRows = Tuple[List[int], List[Tuple[int, ...]], List[str]]


def request_info(request: Mapping[str, Any], where: str) -> RequestInfo:
    """``(surface, caption)`` of a request row (ours: ``input.*``; reference logs: top level)."""
    inp = request.get("input") if isinstance(request.get("input"), Mapping) else request
    surface, caption = inp.get("surface"), inp.get("caption")
    if not isinstance(surface, str) or not surface:
        raise ValueError(f"{where}: request field 'surface' missing or not a string")
    if not isinstance(caption, str):
        raise ValueError(f"{where}: request field 'caption' missing or not a string")
    return surface, caption


def index_requests(paths: Iterable[PathLike]) -> Dict[str, Tuple[str, int]]:
    """``request_id → (surface, lexical units of the window)`` over request JSONL files (the count,
    not the text, so the index of millions of requests stays small).

    Rows are read as :func:`capaudit.llm.requests.read_requests` reads them, with the same checks
    and error messages (a row that fails the quick shape test below is handed to
    :func:`check_request` / :func:`request_info`, which raise exactly as before)."""
    out: Dict[str, Tuple[str, int]] = {}
    surfaces: Dict[str, str] = {}
    required, roles = frozenset(REQUIRED_FIELDS), ROLES
    pending: List[Tuple[str, str, str]] = []  # (request id, surface, window), counted a batch at a time

    def flush() -> None:
        for (rid, surface, _), n in zip(pending, lex_counts([w for _, _, w in pending])):
            out[rid] = (surface, n)
        pending.clear()

    for path in paths:
        if not Path(path).is_file():
            raise FileNotFoundError(f"{path}: request file not found")
        i = 0
        with open(path, "rb") as fh:  # iter_request_lines, without a stripped copy of every line
            for lineno, line in enumerate(fh, 1):
                if lineno == 1 and line.startswith(b"\xef\xbb\xbf"):
                    line = line[3:]
                if not line or line.isspace():  # == ``not line.strip()``: only ASCII whitespace
                    continue
                i += 1
                try:
                    row = loads(line)
                except ValueError as exc:
                    raise ValueError(f"{path}:{lineno}: invalid JSON ({exc})") from None
                inp = row.get("input") if type(row) is dict else None
                if not (type(inp) is dict and row.keys() >= required and type(row["request_id"]) is str
                        and row["request_id"] and type(row["schema"]) is dict and type(row["decoding"]) is dict
                        and _messages_ok(row["messages"], roles)):
                    check_request(row, f"{path}:{lineno}")
                    surface, window = request_info(row, f"{path}: request {i} ({row['request_id']})")
                else:
                    surface, window = inp.get("surface"), inp.get("caption")
                    if type(surface) is not str or not surface or type(window) is not str:
                        surface, window = request_info(row, f"{path}: request {i} ({row['request_id']})")
                pending.append((row["request_id"], surfaces.setdefault(surface, surface), window))
                if len(pending) >= _COUNT_BATCH:
                    flush()
    flush()
    return out


#: request files of at least this many bytes in all are indexed in a forked process (when a second
#: CPU is free, see :func:`capaudit.engine.forked.run_tasks`) while the responses are merged
CONCURRENT_INDEX_BYTES = 16 << 20


def _index_and_merge(req_paths: Sequence[PathLike], responses: Sequence[PathLike]):
    """``(index_requests(req_paths), _merge_counted(responses))``, the two at once when the request
    files are large, a second CPU is free and this process has no other thread (it forks). Errors
    are those of running the two in turn: an error in the request files first."""
    import threading

    from capaudit.engine.forked import default_workers, fork_ok, run_tasks

    def index() -> Dict[str, Tuple[str, int]]:
        return index_requests(req_paths) if req_paths else {}

    try:
        size = sum(Path(p).stat().st_size for p in req_paths)
    except OSError:  # a missing file: index_requests names it
        size = 0
    if size < CONCURRENT_INDEX_BYTES or default_workers() < 2 or threading.active_count() > 1 or not fork_ok():
        return index(), _merge_counted(responses)

    def merge():  # its error is raised after the index's, as in turn
        try:
            return True, _merge_counted(responses)
        except Exception as exc:  # noqa: BLE001 - re-raised below
            return False, exc

    # the merge here, the index in a child; a failed child's task is run again here (the same error)
    (merged_ok, merged), idx = run_tasks([merge, index], workers=2)
    if not merged_ok:
        raise merged
    return idx, merged


def _messages_ok(messages: Any, roles: frozenset) -> bool:
    """The message checks of :func:`check_request` pass (plain lists and dicts only)."""
    if type(messages) is not list or not messages:
        return False
    for m in messages:
        if type(m) is not dict or m.get("role") not in roles or "content" not in m:
            return False
    return True


def default_requests_path(responses_path: PathLike) -> Optional[Path]:
    """The request file conventionally beside a response file or store directory, if it exists:
    ``X/responses.jsonl`` → ``X/requests.jsonl``; ``A.responses.jsonl`` → ``A.requests.jsonl``;
    ``A_responses.jsonl`` → ``A_requests.jsonl``."""
    p = Path(responses_path)
    candidates = []
    if "responses" in p.name:
        candidates.append(p.with_name(p.name.replace("responses", "requests")))
    candidates.append(p.parent / "requests.jsonl")
    for c in candidates:
        if c.is_file() and c != p:
            return c
    return None


def _parsed(row: Mapping[str, Any]) -> Any:
    parsed = row.get("parsed")
    if parsed is None and isinstance(row.get("response_text"), str):
        try:
            parsed = loads_lenient(row["response_text"])
        except ValueError:
            parsed = None
    return parsed


class _Raise:
    """An error met while reading a row, raised only if that row wins the merge (as before)."""

    __slots__ = ("exc",)

    def __init__(self, exc: Exception):
        self.exc = exc


def _merge_counted(paths: Sequence[PathLike]) -> Dict[str, Tuple[bool, str, bytes, Any, Any]]:
    """:func:`capaudit.llm.store.merge_lines` (the same winners; ties still decided by canonical
    JSON) that parses each row once and keeps, beside the winning line, what the summary needs of
    it: ``(ok, started_at, line, request, unit counts)``. ``request``: ``(surface, lexical units)``
    from the row's own ``request`` object, or ``None`` (look it up in the request files);
    ``unit counts``: :meth:`UnitCounter.count` of the answer (``None`` for a failed row). An error in
    either is kept as :class:`_Raise` and raised only if the row wins, in request-id order."""
    best: Dict[str, Tuple[bool, str, bytes, Any, Any]] = {}
    counter = UnitCounter()
    for path in paths:
        for row, line in iter_rows_with_lines(path):
            rid = row["request_id"]
            ok = row["ok"]
            started = str(row.get("started_at") or "")
            cur = best.get(rid)
            if cur is not None:
                r = rank_better(ok, started, cur[0], cur[1])
                if not (canonical(row) < canonical(loads(cur[2])) if r is None else r):
                    continue
            req = row.get("request")
            if type(req) is dict or isinstance(req, Mapping):
                try:
                    req = request_info(req, f"response {rid}")  # (surface, window): counted below
                except Exception as exc:  # noqa: BLE001 - raised later, if this row wins
                    req = _Raise(exc)
            else:
                req = None
            uc = None
            if ok:
                try:
                    uc = counter.count(_parsed(row))
                except Exception as exc:  # noqa: BLE001
                    uc = _Raise(exc)
            best[rid] = (ok, started, line, req, uc)
    windows = [(rid, v[3]) for rid, v in best.items() if type(v[3]) is tuple]
    for (rid, (surface, _)), n in zip(windows, lex_counts([w for _, (_, w) in windows])):
        ok, started, line, _, uc = best[rid]
        best[rid] = (ok, started, line, (surface, n), uc)
    return best


def summarize_responses(
    responses: Sequence[PathLike],
    requests: Optional[Sequence[PathLike]] = None,
    input_label: Any = None,
) -> ClaimedSummary:
    """Summarize one or more response files/stores (module docstring).

    ``requests``: request files giving each row's surface and window; default: the file beside
    each response file (:func:`default_requests_path`), used only when rows lack a ``request``.
    Raises ``ValueError`` naming the file and request id when a row's request cannot be found.
    """
    return _summarize(responses, requests, input_label)[0]


def _summarize(
    responses: Sequence[PathLike],
    requests: Optional[Sequence[PathLike]],
    input_label: Any,
) -> Tuple[ClaimedSummary, Dict[str, "CaptionRows"]]:
    """:func:`summarize_responses`, and each surface's per-caption rows ``(lexical units, unit
    counts, request ids)`` of its answered captions (for :func:`caption_intervals`)."""
    if not responses:
        raise ValueError("summarize_responses: no response files given")
    for p in responses:
        if not Path(p).exists():
            raise FileNotFoundError(f"{p}: response file not found")
    for q in requests or ():
        if not Path(q).is_file():
            raise FileNotFoundError(f"{q}: request file not found")
    req_paths = list(requests) if requests else [q for q in (default_requests_path(p) for p in responses) if q]
    from capaudit.io.bulk import paused_gc

    with paused_gc():  # one parse per response row; winning rows as raw lines + their counts
        index, merged = _index_and_merge(req_paths, responses)
    # Rows in any order (the summary does not depend on it: sums, and sorted distributions); an
    # error is that of the smallest request id that has one, as when rows went in id order.
    acc = ClaimedAccumulator()
    rows: Dict[str, CaptionRows] = {}
    first_error: Optional[Tuple[str, Any]] = None
    bad = 0
    get_index = index.get
    for rid, (ok, _, _, req, uc) in merged.items():
        if req is None:
            req = get_index(rid)
            if req is None:
                if first_error is None or rid < first_error[0]:
                    first_error = (rid, None)
                continue
        if type(req) is _Raise or type(uc) is _Raise:
            if first_error is None or rid < first_error[0]:
                first_error = (rid, req.exc if type(req) is _Raise else uc.exc)
            continue
        if not ok:
            bad += 1
            continue
        surface, lex = req
        per = rows.get(surface)
        if per is None:
            per = rows[surface] = ([], [], [])
        per[0].append(lex)
        per[1].append(uc)
        per[2].append(rid)
    if first_error is not None:
        rid, exc = first_error
        if exc is not None:
            raise exc
        raise ValueError(
            f"{', '.join(map(str, responses))}: response {rid}: no 'request' in the row and no request with "
            f"this id in {[str(p) for p in req_paths] or 'any request file (pass --requests)'}"
        )
    acc.responses, acc.bad = len(merged), bad
    for surface, (lexs, ucs, _) in rows.items():
        sacc = acc.surfaces[surface] = SurfaceAccumulator()
        sacc._lex, sacc._units = lexs, ucs  # the accumulator rebinds (never clears) these lists
    label = input_label if input_label is not None else {
        "responses": [str(p) for p in responses], "requests": [str(p) for p in req_paths]}
    if index and isinstance(label, Mapping):
        # a half-finished store must say so: requests with no response row at all
        label = {**label, "requests_total": len(index), "unanswered_requests": len(set(index) - set(merged))}
    return acc.finalize(input=label), rows


def summarize_to_file(responses: Sequence[PathLike], out: PathLike, requests: Optional[Sequence[PathLike]] = None,
                      input_label: Any = None) -> ClaimedSummary:
    """:func:`summarize_responses` then :func:`write_claimed_summary` (indent 2, UTF-8)."""
    check_output_path(out)
    summary = summarize_responses(responses, requests, input_label)
    with atomic_path(out) as tmp:
        write_claimed_summary(summary, tmp)
    return summary


# ---------------------------------------------------------------------------------------------
# Caption-level bootstrap intervals (the reference's export_cbu_metric_tables.py method)

INTERVALS_KIND = "claimed_cbu_intervals"
#: interval metrics of a surface block, by the summary ratio they bracket
INTERVAL_METRICS = ("cbu_per_cap", "cbu_per_100_lex")
_DEDUP_AT = UNIT_COUNT_FIELDS.index("claimed_dedup_total")
_TYPE_AT = {t: UNIT_COUNT_FIELDS.index(f"claimed_dedup_{t}") for t in UNIT_CATEGORIES}


@dataclass(frozen=True)
class ClaimIntervals:
    """Caption-level 95 % percentile bootstrap intervals of a claimed summary's surfaces.

    ``surfaces``: name → ``{"captions", "zero_lex_captions", "cbu_per_cap": {"lower", "upper"},
    "cbu_per_100_lex": {...}, "per_type_per_cap": {type: {...}}}``; ``skipped``: name → why it has
    no interval (a surface with no answered caption is refused, never given a zero interval).
    ``reps`` 0 = bootstrap off: no surface has an interval and :meth:`method` says so.
    """

    reps: int
    seed: int
    surfaces: Dict[str, Dict[str, Any]] = field(default_factory=dict)
    skipped: Dict[str, str] = field(default_factory=dict)

    @property
    def off(self) -> bool:
        return self.reps == 0

    def surface(self, name: str) -> Optional[Dict[str, Any]]:
        """The interval block of ``name`` (None when it has none)."""
        return self.surfaces.get(name)

    def method(self) -> Dict[str, Any]:
        """How the intervals were computed (written into the intervals file and the table rows' meta)."""
        from capaudit.stats.bootstrap_caption import LEVEL, METHOD, QUANTILES

        if self.off:
            return {"reps": 0, "seed": self.seed, "off": "bootstrap_reps is 0: no intervals computed"}
        return {
            "method": METHOD, "level": LEVEL, "quantiles": list(QUANTILES), "reps": self.reps, "seed": self.seed,
            "unit": "caption (resampled with replacement, n per replicate)",
            "rng": "numpy default_rng(seed), fresh for each surface: rng.integers(0, n, size=(reps, n)), one index "
                   "matrix shared by every metric of the surface",
            "caption_order": "request id",
            "quantile": "numpy.quantile, linear interpolation",
            "cbu_per_cap": "mean of the resampled captions' claimed_dedup_total",
            "cbu_per_100_lex": "ratio of sums per replicate: 100 * sum(claimed_dedup_total) / sum(lex), the point's own ratio",
            "per_type_per_cap": "mean of the resampled captions' claimed_dedup_<type>",
            "pooled": f"{ALL} is not resampled",
        }

    def to_dict(self) -> Dict[str, Any]:
        return {"kind": INTERVALS_KIND, "bootstrap": self.method(), "surfaces": self.surfaces, "skipped": self.skipped}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any], loc: str = "<claim intervals>") -> "ClaimIntervals":
        if not isinstance(d, Mapping) or d.get("kind") != INTERVALS_KIND:
            raise ValueError(f"{loc}: not a claimed-CBU intervals file (kind {INTERVALS_KIND!r})")
        b = d.get("bootstrap") or {}
        return cls(reps=int(b["reps"]), seed=int(b["seed"]), surfaces=dict(d.get("surfaces") or {}),
                   skipped=dict(d.get("skipped") or {}))


def _interval(iv: Any) -> Dict[str, float]:
    return {"lower": iv.lower, "upper": iv.upper}


def surface_intervals(lex: Sequence[int], units: Sequence[Tuple[int, ...]], reps: int, seed: int,
                      rids: Optional[Sequence[str]] = None) -> Dict[str, Any]:
    """The interval block of one surface (:class:`ClaimIntervals`) from its answered captions'
    lexical units and :meth:`UnitCounter.count` tuples; with ``rids`` the captions are taken in
    request-id order (the store's completion order is not reproducible), else as given. Raises
    ``ValueError`` for an empty surface or ``reps`` 0."""
    import numpy as np

    from capaudit.stats.bootstrap_caption import percentile_bootstrap

    n = len(lex)
    if n == 0:
        raise ValueError("surface_intervals: the surface has no answered captions: no interval")
    if len(units) != n or (rids is not None and len(rids) != n):
        raise ValueError("surface_intervals: lexical units, unit counts and request ids differ in length")
    order = sorted(range(n), key=rids.__getitem__) if rids is not None else list(range(n))
    u = np.asarray(units, dtype=np.int64)[order]
    x = np.asarray(lex, dtype=np.int64)[order]
    cols = {"dedup": u[:, _DEDUP_AT], "lex": x, **{t: u[:, i] for t, i in _TYPE_AT.items()}}
    ivs = percentile_bootstrap(cols, means=["dedup", *UNIT_CATEGORIES], ratios={"per100": ("dedup", "lex", 100.0)},
                               reps=reps, seed=seed)
    return {"captions": n, "zero_lex_captions": int((x == 0).sum()),
            "cbu_per_cap": _interval(ivs["dedup"]), "cbu_per_100_lex": _interval(ivs["per100"]),
            "per_type_per_cap": {t: _interval(ivs[t]) for t in UNIT_CATEGORIES}}


def caption_intervals(rows: Mapping[str, CaptionRows], reps: int = 2000, seed: int = 0) -> ClaimIntervals:
    """:class:`ClaimIntervals` of every surface in ``rows`` (sorted by name; each surface alone,
    with a fresh generator); a surface with no answered caption is listed in ``skipped``."""
    from capaudit.stats.bootstrap_caption import check_reps

    reps = check_reps(reps)
    out = ClaimIntervals(reps=reps, seed=int(seed))
    if out.off:
        return out
    for name in sorted(rows):
        lex, units, rids = rows[name]
        if not lex:
            out.skipped[name] = "no answered captions: no interval"
            continue
        out.surfaces[name] = surface_intervals(lex, units, reps, int(seed), rids)
    return out


def summarize_with_intervals(
    responses: Sequence[PathLike],
    requests: Optional[Sequence[PathLike]] = None,
    input_label: Any = None,
    bootstrap_reps: int = 2000,
    bootstrap_seed: int = 0,
) -> Tuple[ClaimedSummary, ClaimIntervals]:
    """:func:`summarize_responses` and its surfaces' caption-level bootstrap intervals (``bootstrap_reps``
    0: none, said so). The summary is the same object :func:`summarize_responses` returns."""
    from capaudit.stats.bootstrap_caption import check_reps

    check_reps(bootstrap_reps)  # a bad value fails before the files are read
    summary, rows = _summarize(responses, requests, input_label)
    return summary, caption_intervals(rows, bootstrap_reps, bootstrap_seed)


def intervals_path(summary_path: PathLike) -> Path:
    """The intervals file beside a summary: ``X.json`` → ``X.intervals.json``."""
    p = Path(summary_path)
    return p.with_name(f"{p.stem if p.suffix == '.json' else p.name}.intervals.json")


def write_claim_intervals(intervals: ClaimIntervals, path: PathLike) -> Path:
    """The intervals as JSON (indent 2, UTF-8, trailing newline), atomically."""
    import json

    check_output_path(path)
    with atomic_path(path) as tmp:
        Path(tmp).write_text(json.dumps(intervals.to_dict(), indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    return Path(path)


def read_claim_intervals(path: PathLike) -> ClaimIntervals:
    import json

    return ClaimIntervals.from_dict(json.loads(Path(path).read_text(encoding="utf-8")), str(path))


def summarize_to_files(responses: Sequence[PathLike], out: PathLike, requests: Optional[Sequence[PathLike]] = None,
                       input_label: Any = None, bootstrap_reps: int = 2000, bootstrap_seed: int = 0,
                       intervals_out: Optional[PathLike] = None) -> Tuple[ClaimedSummary, ClaimIntervals, Path]:
    """:func:`summarize_to_file` plus the intervals file (default :func:`intervals_path` of ``out``;
    written with ``bootstrap_reps`` 0 too, saying the bootstrap was off)."""
    check_output_path(out)
    ipath = Path(intervals_out) if intervals_out is not None else intervals_path(out)
    check_output_path(ipath)
    summary, intervals = summarize_with_intervals(responses, requests, input_label, bootstrap_reps, bootstrap_seed)
    with atomic_path(out) as tmp:
        write_claimed_summary(summary, tmp)
    write_claim_intervals(intervals, ipath)
    return summary, intervals, ipath


__all__ = [
    "ClaimIntervals", "INTERVALS_KIND", "INTERVAL_METRICS", "surface_intervals", "caption_intervals",
    "summarize_with_intervals", "intervals_path", "write_claim_intervals", "read_claim_intervals", "summarize_to_files",
    "ARTICLES", "NO_TEXT_MARKERS", "UnitRecord", "lex_count", "normalize_unit", "unit_records", "is_suspicious",
    "caption_counter", "UnitCounter", "UNIT_COUNT_FIELDS", "nearest_rank", "trimmed_mean", "distribution", "SurfaceAccumulator",
    "ClaimedAccumulator", "request_info", "index_requests", "default_requests_path", "summarize_responses",
    "summarize_to_file",
]
