"""Judge requests and answers in compact, columnar form, shared by the per-judge summary and the cells.

A :class:`RequestIndex` numbers the request ids (rows) and keeps per row only ``(surface,
caption_id, caption key, first question, question count)`` in flat arrays, and per question one
byte for the category and two for the raw unit index — so a million requests of ten questions fit
in a few hundred MB and the summaries count with numpy. :func:`load_answers` merges a judge's
response store(s) answered-wins (:mod:`._stream`), validates every answered row against its
request (:func:`capaudit.judges.rules.answer_errors`: exactly one in-enum answer per expected id)
and keeps one byte per question (0 yes, 1 no, 2 uncertain) at the request's question positions.
``index.rows`` and ``answers.answered`` are read-only mapping views by request id
(:class:`RequestInfo`, answer code bytes) over those arrays.
"""

from __future__ import annotations

from array import array
from collections.abc import Mapping as _MappingABC
from dataclasses import dataclass, field
from operator import itemgetter
from pathlib import Path
from typing import Any, Dict, Iterator, List, Mapping, Optional, Sequence, Tuple, Union

import numpy as np

from capaudit.errors import InputError
from capaudit.io.canonical_json import dumps_line, loads
from capaudit.summaries.categories import UNIT_CATEGORIES

from ._stream import CutLine, _parse, check_not_empty, gc_paused, json_lines, read_at, store_file_list
from .rules import answer_errors, shown_caption_id

PathLike = Union[str, Path]
CAT_CODE: Dict[str, int] = {c: i for i, c in enumerate(UNIT_CATEGORIES)}
ANSWER_CODE: Dict[str, int] = {"yes": 0, "no": 1, "uncertain": 2}
ANSWER_NAMES = ("yes", "no", "uncertain")
_DIGIT_CODES = bytes.maketrans(b"0123456789", bytes(range(10)))
_WHITESPACE = frozenset(b" \t\n\r\x0b\x0c")


class RequestInfo:
    """Compact form of one judge request: surface index, caption id, categories, raw unit indices."""

    __slots__ = ("surface", "caption_id", "cats", "idx", "suffixes")

    def __init__(self, surface: int, caption_id: str, cats: bytes, idx: bytes,
                 suffixes: Optional[Tuple[str, ...]] = None):
        self.surface = surface
        self.caption_id = caption_id
        self.cats = cats
        self.idx = idx  # array('H') of raw unit indices, as bytes
        self.suffixes = suffixes  # the ids' ``:u<n>`` suffixes as the request gives them, when not ``:u<n:04d>``

    def indices(self) -> List[int]:
        a = array("H")
        a.frombytes(self.idx)
        return a.tolist()

    def qids(self) -> List[str]:
        if self.suffixes is not None:
            return [self.caption_id + x for x in self.suffixes]
        return [f"{self.caption_id}:u{i:04d}" for i in self.indices()]


def index_path(requests_path: PathLike) -> Path:
    """``REQ.jsonl`` → ``REQ.index.jsonl``: the compact sidecar the builder writes beside the requests."""
    p = Path(requests_path)
    stem = p.name[: -len(".jsonl")] if p.name.endswith(".jsonl") else p.name
    return p.with_name(stem + ".index.jsonl")


_CAT_DIGIT: Dict[str, str] = {c: str(i) for c, i in CAT_CODE.items()}


def index_line(request_id: str, caption_id: str, surface: str, categories: Sequence[str], indices: Sequence[int]) -> bytes:
    """One sidecar line: ``[request_id, caption_id, surface, category codes, raw unit indices]``."""
    digit = _CAT_DIGIT
    return dumps_line([request_id, caption_id, surface, "".join([digit[c] for c in categories]), list(indices)])


#: distinct question-index patterns whose ``:u<index>`` suffixes a RequestIndex keeps
_SUFFIX_CACHE = 4096


class _RowsView(_MappingABC):
    """``index.rows``: request id → :class:`RequestInfo`, built on access (insertion order)."""

    __slots__ = ("_ix",)

    def __init__(self, ix: "RequestIndex"):
        self._ix = ix

    def __getitem__(self, rid: str) -> RequestInfo:
        return self._ix.info(self._ix.ids[rid])

    def __contains__(self, rid: object) -> bool:
        return rid in self._ix.ids

    def __iter__(self) -> Iterator[str]:
        return iter(self._ix.ids)

    def __len__(self) -> int:
        return len(self._ix.ids)


class RequestIndex:
    """Judge requests by id (module docstring).

    Per row ``r`` (numbered in first-seen order of the request id): ``request_ids[r]``,
    ``caption_ids[r]``, ``surface_of[r]`` (index into ``surfaces``), ``key_of[r]`` (ordinal of the
    caption key ``(surface, caption_id)`` in first-seen order: ``order``), ``qoff[r]``/``qlen[r]``
    (its questions' positions in ``cats``/``qidx``). A request id seen again replaces the row's
    data (last wins), as a dict of rows would.
    """

    def __init__(self) -> None:
        self.surfaces: List[str] = []
        self._surface_idx: Dict[str, int] = {}
        self.ids: Dict[str, int] = {}
        self.request_ids: List[str] = []
        self.caption_ids: List[str] = []
        self.surface_of = array("l")
        self.key_of = array("l")
        self.qoff = array("q")
        self.qlen = array("l")
        self.cats = bytearray()
        self.qidx = array("H")
        #: ``(surface index, caption_id)`` → first-seen ordinal; ``key_surface[ordinal]`` = surface
        self.order: Dict[Tuple[int, str], int] = {}
        self.key_surface = array("l")
        self.models: Dict[str, int] = {}
        self.files: List[str] = []
        self._suffixes: Dict[bytes, Tuple[Tuple[str, ...], bool]] = {}
        #: row → its question ids' suffixes exactly as given, for requests whose ids are not the
        #: canonical ``<caption id>:u<n:04d>`` (``cid:u0``): ids are kept, never rebuilt
        self.external: Dict[int, Tuple[str, ...]] = {}
        #: ``[start, end)`` row ranges of request files in the reference's wording, whose messages
        #: name no caption id: their answers' caption ids are not checked (:func:`.rules.shown_caption_id`)
        self.unshown: List[Tuple[int, int]] = []

    def caption_id_shown(self, r: int) -> bool:
        """Whether row ``r``'s message named its caption id (so the answer must echo it)."""
        return not any(a <= r < b for a, b in self.unshown)

    @property
    def rows(self) -> Mapping[str, RequestInfo]:
        """Request id → :class:`RequestInfo` (a view)."""
        return _RowsView(self)

    def info(self, r: int) -> RequestInfo:
        o, n = self.qoff[r], self.qlen[r]
        return RequestInfo(self.surface_of[r], self.caption_ids[r], bytes(self.cats[o:o + n]),
                           self.qidx[o:o + n].tobytes(), self.external.get(r))

    def pattern(self, r: int) -> Tuple[Tuple[str, ...], bool]:
        """The ``:u<index:04d>`` suffixes of row ``r``'s question ids and whether they are distinct
        (cached per index pattern: almost every request has questions ``0..n-1``); a request's own
        non-canonical ids (:attr:`external`) as given."""
        ext = self.external.get(r) if self.external else None
        if ext is not None:
            return ext, True
        o = self.qoff[r]
        indices = self.qidx[o:o + self.qlen[r]]
        key = indices.tobytes()
        hit = self._suffixes.get(key)
        if hit is None:
            sufs = tuple(f":u{i:04d}" for i in indices)
            hit = (sufs, len(set(sufs)) == len(sufs))
            if len(self._suffixes) < _SUFFIX_CACHE:
                self._suffixes[key] = hit
        return hit

    def suffixes(self, r: int) -> Tuple[str, ...]:
        """The ``:u<index:04d>`` suffixes of row ``r``'s question ids."""
        return self.pattern(r)[0]

    def qids(self, r: int) -> List[str]:
        """Question ids of row ``r`` in question order."""
        cid = self.caption_ids[r]
        return [cid + x for x in self.suffixes(r)]

    def surface_index(self, name: str) -> int:
        i = self._surface_idx.get(name)
        if i is None:
            i = self._surface_idx[name] = len(self.surfaces)
            self.surfaces.append(name)
        return i

    def add(self, row: Mapping[str, Any], where: str) -> None:
        rid = row.get("request_id")
        inp = row.get("input")
        if not isinstance(rid, str) or not isinstance(inp, Mapping):
            raise InputError(f"{where}: judge request needs 'request_id' and an 'input' object")
        cid = inp.get("caption_id")
        qs = inp.get("questions")
        if not isinstance(cid, str) or not isinstance(qs, list) or not qs:
            raise InputError(f"{where}: judge request needs input.caption_id and a non-empty input.questions list")
        cats = bytearray()
        idx = array("H")
        prefix = cid + ":u"
        n = len(prefix)
        given: List[str] = []
        for k, q in enumerate(qs):
            qid = q.get("question_id") if isinstance(q, dict) else None
            if not isinstance(qid, str):
                raise InputError(f"{where}: input.questions[{k}] needs a string question_id")
            code = CAT_CODE.get(q.get("category"))  # type: ignore[arg-type]
            if code is None:
                raise InputError(f"{where}: input.questions[{k}].category {q.get('category')!r} is not one of "
                                 f"{list(UNIT_CATEGORIES)}")
            if not qid.startswith(prefix) or not qid[n:].isdigit():
                raise InputError(f"{where}: input.questions[{k}].question_id {qid!r} is not '<caption id {cid!r}>:u<index>'")
            cats.append(code)
            idx.append(int(qid[n:]))
            given.append(qid[len(cid):])
        if len(set(idx)) != len(idx) and len(set(given)) == len(given):
            raise InputError(f"{where}: question ids {given} of caption {cid!r} name the same unit number twice "
                             "(e.g. ':u0' and ':u00'); ids must be distinct numbers")
        self._put(rid, str(inp.get("surface", "")), cid, bytes(cats), idx)
        r = self.ids[rid]
        if any(x != f":u{i:04d}" for x, i in zip(given, idx)):
            self.external[r] = tuple(given)
        elif self.external:
            self.external.pop(r, None)
        model = row.get("model_hint")
        if isinstance(model, str):
            self.models[model] = self.models.get(model, 0) + 1

    def _put(self, rid: str, surface: str, cid: str, cats: bytes, idx: array) -> None:
        s = self._surface_idx.get(surface)
        if s is None:
            s = self.surface_index(surface)
        key = (s, cid)
        k = self.order.get(key)
        if k is None:
            k = self.order[key] = len(self.key_surface)
            self.key_surface.append(s)
        off = len(self.cats)
        self.cats += cats
        self.qidx += idx
        r = self.ids.get(rid)
        if r is None:
            self.ids[rid] = len(self.request_ids)
            self.request_ids.append(rid)
            self.caption_ids.append(cid)
            self.surface_of.append(s)
            self.key_of.append(k)
            self.qoff.append(off)
            self.qlen.append(len(cats))
        else:  # the same id again: its latest data wins
            self.caption_ids[r] = cid
            self.surface_of[r] = s
            self.key_of[r] = k
            self.qoff[r] = off
            self.qlen[r] = len(cats)

    def _load_sidecar(self, requests: Path) -> bool:
        """Load ``requests``' compact sidecar when it describes the file as it is now (same size)."""
        side = index_path(requests)
        if not side.is_file():
            return False
        with open(side, "rb") as fh:
            lines = fh.read().splitlines()
        try:
            trailer = loads(lines[-1]) if lines else None
        except ValueError:
            return False
        if not isinstance(trailer, dict) or trailer.get("bytes") != requests.stat().st_size:
            return False
        with gc_paused():
            self._sidecar_lines(lines[:-1], side, 0)
        return True

    def _sidecar_lines(self, lines: Sequence[bytes], side: Path, first: int) -> None:
        """Sidecar lines (``first`` = 0-based number of the first line): :meth:`_put` each, with its
        common case (a new request id, a known surface) inlined."""
        digits = _DIGIT_CODES
        ids, surface_idx, order = self.ids, self._surface_idx, self.order
        rids, cids = self.request_ids, self.caption_ids
        surface_of, key_of, qoff, qlen, key_surface = self.surface_of, self.key_of, self.qoff, self.qlen, self.key_surface
        cats_all, qidx = self.cats, self.qidx
        for lineno, line in enumerate(lines, first + 1):
            try:
                rid, cid, surface, cats, indices = loads(line)
                codes = cats.encode("ascii").translate(digits)
                if len(codes) != len(indices) or max(codes) > 7:
                    raise ValueError("bad category codes")
                s = surface_idx.get(surface) if type(surface) is str and type(rid) is str and rid not in ids else None
                if s is None:  # a new surface, a repeated or odd request id: the general path
                    idx = array("H", indices)
                else:
                    qidx.extend(indices)  # checks each index as array("H", ...) would
            except (ValueError, TypeError, OverflowError, AttributeError):
                raise InputError("unreadable request index line (delete it to read the requests instead)",
                                 path=side, line=lineno) from None
            if s is None:
                self._put(rid, surface, cid, codes, idx)
                continue
            key = (s, cid)
            k = order.get(key)
            if k is None:
                k = order[key] = len(key_surface)
                key_surface.append(s)
            ids[rid] = len(rids)
            rids.append(rid)
            cids.append(cid)
            surface_of.append(s)
            key_of.append(k)
            qoff.append(len(cats_all))
            qlen.append(len(codes))
            cats_all += codes

    @classmethod
    def from_files(cls, paths: Sequence[PathLike]) -> "RequestIndex":
        """Index judge request files (their ``.index.jsonl`` sidecar when it is current)."""
        idx = cls()
        for p in paths:
            idx._load_file(Path(p))
        if not idx.ids:
            raise InputError("no judge request in the requests file(s)", path=", ".join(map(str, paths)))
        return idx

    def _load_file(self, p: Path) -> None:
        if not p.is_file():
            raise InputError("judge requests file not found", path=p)
        self.files.append(str(p))
        start = len(self.request_ids)
        if not self._load_sidecar(p):
            with gc_paused():
                for lineno, row in json_lines(p):
                    if not isinstance(row, dict):
                        raise InputError("request row is not a JSON object", path=p, line=lineno)
                    self.add(row, f"{p}:{lineno}")
        if len(self.request_ids) > start and not _file_shows_caption_id(p):
            self.unshown.append((start, len(self.request_ids)))

    def arrays(self) -> Dict[str, np.ndarray]:
        """numpy views of the per-row and per-question arrays (no copies)."""
        return {"surface_of": np.frombuffer(self.surface_of, dtype=np.dtype(self.surface_of.typecode)),
                "key_of": np.frombuffer(self.key_of, dtype=np.dtype(self.key_of.typecode)),
                "qoff": np.frombuffer(self.qoff, dtype=np.dtype(self.qoff.typecode)),
                "qlen": np.frombuffer(self.qlen, dtype=np.dtype(self.qlen.typecode)),
                "cats": np.frombuffer(self.cats, dtype=np.uint8),
                "qidx": np.frombuffer(self.qidx, dtype=np.uint16),
                "key_surface": np.frombuffer(self.key_surface, dtype=np.dtype(self.key_surface.typecode))}


def _file_shows_caption_id(p: Path) -> bool:
    """Whether a judge requests file (one build, one wording) shows the caption id: read from its
    first row's ``prompt_version``."""
    with open(p, "rb") as fh:
        for line in fh:
            if line.strip():
                try:
                    return shown_caption_id(loads(line)) is not None
                except ValueError:
                    return True
    return True


def question_positions(qoff: np.ndarray, qlen: np.ndarray, rows: np.ndarray) -> np.ndarray:
    """Positions (into the per-question arrays) of the questions of ``rows``, row after row."""
    rows = np.asarray(rows, dtype=np.int64)
    lens = qlen[rows].astype(np.int64)
    total = int(lens.sum())
    if total == 0:
        return np.zeros(0, dtype=np.int64)
    starts = np.cumsum(lens) - lens
    return np.repeat(qoff[rows].astype(np.int64) - starts, lens) + np.arange(total, dtype=np.int64)


@dataclass
class Failure:
    request_id: str
    surface: str
    caption_id: str
    file: str
    line: int
    kind: str
    error: str

    def example(self) -> Dict[str, Any]:
        return {"surface": self.surface, "caption_id": self.caption_id, "request_id": self.request_id,
                "file": self.file, "line": self.line, "kind": self.kind, "error": self.error[:500]}


class _AnsweredView(_MappingABC):
    """``answers.answered``: request id → answer codes (bytes, question order), merge order."""

    __slots__ = ("_a",)

    def __init__(self, a: "JudgeAnswers"):
        self._a = a

    def __getitem__(self, rid: str) -> bytes:
        a = self._a
        ix = a.index
        r = ix.ids[rid] if ix is not None else None
        if r is None or not a.flags[r]:
            raise KeyError(rid)
        o = ix.qoff[r]
        return bytes(a.codes[o:o + ix.qlen[r]])

    def __contains__(self, rid: object) -> bool:
        ix = self._a.index
        r = ix.ids.get(rid) if ix is not None and isinstance(rid, str) else None
        return r is not None and bool(self._a.flags[r])

    def __iter__(self) -> Iterator[str]:
        ix = self._a.index
        if ix is None:
            return iter(())
        rids = ix.request_ids
        return (rids[r] for r in self._a.answered_rows)

    def __len__(self) -> int:
        return len(self._a.answered_rows)


@dataclass
class JudgeAnswers:
    """One judge's merged, validated answers over a :class:`RequestIndex` (``index``).

    ``answered_rows``: index rows with a valid answer, in merge order (first appearance in the
    response files); ``codes``: one byte per question position of ``index`` (valid where the row
    is answered); ``flags[row]``: 1 when answered. ``answered`` is the id → codes view.
    """

    index: Optional[RequestIndex] = field(default=None, repr=False, compare=False)
    codes: bytearray = field(default_factory=bytearray, repr=False)
    flags: bytearray = field(default_factory=bytearray, repr=False)
    answered_rows: array = field(default_factory=lambda: array("l"), repr=False)
    #: ``no`` / ``uncertain`` → up to ``keep_examples`` ``(request_id, question position, result item)``
    examples: Dict[str, List[Tuple[str, int, Dict[str, Any]]]] = field(default_factory=dict)
    failures: List[Failure] = field(default_factory=list)
    responses: int = 0
    unknown: int = 0
    model_names: Dict[str, int] = field(default_factory=dict)
    #: torn last lines met while reading (not counted; see :func:`._stream.check_cut_lines`)
    cut_lines: List[CutLine] = field(default_factory=list)
    #: ``capaudit_degraded`` note → merged responses carrying it (answers given with less, e.g. no OCR)
    degraded: Dict[str, int] = field(default_factory=dict)
    #: merged responses carrying at least one ``capaudit_degraded`` note
    degraded_responses: int = 0

    @property
    def answered(self) -> Mapping[str, bytes]:
        return _AnsweredView(self)

    def failed_ids(self) -> List[str]:
        return [f.request_id for f in self.failures]

    def detached(self) -> "JudgeAnswers":
        """A copy without the index reference (to send between processes); see :meth:`attach`."""
        return JudgeAnswers(None, self.codes, self.flags, self.answered_rows, self.examples, self.failures,
                            self.responses, self.unknown, self.model_names, self.cut_lines, self.degraded,
                            self.degraded_responses)

    def attach(self, index: RequestIndex) -> "JudgeAnswers":
        self.index = index
        return self


_NUMBER_TYPES = frozenset({int, float})
_QID, _ANSWER, _CONFIDENCE = itemgetter("question_id"), itemgetter("answer"), itemgetter("confidence")


def _codes(caption_id: Optional[str], qids: Sequence[str], parsed: Any, distinct: bool = False) -> Optional[bytes]:
    """Fast path: answer codes in question order when the answer is exactly valid, else ``None``
    (the same decision as :func:`capaudit.judges.rules.answer_errors` returning no error).
    ``distinct``: the expected ids are known to be distinct, so answers given in question order
    need no id → answer map."""
    try:
        res = parsed["question_results"]
        cid = parsed["caption_id"]
        if caption_id is None:  # the message named no caption id: it need only be a string
            if not isinstance(cid, str):
                return None
        elif cid != caption_id and (not isinstance(cid, str) or cid.strip() != caption_id.strip()):
            return None
        ans = ANSWER_CODE
        if distinct and list(map(_QID, res)) == qids:
            codes = bytes(map(ans.__getitem__, map(_ANSWER, res)))
            return codes if set(map(type, map(_CONFIDENCE, res))) <= _NUMBER_TYPES else None
        got = {r["question_id"]: ans[r["answer"]] for r in res}
        if len(got) != len(res) or not {type(r["confidence"]) for r in res} <= _NUMBER_TYPES:
            return None
        if len(qids) != len(got):
            return None
        return bytes([got[q] for q in qids])
    except (KeyError, TypeError, AttributeError):
        return None


def load_answers(index: RequestIndex, responses: Sequence[PathLike], keep_examples: int = 0) -> JudgeAnswers:
    """Merge and validate one judge's responses in one pass (module docstring).

    The winner per request id follows :func:`capaudit.llm.store.merge` (answered beats failed;
    earliest answered, latest failed; exact ties by canonical JSON). ``failures`` lists every merged
    request whose row failed or whose answer does not match its questions (file and line of the
    winning row); responses for ids not in ``index`` are counted in ``unknown`` (an
    :class:`InputError` when that is every response: wrong requests file). A given path with no
    file, or whose files hold no row, is an :class:`InputError`; a torn last line is recorded in
    ``cut_lines`` (the caller refuses or counts it); ``degraded`` counts the merged responses whose
    server said it answered with less (``capaudit_degraded``).
    """
    from capaudit.io.canonical_json import canonical
    from capaudit.llm.store import rank_better

    files, stores = store_file_list(responses)
    rows_per_store: Dict[str, int] = dict.fromkeys(stores, 0)
    cut: List[CutLine] = []
    # row -> (ok, started_at, file index, offset, payload (None = valid answer, its codes stored), model, notes)
    win: Dict[int, Tuple[bool, str, int, int, Any, Any, Any]] = {}
    unknown: set = set()
    ids_get = index.ids.get
    cids, qoff, qlen = index.caption_ids, index.qoff, index.qlen
    unshown = index.unshown
    pattern = index.pattern
    codes_buf = bytearray(len(index.cats))
    models: Dict[Any, Any] = {}
    ws = _WHITESPACE
    with gc_paused():
        for fi, file in enumerate(files):
            fname = str(file)
            nrows = 0
            with open(file, "rb", buffering=1 << 20) as fh:
                lines = enumerate(fh, 1)
                end = 0
                for lineno, line in lines:
                    off = end
                    end += len(line)
                    if line[0] in ws and not line.strip():
                        continue
                    row = _parse(line, file, lineno)
                    if row is None:
                        cut.append(CutLine(fname, lineno, stores[fi]))
                        break
                    nrows += 1
                    rid = row["request_id"]
                    r = ids_get(rid)
                    if r is None:
                        unknown.add(rid)
                        continue
                    ok = row["ok"]
                    sa = str(row.get("started_at") or "")
                    cur = win.get(r)
                    if cur is not None:
                        better = rank_better(ok, sa, cur[0], cur[1])
                        if better is None:
                            better = canonical(row) < canonical(read_at(files, cur[2], cur[3]))
                        if not better:
                            continue
                    if ok:
                        if "parsed" not in row:  # llm run writes every answered row with its parsed answer
                            raise InputError("an answered row (ok: true) has no parsed answer; the store is not one "
                                             "llm run wrote, or was edited", path=fname, line=lineno, field="parsed")
                        cid = cids[r]
                        sufs, distinct = pattern(r)
                        qids = list(map(cid.__add__, sufs))
                        shown = cid if not unshown or index.caption_id_shown(r) else None
                        codes = _codes(shown, qids, row.get("parsed"), distinct)
                        if codes is None:
                            errs = answer_errors(row.get("parsed"), qids, shown) or ["answer does not match the request"]
                            payload: Any = ("ids", "; ".join(errs), lineno, fname)
                        else:
                            o = qoff[r]
                            codes_buf[o:o + len(codes)] = codes
                            payload = None
                    else:
                        payload = (str(row.get("error_kind") or "failed"), str(row.get("error") or row.get("status") or "failed"),
                                   lineno, fname)
                    model = row.get("model")
                    if isinstance(model, str):
                        model = models.setdefault(model, model)
                    notes = row.get("capaudit_degraded")
                    win[r] = (ok, sa, fi, off, payload, model, notes)
            rows_per_store[stores[fi]] += nrows
    check_not_empty(rows_per_store)
    out = JudgeAnswers(index=index, codes=codes_buf, flags=bytearray(len(index.request_ids)))
    out.cut_lines = cut
    out.unknown = len(unknown)
    out.responses = len(win)
    names = out.model_names
    rows_out = out.answered_rows
    flags = out.flags
    degraded = out.degraded
    surfaces, rids = index.surfaces, index.request_ids
    for r, (ok, sa, fi, off, payload, model, notes) in win.items():
        if isinstance(model, str):
            names[model] = names.get(model, 0) + 1
        if notes:
            out.degraded_responses += 1
            for note in (notes if isinstance(notes, list) else [notes]):
                degraded[str(note)] = degraded.get(str(note), 0) + 1
        if payload is None:
            rows_out.append(r)
            flags[r] = 1
        else:
            kind, err, lineno, file = payload
            out.failures.append(Failure(rids[r], surfaces[index.surface_of[r]], cids[r], file, lineno, kind, err))
    if keep_examples:
        for a in (1, 2):
            lst = out.examples.setdefault(ANSWER_NAMES[a], [])
            for r in rows_out:
                if len(lst) >= keep_examples:
                    break
                o = qoff[r]
                codes = codes_buf[o:o + qlen[r]]
                if a in codes:
                    k = codes.index(a)
                    qid = index.qids(r)[k]
                    row = read_at(files, win[r][2], win[r][3])
                    item = next((x for x in row["parsed"]["question_results"] if x.get("question_id") == qid), {})
                    lst.append((rids[r], k, dict(item)))
    if out.unknown and not out.responses:
        raise InputError(f"none of the {out.unknown} responses belongs to the given judge requests "
                         "(wrong --requests file?)", path=", ".join(map(str, responses)))
    return out


def iter_request_rows(paths: Sequence[PathLike], ids: Optional[set] = None) -> Iterator[Dict[str, Any]]:
    """Full request rows (optionally only ``ids``), for the few places that need question texts.

    With ``ids``, a line is parsed only when one of the ids occurs in it, and reading stops once
    every id was found."""
    if ids is not None and not ids:
        return
    left = set(ids) if ids is not None else None
    prefix = b'{"request_id":"'
    for p in paths:
        with open(p, "rb") as fh:
            for line in fh:
                if not line.strip():
                    continue
                if left is not None and line.startswith(prefix):  # our writer's layout: skip without parsing
                    end = line.find(b'"', len(prefix))
                    if line[len(prefix):end].decode("utf-8", "replace") not in left:
                        continue
                row = loads(line)
                if left is None:
                    yield row
                elif row.get("request_id") in left:
                    left.discard(row["request_id"])
                    yield row
                    if not left:
                        return


__all__ = ["CAT_CODE", "ANSWER_CODE", "ANSWER_NAMES", "RequestInfo", "RequestIndex", "Failure", "JudgeAnswers",
           "load_answers", "iter_request_rows", "question_positions"]
