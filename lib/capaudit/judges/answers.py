"""Judge requests and answers in compact form, shared by the per-judge summary and the cells.

A :class:`RequestIndex` keeps per request id only ``(surface, caption_id, categories, raw unit
indices)`` — one byte per question for the category and two for the index — so a million
requests of ten questions fit in a few hundred MB. :func:`load_answers` merges a judge's response
store(s) answered-wins (:mod:`._stream`), validates every answered row against its request
(:func:`capaudit.judges.rules.answer_errors`: exactly one in-enum answer per expected id) and keeps
one byte per question (0 yes, 1 no, 2 uncertain) in the request's question order.
"""

from __future__ import annotations

from array import array
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Dict, Iterator, List, Mapping, Optional, Sequence, Tuple, Union

from capaudit.errors import InputError
from capaudit.llm._json import loads
from capaudit.summaries._common import UNIT_CATEGORIES

from ._stream import expand, read_at
from .rules import answer_errors

PathLike = Union[str, Path]
CAT_CODE: Dict[str, int] = {c: i for i, c in enumerate(UNIT_CATEGORIES)}
ANSWER_CODE: Dict[str, int] = {"yes": 0, "no": 1, "uncertain": 2}
ANSWER_NAMES = ("yes", "no", "uncertain")
_DIGIT_CODES = bytes.maketrans(b"0123456789", bytes(range(10)))


class RequestInfo:
    """Compact form of one judge request: surface index, caption id, categories, raw unit indices."""

    __slots__ = ("surface", "caption_id", "cats", "idx")

    def __init__(self, surface: int, caption_id: str, cats: bytes, idx: bytes):
        self.surface = surface
        self.caption_id = caption_id
        self.cats = cats
        self.idx = idx  # array('H') of raw unit indices, as bytes

    def indices(self) -> List[int]:
        a = array("H")
        a.frombytes(self.idx)
        return a.tolist()

    def qids(self) -> List[str]:
        return [f"{self.caption_id}:u{i:04d}" for i in self.indices()]


def index_path(requests_path: PathLike) -> Path:
    """``REQ.jsonl`` → ``REQ.index.jsonl``: the compact sidecar the builder writes beside the requests."""
    p = Path(requests_path)
    stem = p.name[: -len(".jsonl")] if p.name.endswith(".jsonl") else p.name
    return p.with_name(stem + ".index.jsonl")


def index_line(request_id: str, caption_id: str, surface: str, categories: Sequence[str], indices: Sequence[int]) -> bytes:
    """One sidecar line: ``[request_id, caption_id, surface, category codes, raw unit indices]``."""
    from capaudit.llm._json import dumps_line

    return dumps_line([request_id, caption_id, surface, "".join(str(CAT_CODE[c]) for c in categories), list(indices)])


class RequestIndex:
    """Judge requests by id (module docstring); ``order`` = first-seen ordinal of (surface, caption_id)."""

    def __init__(self) -> None:
        self.surfaces: List[str] = []
        self._surface_idx: Dict[str, int] = {}
        self.rows: Dict[str, RequestInfo] = {}
        self.order: Dict[Tuple[int, str], int] = {}
        self.models: Dict[str, int] = {}
        self.files: List[str] = []

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
        self._put(rid, str(inp.get("surface", "")), cid, bytes(cats), idx.tobytes())
        model = row.get("model_hint")
        if isinstance(model, str):
            self.models[model] = self.models.get(model, 0) + 1

    def _put(self, rid: str, surface: str, cid: str, cats: bytes, idx: bytes) -> None:
        s = self.surface_index(surface)
        self.rows[rid] = RequestInfo(s, cid, cats, idx)
        self.order.setdefault((s, cid), len(self.order))

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
        for lineno, line in enumerate(lines[:-1], 1):
            try:
                rid, cid, surface, cats, indices = loads(line)
                idx = array("H", indices)
                codes = cats.encode("ascii").translate(_DIGIT_CODES)
                if len(codes) != len(idx) or max(codes) > 7:
                    raise ValueError("bad category codes")
            except (ValueError, TypeError, OverflowError, AttributeError):
                raise InputError("unreadable request index line (delete it to read the requests instead)",
                                 path=side, line=lineno) from None
            self._put(rid, surface, cid, codes, idx.tobytes())
        return True

    @classmethod
    def from_files(cls, paths: Sequence[PathLike]) -> "RequestIndex":
        """Index judge request files (their ``.index.jsonl`` sidecar when it is current)."""
        idx = cls()
        for p in paths:
            p = Path(p)
            if not p.is_file():
                raise InputError("judge requests file not found", path=p)
            idx.files.append(str(p))
            if idx._load_sidecar(p):
                continue
            with open(p, "rb") as fh:
                for lineno, line in enumerate(fh, 1):
                    if not line.strip():
                        continue
                    try:
                        row = loads(line)
                    except ValueError as exc:
                        raise InputError(f"invalid JSON ({exc})", path=p, line=lineno) from None
                    if not isinstance(row, dict):
                        raise InputError("request row is not a JSON object", path=p, line=lineno)
                    idx.add(row, f"{p}:{lineno}")
        if not idx.rows:
            raise InputError("no judge request in the requests file(s)", path=", ".join(map(str, paths)))
        return idx


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


@dataclass
class JudgeAnswers:
    """One judge's merged, validated answers over a :class:`RequestIndex`."""

    answered: Dict[str, bytes] = field(default_factory=dict)
    #: ``no`` / ``uncertain`` → up to ``keep_examples`` ``(request_id, question position, result item)``
    examples: Dict[str, List[Tuple[str, int, Dict[str, Any]]]] = field(default_factory=dict)
    failures: List[Failure] = field(default_factory=list)
    responses: int = 0
    unknown: int = 0
    model_names: Dict[str, int] = field(default_factory=dict)

    def failed_ids(self) -> List[str]:
        return [f.request_id for f in self.failures]


_NUMBER = (int, float)


def _codes(info: RequestInfo, parsed: Any) -> Optional[bytes]:
    """Fast path: answer codes in question order when the answer is exactly valid, else ``None``."""
    try:
        res = parsed["question_results"]
        cid = parsed["caption_id"]
        if cid != info.caption_id and (not isinstance(cid, str) or cid.strip() != info.caption_id.strip()):
            return None
        got = {r["question_id"]: ANSWER_CODE[r["answer"]] for r in res}
        if len(got) != len(res) or not all(type(r["confidence"]) in _NUMBER for r in res):
            return None
        qids = info.qids()
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
    :class:`InputError` when that is every response: wrong requests file).
    """
    from capaudit.llm._json import canonical

    from ._stream import _lines, _parse

    files = expand(responses)
    if not files:
        raise InputError("no response file found", path=", ".join(map(str, responses)))
    win: Dict[str, Tuple[bool, str, int, int, Any, Any]] = {}
    unknown: set = set()
    rows_get = index.rows.get
    for fi, file in enumerate(files):
        for off, lineno, line in _lines(file):
            row = _parse(line, file, lineno)
            if row is None:
                break
            rid = row["request_id"]
            info = rows_get(rid)
            if info is None:
                unknown.add(rid)
                continue
            ok = row["ok"]
            sa = str(row.get("started_at") or "")
            cur = win.get(rid)
            if cur is not None:
                if ok != cur[0]:
                    better = ok
                elif sa != cur[1]:
                    better = sa < cur[1] if ok else sa > cur[1]
                else:
                    better = canonical(row) < canonical(read_at(files, cur[2], cur[3]))
                if not better:
                    continue
            if ok:
                codes = _codes(info, row.get("parsed"))
                if codes is None:
                    errs = answer_errors(row.get("parsed"), info.qids(), info.caption_id) or ["answer does not match the request"]
                    payload: Any = ("ids", "; ".join(errs), lineno, str(file))
                else:
                    payload = codes
            else:
                payload = (str(row.get("error_kind") or "failed"), str(row.get("error") or row.get("status") or "failed"),
                           lineno, str(file))
            win[rid] = (ok, sa, fi, off, payload, row.get("model"))
    out = JudgeAnswers()
    out.unknown = len(unknown)
    for rid, (ok, sa, fi, off, payload, model) in win.items():
        out.responses += 1
        if isinstance(model, str):
            out.model_names[model] = out.model_names.get(model, 0) + 1
        if isinstance(payload, bytes):
            out.answered[rid] = payload
        else:
            info = index.rows[rid]
            kind, err, lineno, file = payload
            out.failures.append(Failure(rid, index.surfaces[info.surface], info.caption_id, file, lineno, kind, err))
    if keep_examples:
        for a in (1, 2):
            lst = out.examples.setdefault(ANSWER_NAMES[a], [])
            for rid, codes in out.answered.items():
                if len(lst) >= keep_examples:
                    break
                if a in codes:
                    k = codes.index(a)
                    qid = index.rows[rid].qids()[k]
                    row = read_at(files, win[rid][2], win[rid][3])
                    item = next((r for r in row["parsed"]["question_results"] if r.get("question_id") == qid), {})
                    lst.append((rid, k, dict(item)))
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
           "load_answers", "iter_request_rows"]
