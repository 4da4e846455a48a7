"""Judge request builder (reference-spec §5.1–5.2): claims + captions + images → VQA requests.

One request per caption whose claim extraction is ok with a non-empty unit list. Rows are built
with :func:`capaudit.llm.requests.make_request`; the id hashes task, task version, **judge model
and revision**, prompt version, schema, decoding and the input, so one question set sent to two
judges gives two request sets with identical question ids.

``input`` (hashed): ``caption_id, surface, questions: [{question_id, category, question}],
image_key, image_mode`` (``image_key`` = ``sha256:<hex>`` of the image bytes, or ``url:<url>``
for a remote URL; the image mode is hashed because ``data`` re-encodes the JPEG; ``judged_caption``,
the judged caption's text, only for judges that must leave it out of their evidence — the offline
reference-caption judge —, taken from the claims request's ``input.source_caption``). ``meta`` (not
hashed): ``source_row`` (of the caption input), ``claims_request_id``, ``image_path`` and
``units`` (``[unit, target, span]`` per question, for the judged-claims table) and, when the
extractor gave parent links (``claims build --parent-links``), ``parents`` (per question, the raw
indices of the object questions it depends on; :func:`.questions.question_parents`), read by
``judges cells --dependency on``.

Images (``--image-mode``):

* ``file``: ``file://`` URL of the resolved path (the server must be allowed to read it);
* ``data``: the image opened with PIL, converted to RGB, re-encoded as JPEG quality 88 (no
  resizing) and sent as a base64 ``data:image/jpeg`` URL;
* ``url``: the image field as given (``http(s)://``, ``data:`` or ``file://``).

Image field values that are not URLs are paths, relative to the caption file's folder (then the
working directory). Schema (§5.2): ``{caption_id, question_results}`` with ``minItems = maxItems =
#questions``, items ``{question_id: enum of this request's ids, answer: yes|no|uncertain,
confidence: number in [0, 1]}`` (+ ``evidence`` ≤ 160 characters with ``evidence=True``).

Beside the requests the builder writes ``<requests>.index.jsonl``: per request ``[request_id,
caption_id, surface, category codes, raw unit indices]`` and a trailer with the requests file's
size. Summaries and cells read it instead of the full rows while the size still matches (a
million requests: tens of MB instead of GB).

Speed (a million requests in well under a minute on two cores, issue 9 §6): rows are written by
:class:`FastRows`, byte for byte what :func:`build_request` + ``dumps_line`` write (checked on the
first rows and every 1,024th of each build, with a permanent fall-back to the slow path on any
difference), through :class:`capaudit.judges._stream.BlockWriter` (large ``O_DIRECT`` writes from
a writer thread), with the cyclic garbage collector paused while the loop allocates.

Captions that cannot be judged are not errors: each becomes one row of
``<requests>.failures.jsonl`` ``{file, row, caption_id, surface, claims_request_id, reason}`` and
is counted in the manifest (reasons: ``no_image`` — no caption row or an empty image field;
``image_missing``; ``image_unreadable``). Claims not answered, failed or with zero units are
counted too (they never reach the judge, §5.1).
"""

from __future__ import annotations

import base64
import hashlib
import io
import warnings
from collections import OrderedDict
from itertools import chain
from operator import itemgetter
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Dict, Iterator, List, Mapping, Optional, Sequence, Tuple, Union

from capaudit.errors import InputError
from capaudit.io.atomic import atomic_path, check_output_path, write_json_atomic
from capaudit.io import canonical_json
from capaudit.io.canonical_json import dumps_line
from capaudit.llm.requests import RequestIdTemplate, make_request

from .answer_schema import TASK, TASK_VERSION, vqa_schema
from .image_urls import data_url_bytes, file_url_path
from ._stream import (BlockWriter, CutLine, RowReader, check_cut_lines, check_not_empty, gc_paused, json_lines,
                      scan_winners, store_file_list)
from capaudit.prompt_sets import DEFAULT_PROMPT_SET, check_prompt_set, reference_judge

from .prompts import (CAPTION_LINE, JUDGED_CAPTION_LINE, PROMPT_VERSION, QUESTIONS_LINE, SYSTEM_PROMPT, prompt_head,
                      user_prompt)
from .questions import Question, question_parents, questions_from_units

IMAGE_MODES = ("file", "data", "url")
JPEG_QUALITY = 88
PathLike = Union[str, Path]


@dataclass(frozen=True)
class JudgeBuildParams:
    """Parameters of one judge request build (recorded in the manifest)."""

    model: str
    revision: Optional[str] = None
    image_mode: str = "file"
    max_tokens: int = 2048
    temperature: float = 0.0
    evidence: bool = False
    #: ``chat_template_kwargs.enable_thinking`` (the reference hard-codes false; ``None`` omits it).
    thinking: Optional[bool] = False
    #: send the judged caption's text (``judged_caption=`` line, ``input.judged_caption``) so the judge
    #: can leave it out of its evidence; ``None``: only for the judges whose model card says they
    #: need it (``needs: [judged_caption]``, :func:`capaudit.llm.server.served_cards`), never for a VLM
    judged_caption: Optional[bool] = None
    #: the wording of the messages (:mod:`capaudit.prompt_sets`): ``reference`` or ``capaudit``
    prompts: str = DEFAULT_PROMPT_SET

    def __post_init__(self) -> None:
        if self.image_mode not in IMAGE_MODES:
            raise InputError(f"image mode must be one of {', '.join(IMAGE_MODES)}, got {self.image_mode!r}",
                             field="image_mode")
        if not isinstance(self.model, str) or not self.model:
            raise InputError("judge model name must be a non-empty string", field="model")
        if isinstance(self.max_tokens, bool) or not isinstance(self.max_tokens, int) or self.max_tokens < 1:
            raise InputError(f"max_tokens must be a positive integer, got {self.max_tokens!r}", field="max_tokens")
        if not (isinstance(self.temperature, (int, float)) and self.temperature >= 0):
            raise InputError(f"temperature must be a number >= 0, got {self.temperature!r}", field="temperature")
        check_prompt_set(self.prompts)
        if self.judged_caption is None:
            from capaudit.llm.server import served_cards

            needs = served_cards().get(self.model, {}).get("needs", ())
            object.__setattr__(self, "judged_caption", "judged_caption" in needs)

    def decoding(self) -> Dict[str, Any]:
        d: Dict[str, Any] = {"temperature": float(self.temperature), "max_tokens": int(self.max_tokens)}
        if self.thinking is not None:
            d["chat_template_kwargs"] = {"enable_thinking": bool(self.thinking)}
        return d

    def prompt_version(self) -> Union[int, str]:
        return reference_judge().prompt_version if self.prompts == "reference" else PROMPT_VERSION

    def system_prompt(self) -> str:
        return reference_judge().system_prompt if self.prompts == "reference" else SYSTEM_PROMPT

    def user_prompt(self, caption_id: str, questions: Sequence[Mapping[str, Any]], schema: Mapping[str, Any],
                    judged_caption: Optional[str] = None) -> str:
        """The user message text in this build's wording. The reference's carries only the rules and
        ``questions=``; a ``judged_caption=`` line (offline caption-aware judges only) is appended."""
        if self.prompts != "reference":
            return user_prompt(caption_id, questions, schema, self.evidence, judged_caption=judged_caption)
        qs = [{"question_id": q["question_id"], "category": q["category"], "question": q["question"]} for q in questions]
        # the reference's compact json.dumps, by the writer the fast path matches (lone surrogates: TypeError)
        text = reference_judge().head(self.evidence) + canonical_json.dumps_bytes(qs).decode("utf-8")
        if judged_caption is not None:
            text += JUDGED_CAPTION_LINE + canonical_json.dumps_bytes(judged_caption).decode("utf-8")
        return text


# --- images ----------------------------------------------------------------------------------
class ImageError(Exception):
    """An image that cannot be used: ``reason`` is ``image_missing`` or ``image_unreadable``."""

    def __init__(self, reason: str, detail: str):
        super().__init__(detail)
        self.reason = reason


def is_url(value: str) -> bool:
    return value.startswith(("http://", "https://", "data:", "file://"))


def jpeg_data_url(data: bytes, quality: int = JPEG_QUALITY) -> str:
    """Open with PIL, convert to RGB, re-encode as JPEG (no resize), base64 data URL (§5.2)."""
    from PIL import Image

    with Image.open(io.BytesIO(data)) as im:
        rgb = im.convert("RGB")
        buf = io.BytesIO()
        rgb.save(buf, format="JPEG", quality=quality)
    return "data:image/jpeg;base64," + base64.b64encode(buf.getvalue()).decode("ascii")


class ImageResolver:
    """Turns an image field value into ``(url, image_key, local_path)`` for an image mode.

    File digests are cached per resolved path (an LRU of ``cache_size``), so a million requests
    over a few thousand images read each image once.
    """

    def __init__(self, mode: str, base_dir: Optional[Path] = None, cache_size: int = 4096):
        if mode not in IMAGE_MODES:
            raise InputError(f"image mode must be one of {', '.join(IMAGE_MODES)}, got {mode!r}", field="image_mode")
        self.mode = mode
        self.base_dir = base_dir
        self._cache: "OrderedDict[str, str]" = OrderedDict()
        self._values: Dict[str, Tuple[str, str, Optional[str]]] = {}
        self.cache_size = cache_size

    def local_path(self, value: str) -> Path:
        if value.startswith("file://"):
            return file_url_path(value)
        p = Path(value)
        if not p.is_absolute() and self.base_dir is not None and (self.base_dir / p).exists():
            p = self.base_dir / p
        return p.resolve()

    def _digest(self, path: Path) -> str:
        key = str(path)
        hit = self._cache.get(key)
        if hit is not None:
            self._cache.move_to_end(key)
            return hit
        try:
            data = path.read_bytes()
        except FileNotFoundError:
            raise ImageError("image_missing", f"image file not found: {path}") from None
        except OSError as exc:
            raise ImageError("image_unreadable", f"image file unreadable: {path} ({exc})") from None
        digest = "sha256:" + hashlib.sha256(data).hexdigest()
        self._cache[key] = digest
        if len(self._cache) > self.cache_size:
            self._cache.popitem(last=False)
        return digest

    def resolve(self, value: str) -> Tuple[str, str, Optional[str]]:
        """``(url sent, image_key, local path or None)``; raises :class:`ImageError`. Results are
        cached per value (file and url modes; ``data`` URLs are large and built each time)."""
        if self.mode == "data":
            return self._resolve(value)
        hit = self._values.get(value)
        if hit is not None:
            return hit
        out = self._resolve(value)
        self._values[value] = out
        if len(self._values) > self.cache_size:
            self._values.pop(next(iter(self._values)))
        return out

    def _resolve(self, value: str) -> Tuple[str, str, Optional[str]]:
        if self.mode == "url" or value.startswith(("http://", "https://", "data:")):
            if value.startswith("data:"):
                try:
                    return value, "sha256:" + hashlib.sha256(data_url_bytes(value)).hexdigest(), None
                except ValueError as exc:
                    raise ImageError("image_unreadable", f"bad data URL ({exc})") from None
            if value.startswith("file://"):
                p = file_url_path(value)
                return value, self._digest(p), str(p)
            if not value.startswith(("http://", "https://")):
                p = self.local_path(value)
                return p.as_uri(), self._digest(p), str(p)
            return value, "url:" + value, None
        path = self.local_path(value)
        key = self._digest(path)
        if self.mode == "file":
            return path.as_uri(), key, str(path)
        try:
            url = jpeg_data_url(path.read_bytes())
        except ImageError:
            raise
        except Exception as exc:  # PIL cannot decode it
            raise ImageError("image_unreadable", f"image not decodable: {path} ({type(exc).__name__}: {exc})") from None
        return url, key, str(path)


# --- requests --------------------------------------------------------------------------------
def build_request(
    caption_id: str,
    surface: str,
    questions: Sequence[Question],
    image_url: str,
    image_key: str,
    params: JudgeBuildParams,
    meta: Optional[Mapping[str, Any]] = None,
    caption: Optional[str] = None,
) -> Dict[str, Any]:
    """One judge request row (module docstring); ``caption`` (the judged caption's text) is needed,
    and sent, only when ``params.judged_caption``."""
    if not questions:
        raise ValueError(f"caption {caption_id!r}: a judge request needs at least one question")
    if params.judged_caption and not isinstance(caption, str):
        raise ValueError(f"caption {caption_id!r}: judge {params.model} needs the judged caption's text")
    judged = caption if params.judged_caption else None
    public = [q.public() for q in questions]
    schema = vqa_schema([q.question_id for q in questions], params.evidence)
    text = params.user_prompt(caption_id, public, schema, judged_caption=judged)
    inp: Dict[str, Any] = {"caption_id": caption_id, "surface": surface, "questions": public, "image_key": image_key,
                           "image_mode": params.image_mode}
    if judged is not None:
        inp["judged_caption"] = judged
    return make_request(
        task=TASK,
        task_version=TASK_VERSION,
        model=params.model,
        revision=params.revision,
        prompt_version=params.prompt_version(),
        schema=schema,
        messages=[
            {"role": "system", "content": params.system_prompt()},
            {"role": "user", "content": [{"type": "text", "text": text},
                                         {"type": "image_url", "image_url": {"url": image_url}}]},
        ],
        decoding=params.decoding(),
        input=inp,
        meta={**(dict(meta) if meta else {}), "units": [[q.unit, q.target, q.span] for q in questions]},
    )


# --- byte-level fast path of build_request + dumps_line --------------------------------------
def _esc_json(data: bytes) -> bytes:
    """JSON text (orjson output) → its escaping inside a JSON string. orjson output has no raw
    control characters, so only ``\\`` and ``"`` change (equal to ``dumps(text)[1:-1]``, tested)."""
    return data.replace(b"\\", b"\\\\").replace(b'"', b'\\"')


class _Template:
    """Bytes with named slots: built from a serialisation in which each slot holds a unique
    marker string, so every fixed byte comes from the real (slow-path) structures."""

    __slots__ = ("parts", "names")

    def __init__(self, data: bytes, marks: Mapping[str, bytes]):
        found = []
        for name, mark in marks.items():
            if data.count(mark) != 1:
                raise ValueError(f"template: slot {name!r} found {data.count(mark)} times")
            found.append((data.index(mark), name, mark))
        found.sort()
        parts: List[bytes] = []
        last = 0
        for pos, _, mark in found:
            parts.append(data[last:pos])
            last = pos + len(mark)
        parts.append(data[last:])
        self.parts = tuple(parts)
        self.names = tuple(name for _, name, _ in found)

    def fill(self, values: Mapping[str, bytes]) -> bytes:
        parts = self.parts
        out = [parts[0]]
        for k, name in enumerate(self.names, 1):
            out.append(values[name])
            out.append(parts[k])
        return b"".join(out)

    def filler(self, order: Sequence[str]) -> Any:
        """A function of the slot values given positionally in ``order`` (faster than :meth:`fill`)."""
        if sorted(order) != sorted(self.names):
            raise ValueError(f"template slots {sorted(self.names)} != {sorted(order)}")
        perm = tuple(order.index(name) for name in self.names)
        parts = self.parts[:-1]
        tail = (self.parts[-1],)
        pick = itemgetter(*perm) if len(perm) > 1 else (lambda v: (v[perm[0]],))
        join, flat = b"".join, chain.from_iterable

        def fill(*values: bytes) -> bytes:
            return join(chain(flat(zip(parts, pick(values))), tail))

        return fill


_QID, _CATEGORY, _INDEX = itemgetter(0), itemgetter(1), itemgetter(6)
_UNIT_TARGET_SPAN = itemgetter(3, 4, 5)


def _mark(name: str) -> str:
    return f"\u0000capaudit-slot-{name}\u0000"


class FastRows:
    """Judge request lines as bytes, byte for byte ``dumps_line(build_request(...))`` (the slow
    path), several times faster: every fixed part (task, model, system prompt, decoding, the
    schema and prompt skeletons, key orders) is serialised once from the slow path's own
    structures with marker values, and per request only the variable values are serialised —
    strings and question lists, on which orjson and the standard library's canonical JSON agree
    (tested over every code point), so ids never change; decoding floats sit in the fixed parts,
    serialised by :func:`capaudit.io.canonical_json.canonical`. :func:`build_judge_requests` checks the
    first rows and then every ``CHECK_EVERY``-th against the slow path and falls back to it for
    good on any difference (and per row on any serialisation error, so errors stay the same).
    """

    CHECK_FIRST = 8
    CHECK_EVERY = 1024

    def __init__(self, params: JudgeBuildParams):
        orj = canonical_json.ORJSON
        if orj is None:
            raise RuntimeError("FastRows needs orjson")
        self._dumps = orj.dumps
        self._sorted = orj.OPT_SORT_KEYS
        self.params = params
        self.ids = RequestIdTemplate(TASK, TASK_VERSION, params.model, params.revision, params.prompt_version(),
                                     params.decoding())
        self._reference = params.prompts == "reference"
        head = reference_judge().head(params.evidence) if self._reference else prompt_head(params.evidence)
        self._text_head = b'"' + orj.dumps(head)[1:-1]
        self._caption_line = orj.dumps(CAPTION_LINE)[1:-1]
        self._questions_line = orj.dumps(QUESTIONS_LINE)[1:-1]
        self._schemas: Dict[int, Tuple[bytes, bytes, bytes, bytes, bytes, bytes]] = {}
        probe = [Question("p:u0000", "object", "q", "u", "", "", 0)]
        row = build_request("p", "s", probe, "file:///p", "sha256:p", params,
                            meta={"source_row": 0, "claims_request_id": "r", "image_path": "/p"})
        slots = ("request_id", "schema", "text", "url", "caption_id", "surface", "questions", "image_key",
                 "source_row", "claims_request_id", "image_path", "units")
        m = {k: _mark(k) for k in slots}
        row["request_id"], row["schema"] = m["request_id"], m["schema"]
        user = row["messages"][1]["content"]
        user[0]["text"], user[1]["image_url"]["url"] = m["text"], m["url"]
        inp, meta = row["input"], row["meta"]
        for k in ("caption_id", "surface", "questions", "image_key"):
            inp[k] = m[k]
        for k in ("source_row", "claims_request_id", "image_path", "units"):
            meta[k] = m[k]
        mb = {k: orj.dumps(v) for k, v in m.items()}
        self._row = _Template(dumps_line(row), mb).filler(slots)
        cin = ("caption_id", "surface", "questions", "image_key")
        self._canonical_input = _Template(canonical_json.canonical_bytes(inp), {k: mb[k] for k in cin}).filler(cin)
        self._hash = self._hasher()

    def _hasher(self) -> Any:
        """``(canonical input, schema head, id enum, schema tail) -> request id``: one
        :meth:`RequestIdTemplate.canonical_payload` join and blake2b-16, as
        :func:`capaudit.llm.requests.request_id` (a probe checks the two agree)."""
        ids = self.ids
        mark_s, mark_i = b"\x00S\x00", b"\x00I\x00"
        parts = ids.canonical_payload(mark_s, mark_i)
        if parts.count(mark_s) != 1 or parts.count(mark_i) != 1:  # pragma: no cover - markers are not JSON
            raise ValueError("request-id template: marker clash")
        fixed = _Template(parts, {"schema": mark_s, "input": mark_i})
        blake = hashlib.blake2b
        if fixed.names == ("input", "schema"):
            p0, p1, p2 = fixed.parts

            def rid(cin: bytes, sh: bytes, enum: bytes, st: bytes) -> str:
                return blake(b"".join((p0, cin, p1, sh, enum, st, p2)), digest_size=16).hexdigest()
        else:  # pragma: no cover - the payload's keys sort "input" before "schema"
            def rid(cin: bytes, sh: bytes, enum: bytes, st: bytes) -> str:
                return ids.request_id(b"".join((sh, enum, st)), cin)
        probe_in, probe_s = b'{"x":1}', (b'{"s":', b'["a"]', b"}")
        if rid(probe_in, *probe_s) != ids.request_id(b"".join(probe_s), probe_in):  # pragma: no cover
            raise RuntimeError("request-id fast path disagrees with RequestIdTemplate")
        return rid

    def _schema(self, n: int) -> Tuple[bytes, bytes, bytes, bytes, bytes, bytes]:
        """The §5.2 schema for ``n`` questions cut around the id enum: row bytes, canonical bytes
        and the row bytes escaped inside the user message (head, tail each)."""
        hit = self._schemas.get(n)
        if hit is None:
            sch = vqa_schema(["q"] * n, self.params.evidence)
            mark = _mark("enum")
            sch["properties"]["question_results"]["items"]["properties"]["question_id"]["enum"] = mark
            mb = self._dumps(mark)
            r = _Template(canonical_json.dumps_bytes(sch), {"enum": mb})
            c = _Template(canonical_json.canonical_bytes(sch), {"enum": mb})
            hit = self._schemas[n] = (r.parts[0], r.parts[1], c.parts[0], c.parts[1],
                                      self._text_head + _esc_json(r.parts[0]), _esc_json(r.parts[1]))
        return hit

    def line(self, caption_id: str, surface: str, questions: Sequence[Question], image_url: str, image_key: str,
             meta: Mapping[str, Any]) -> Tuple[str, bytes]:
        """``(request_id, JSONL line)`` of one request; ``meta`` = source_row, claims_request_id,
        image_path. Raises (``TypeError``) where orjson cannot serialise a value (lone surrogates):
        the caller then takes the slow path."""
        if not questions:
            raise ValueError(f"caption {caption_id!r}: a judge request needs at least one question")
        dumps = self._dumps
        qids = list(map(_QID, questions))
        public = [{"question_id": q[0], "category": q[1], "question": q[2]} for q in questions]
        enum = dumps(qids)
        rh, rt, ch, ct, th, tt = self._schema(len(qids))
        qjson = dumps(public)
        jc, js, jk = dumps(caption_id), dumps(surface), dumps(image_key)
        rid = self._hash(self._canonical_input(jc, js, dumps(public, option=self._sorted), jk), ch, enum, ct)
        if self._reference:  # rules, then the questions JSON
            text = b"".join((self._text_head, _esc_json(qjson), b'"'))
        else:
            text = b"".join((th, _esc_json(enum), tt, self._caption_line, jc[1:-1], self._questions_line,
                             _esc_json(qjson), b'"'))
        line = self._row(
            b'"' + rid.encode("ascii") + b'"', b"".join((rh, enum, rt)), text, dumps(image_url), jc, js, qjson, jk,
            dumps(meta["source_row"]), dumps(meta["claims_request_id"]), dumps(meta["image_path"]),
            dumps(list(map(_UNIT_TARGET_SPAN, questions))))  # tuples serialise as arrays
        return rid, line


def read_caption_index(path: Path, id_field: str, image_field: str) -> Dict[str, Tuple[int, Optional[str]]]:
    """caption id → (0-based row, image field value or None) of a caption JSONL (the ``claims build`` input).

    A row without the id field, or an id seen twice, is an error naming file, line and field.
    """
    path = Path(path)
    if not path.is_file():
        raise InputError("caption file not found", path=path)
    out: Dict[str, Tuple[int, Optional[str]]] = {}
    for lineno, row in json_lines(path):
        if not isinstance(row, dict):
            raise InputError("row is not a JSON object", path=path, line=lineno)
        cid = row.get(id_field)
        if cid is None or (isinstance(cid, str) and not cid.strip()):
            raise InputError("id field is missing or empty", path=path, line=lineno, field=id_field)
        cid = str(cid)
        if cid in out:
            raise InputError(f"caption id {cid!r} also on line {out[cid][0] + 1}", path=path, line=lineno,
                             field=id_field)
        img = row.get(image_field)
        out[cid] = (lineno - 1, img if isinstance(img, str) and img.strip() else None)
    return out


@dataclass
class BuildCounts:
    """Outcome of one build (manifest ``counts``)."""

    claims_requests: int = 0
    claims_not_answered: int = 0
    claims_failed: int = 0
    claims_zero_units: int = 0
    no_image: int = 0
    image_missing: int = 0
    image_unreadable: int = 0
    requests: int = 0
    questions: int = 0
    #: cut last lines of claims response stores still being written (their captions: not answered)
    claims_cut_lines: int = 0
    #: requests whose questions carry dependency links (``meta.parents``), and links dropped
    #: (not to an object claim of the same caption)
    requests_with_parents: int = 0
    parent_links_dropped: int = 0

    @property
    def failures(self) -> int:
        return self.no_image + self.image_missing + self.image_unreadable


def iter_claims_requests(paths: Sequence[PathLike]) -> Iterator[Tuple[Path, int, Dict[str, Any]]]:
    """``(file, line, row)`` of claims request rows (needs ``request_id`` and ``input.caption_id``)."""
    for p in paths:
        p = Path(p)
        if not p.is_file():
            raise InputError("claims requests file not found", path=p)
        for lineno, row in json_lines(p):
            inp = row.get("input") if isinstance(row, dict) else None
            if not isinstance(row, dict) or not isinstance(row.get("request_id"), str) or not isinstance(inp, dict):
                raise InputError("claims request needs 'request_id' and an 'input' object", path=p, line=lineno)
            if not isinstance(inp.get("caption_id"), str):
                raise InputError("claims request has no string input.caption_id", path=p, line=lineno,
                                 field="input.caption_id")
            yield p, lineno, row


def build_judge_requests(
    claims_responses: Sequence[PathLike],
    claims_requests: Sequence[PathLike],
    captions: PathLike,
    id_field: str,
    image_field: str,
    params: JudgeBuildParams,
    out: PathLike,
    fast_path: bool = True,
    image_failures: str = "record",
) -> BuildCounts:
    """``capaudit judges build``: write ``out`` (requests JSONL), ``<out>.failures.jsonl`` and the
    manifest (written last); returns the counts. Output order = claims request order.

    ``image_failures``: ``record`` (a caption without a usable image becomes a row of the failures
    file and is counted) or ``refuse`` (the first one raises :class:`InputError` naming the captions
    file, row and image field; nothing is written).

    Rows are written by :class:`FastRows` (checked against :func:`build_request`; ``fast_path=False``
    writes every row through :func:`build_request` + ``dumps_line`` — the same bytes, slower)."""
    out = check_output_path(out)
    captions = Path(captions)
    with gc_paused():
        index = read_caption_index(captions, id_field, image_field)
    files, stores = store_file_list(claims_responses, "claims response")
    cut: List[CutLine] = []
    rows_per_store: Dict[str, int] = {}
    winners = scan_winners(files, cut, stores, rows_per_store)
    check_not_empty(rows_per_store, "claims response")
    in_progress = check_cut_lines(cut, allow_in_progress=True)
    resolver = ImageResolver(params.image_mode, captions.parent)
    counts = BuildCounts(claims_cut_lines=len(in_progress))
    fail_path = failures_path(out)
    seen: set = set()
    from .answers import index_line, index_path

    nbytes = 0
    fast = None
    if fast_path and canonical_json.HAVE_ORJSON and not params.judged_caption:  # no judged-caption slot (small runs)
        try:
            fast = FastRows(params)
        except (KeyError, IndexError, TypeError, ValueError) as exc:  # the request layout changed: slow path
            warnings.warn(f"judges build: no fast request writer ({type(exc).__name__}: {exc}); using build_request",
                          RuntimeWarning, stacklevel=2)
    check_first, check_every = FastRows.CHECK_FIRST, FastRows.CHECK_EVERY

    if image_failures not in ("record", "refuse"):
        raise ValueError(f"image_failures must be 'record' or 'refuse', got {image_failures!r}")

    def fail(ff: Any, counts: BuildCounts, hit: Any, cid: str, surface: str, rid: str, reason: str, detail: str) -> None:
        if image_failures == "refuse":
            row = None if hit is None else hit[0] + 1
            raise InputError(f"caption {cid!r} cannot be judged ({reason}: {detail}); --image-failures record "
                             f"lists such captions in {failures_path(out)} instead",
                             path=captions, line=row, field=image_field if row is not None else None)
        setattr(counts, reason, getattr(counts, reason) + 1)
        ff.write(dumps_line({"file": str(captions), "row": None if hit is None else hit[0] + 1, "caption_id": cid,
                             "surface": surface, "claims_request_id": rid, "reason": reason, "detail": detail}))

    with atomic_path(out) as tmp_out, atomic_path(fail_path) as tmp_fail, atomic_path(index_path(out)) as tmp_idx, \
            RowReader(files) as reader, gc_paused():
        with BlockWriter(tmp_out) as fo, open(tmp_fail, "wb") as ff, BlockWriter(tmp_idx) as fx:
            for req_file, req_line, req in iter_claims_requests(claims_requests):
                rid = req["request_id"]
                if rid in seen:
                    continue
                seen.add(rid)
                counts.claims_requests += 1
                inp = req["input"]
                cid, surface = inp["caption_id"], str(inp.get("surface", ""))
                w = winners.get(rid)
                if w is None:
                    counts.claims_not_answered += 1
                    continue
                if not w[0]:
                    counts.claims_failed += 1
                    continue
                parsed = reader.read(w[2], w[3]).get("parsed")
                qs = questions_from_units(cid, parsed.get("claimed_units") if isinstance(parsed, dict) else None)
                if not qs:
                    counts.claims_zero_units += 1
                    continue
                hit = index.get(cid)
                if hit is None or hit[1] is None:
                    fail(ff, counts, hit, cid, surface, rid, "no_image", f"caption id {cid!r} has "
                         + ("no row" if hit is None else f"no '{image_field}' value") + f" in {captions}")
                    continue
                try:
                    url, key, local = resolver.resolve(hit[1])
                except ImageError as exc:
                    fail(ff, counts, hit, cid, surface, rid, exc.reason, str(exc))
                    continue
                meta = {"source_row": hit[0], "claims_request_id": rid, "image_path": local}
                parents, dropped = question_parents(parsed.get("claimed_units"), qs)
                counts.parent_links_dropped += dropped
                if parents is not None:  # the fast writer has no parents slot: these rows take the slow path
                    meta["parents"] = parents
                    counts.requests_with_parents += 1
                caption = None
                if params.judged_caption:
                    caption = inp.get("source_caption", inp.get("caption"))
                    if not isinstance(caption, str):
                        raise InputError(f"judge {params.model} needs the judged caption's text: the claims request "
                                         "has no string input.source_caption", path=req_file, line=req_line,
                                         field="input.source_caption")
                line = None
                if fast is not None and parents is None:
                    try:
                        new_id, line = fast.line(cid, surface, qs, url, key, meta)
                    except TypeError:  # a value orjson cannot serialise: the slow path raises or copes
                        line = None
                    if line is not None and (counts.requests < check_first or counts.requests % check_every == 0):
                        slow = dumps_line(build_request(cid, surface, qs, url, key, params, meta=meta))
                        if slow != line:
                            warnings.warn(f"judges build: the fast request writer differs from build_request on "
                                          f"caption {cid!r}; using the slow path for the rest of {out}",
                                          RuntimeWarning, stacklevel=2)
                            fast = None
                            line = None
                if line is None:
                    row = build_request(cid, surface, qs, url, key, params, meta=meta, caption=caption)
                    new_id, line = row["request_id"], dumps_line(row)
                fo.write(line)
                nbytes += len(line)
                fx.write(index_line(new_id, cid, surface, list(map(_CATEGORY, qs)), list(map(_INDEX, qs))))
                counts.requests += 1
                counts.questions += len(qs)
            fx.write(dumps_line({"index_of": out.name, "bytes": nbytes, "rows": counts.requests}))
    write_build_manifest(out, params, counts, {"claims_responses": [str(p) for p in claims_responses],
                                               "claims_requests": [str(p) for p in claims_requests],
                                               "captions": str(captions), "id_field": id_field,
                                               "image_field": image_field})
    return counts


def failures_path(requests_path: PathLike) -> Path:
    p = Path(requests_path)
    stem = p.name[: -len(".jsonl")] if p.name.endswith(".jsonl") else p.name
    return p.with_name(stem + ".failures.jsonl")


def manifest_path(requests_path: PathLike) -> Path:
    p = Path(requests_path)
    stem = p.name[: -len(".jsonl")] if p.name.endswith(".jsonl") else p.name
    return p.with_name(stem + ".manifest.json")


def write_build_manifest(out: Path, params: JudgeBuildParams, counts: BuildCounts, source: Mapping[str, Any]) -> Path:
    body = {
        "task": TASK, "task_version": TASK_VERSION, "prompt_set": params.prompts,
        "prompt_version": params.prompt_version(), "model": params.model,
        "parameters": asdict(params), "decoding": params.decoding(), "system_prompt": params.system_prompt(),
        "source": dict(source), "counts": {**asdict(counts), "failures": counts.failures},
        "requests": out.name, "failures": failures_path(out).name,
    }
    return write_json_atomic(manifest_path(out), body)


__all__ = [
    "IMAGE_MODES", "JPEG_QUALITY", "JudgeBuildParams", "ImageError",
    "ImageResolver", "build_request", "FastRows", "read_caption_index", "BuildCounts", "build_judge_requests", "failures_path",
    "manifest_path", "jpeg_data_url", "is_url", "iter_claims_requests",
]
