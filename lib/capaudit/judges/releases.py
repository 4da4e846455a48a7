"""Published VQA answer releases → capaudit judge stores (``capaudit judges import``).

A release holds a VQA model's answers to atomic questions about generated images. Each image —
a (text-to-image model, item) pair — becomes one judge request of the ``cbu_vqa`` task (surface =
the text-to-image model, the *group*; caption id = the item id) and, when the release answers it,
one answered response row, so ``judges summarize``/``cells`` read an import like our own runs.

Formats:

* ``dsg``: the DSG release's CSV (``vqa_answers_release/<vqa>_<qg>.csv``: ``t2i_model, item_id,
  question, answer`` and, for the DSG question set, ``question_id, dependency_id``), optionally
  with the DSG questions file (``dsg-1k-anns.csv``: ``item_id, proposition_id, dependency,
  category_broad, category_detailed``). Question ids are the release's (``question_id``), or the
  1-based row order within the image where it gives none (as DSG's scripts number them).
  Dependencies come from the questions file (as DSG's scripts take them), else from
  ``dependency_id``; ``0`` means none.
* ``tifa``: TIFA's evaluation-result JSON (``{"question_details": {text_id: {question: {choices,
  answer, element_type, multiple_choice_vqa, free_form_vqa, ...}}}}``); one image per text id, in
  the group given by ``--group``; question ids are the 1-based question order. TIFA scores a
  question correct when the VQA model's multiple-choice answer equals the answer key, so the
  normalised answer is ``yes`` when it does and ``no`` when it does not; ``raw_answer`` is the VQA
  answer verbatim (an empty or non-string one is ``empty``/``unrecognised``, never ``no``), and the
  key, choices and free-form answer are kept in ``release``.

Question ``<n>`` of item ``<item>`` has the capaudit id ``<item>:u<n:04d>`` (the release's number
is the raw unit index, kept exactly). Categories map to capaudit claim categories through
``capaudit/data/release_vqa.yaml``; the release's own category is kept in
``meta.release_categories``, dependencies in ``meta.parents`` (per question, the parents' numbers).

Answers are normalised by the same file's lexicon (stripped, lower-cased, trailing ``.!?``
removed; DSG's scripts compare the raw string with ``'yes'`` — on the release the two agree for
every answer, tested). What is none of yes/no/uncertain is **kept**: its question result has answer
``uncertain``, ``raw_answer`` verbatim and ``answer_status`` ``empty`` (``''``), ``unrecognised``
(``unsuitable``, ``stat stat``, ``no bus``, an answer to a multiple-choice question whose key the
release does not hold) or ``missing`` (a question of the questions file with no answer row for an
image that has answers); the manifest counts each status and names every raw value. The release
gives no confidence: it is recorded as 1 for a recognised answer and 0 for the rest
(``meta.confidence`` says so). An image of the questions file that a group's answers lack (DSG:
``tifa160_134``, for a split the group covers) becomes a request with no response: counted as
``missing_images``, scored by ``judges item-scores`` as missing.

Output folder (written together, or not at all): ``requests.jsonl`` (+ ``requests.index.jsonl``),
``responses.jsonl``, ``import.json`` (the manifest). Importing the same release twice gives the same
bytes; a folder holding another import is refused.
"""

from __future__ import annotations

import csv
import hashlib
import json
from collections import Counter, OrderedDict
from dataclasses import dataclass, field
from functools import lru_cache
from importlib import resources
from pathlib import Path
from typing import Any, Dict, Iterator, List, Mapping, Optional, Sequence, Tuple, Union

import yaml

from capaudit.errors import InputError
from capaudit.io.atomic import StagedFiles, check_output_dir
from capaudit.io.canonical_json import dumps_line

from .answers import index_line
from .questions import Question
from .requests import JudgeBuildParams, build_request

PathLike = Union[str, Path]
FORMATS = ("dsg", "tifa")
REQUESTS, RESPONSES, MANIFEST = "requests.jsonl", "responses.jsonl", "import.json"
INDEX = "requests.index.jsonl"
#: fixed ``started_at`` of imported rows: an import is a pure function of the release
IMPORTED_AT = "1970-01-01T00:00:00+00:00"
MAX_QUESTION_NUMBER = 65535


@lru_cache(maxsize=1)
def release_rules() -> Dict[str, Any]:
    """The reviewed lexicon and category maps (``capaudit/data/release_vqa.yaml``)."""
    text = resources.files("capaudit.data").joinpath("release_vqa.yaml").read_text(encoding="utf-8")
    return yaml.safe_load(text)


@lru_cache(maxsize=1)
def _answer_lookup() -> Dict[str, str]:
    out: Dict[str, str] = {}
    for label, spellings in release_rules()["answers"].items():
        for s in spellings:
            out[str(s)] = str(label)
    return out


def normalise_answer(raw: Optional[str]) -> Tuple[str, str]:
    """``(answer, status)``: ``status`` is ``ok`` for a lexicon answer, else ``missing`` (no answer
    row), ``empty`` or ``unrecognised`` — and the answer is then ``uncertain``."""
    if raw is None:
        return "uncertain", "missing"
    key = raw.strip().lower().rstrip(".!?").strip()
    if not key:
        return "uncertain", "empty"
    label = _answer_lookup().get(key)
    return (label, "ok") if label else ("uncertain", "unrecognised")


def dsg_category(broad: str, detailed: str) -> str:
    """capaudit category of a DSG ``(category_broad, category_detailed)``."""
    table = release_rules()["dsg_categories"]
    for key in (f"{broad}/{detailed}", f"{broad}/*"):
        if key in table:
            return str(table[key])
    raise InputError(f"DSG category {broad!r}/{detailed!r} has no capaudit category in release_vqa.yaml")


def tifa_category(element_type: str) -> str:
    """capaudit category of a TIFA ``element_type``."""
    table = release_rules()["tifa_categories"]
    if element_type not in table:
        raise InputError(f"TIFA element type {element_type!r} has no capaudit category in release_vqa.yaml")
    return str(table[element_type])


@dataclass
class ReleaseQuestion:
    """One question of one image: the release's number, text, category, parents and answer."""

    number: int
    text: str
    release_category: str
    category: str
    parents: Tuple[int, ...] = ()
    raw_answer: Optional[str] = None  # None: no answer row
    #: tokens of the dependency cell that are not numbers (DSG: ``"5, right"`` → ``("right",)``)
    malformed: Tuple[str, ...] = ()
    extra: Dict[str, Any] = field(default_factory=dict)
    source_row: Optional[int] = None
    #: the reader's own yes/no for a recognised answer (TIFA: the VQA answer equals the key); None:
    #: normalise ``raw_answer`` (:func:`normalise_answer`)
    judged: Optional[str] = None


@dataclass
class ReleaseImage:
    """One generated image: its group (text-to-image model), item id and questions."""

    group: str
    item_id: str
    split: str = ""
    questions: List[ReleaseQuestion] = field(default_factory=list)
    answered: bool = True


# --- readers -------------------------------------------------------------------------------------
def _csv_rows(path: Path, required: Sequence[str]) -> Iterator[Tuple[int, Dict[str, str]]]:
    """``(row number, row)`` of a CSV file (row 2 is the first data row), checked for columns."""
    if not path.is_file():
        raise InputError("file not found", path=path)
    try:
        with open(path, newline="", encoding="utf-8-sig") as fh:
            reader = csv.DictReader(fh)
            cols = reader.fieldnames or []
            missing = [c for c in required if c not in cols]
            if missing:
                raise InputError(f"missing column(s) {missing}; has {cols}", path=path, line=1)
            for row in reader:
                if None in row or any(v is None for v in row.values()):
                    raise InputError(f"row has {len(cols)} columns expected, a different count found",
                                     path=path, line=reader.line_num)
                yield reader.line_num, row
    except UnicodeDecodeError as e:
        raise InputError(f"not UTF-8 text ({e.reason})", path=path) from None
    except csv.Error as e:
        raise InputError(f"unreadable CSV ({e})", path=path) from None


def _number(value: str, path: Path, line: int, column: str) -> int:
    try:
        n = int(value.strip())
    except ValueError:
        raise InputError(f"expected a whole number, got {value!r}", path=path, line=line, field=column) from None
    if not 0 <= n <= MAX_QUESTION_NUMBER:
        raise InputError(f"{n} is outside 0..{MAX_QUESTION_NUMBER}", path=path, line=line, field=column)
    return n


def _parents(value: str, path: Path, line: int, column: str) -> Tuple[Tuple[int, ...], Tuple[str, ...]]:
    """``(parent numbers, malformed tokens)`` of a dependency cell (``"1,2"``; ``0`` = none). DSG's
    file has cells such as ``"5, right"``: the numbers are kept, the rest returned to be counted."""
    parts = [p.strip() for p in value.split(",") if p.strip()]
    if not parts:
        raise InputError("empty dependency (DSG writes 0 for none)", path=path, line=line, field=column)
    numbers = [p for p in parts if p.isdigit()]
    bad = tuple(p for p in parts if not p.isdigit())
    if not numbers:
        raise InputError(f"no parent number in {value!r} (DSG writes 0 for none)", path=path, line=line, field=column)
    return tuple(sorted({n for n in (_number(p, path, line, column) for p in numbers) if n != 0})), bad


@dataclass
class DsgQuestion:
    text: str
    broad: str
    detailed: str
    parents: Tuple[int, ...]
    malformed: Tuple[str, ...] = ()


def read_dsg_questions(path: Path) -> "OrderedDict[str, OrderedDict[int, DsgQuestion]]":
    """DSG questions file: item id → proposition id → question (file order)."""
    out: "OrderedDict[str, OrderedDict[int, DsgQuestion]]" = OrderedDict()
    cols = ("item_id", "proposition_id", "dependency", "category_broad", "category_detailed",
            "question_natural_language")
    for line, row in _csv_rows(path, cols):
        item = row["item_id"].strip()
        if not item:
            raise InputError("empty item id", path=path, line=line, field="item_id")
        pid = _number(row["proposition_id"], path, line, "proposition_id")
        qs = out.setdefault(item, OrderedDict())
        if pid in qs:
            raise InputError(f"item {item!r} repeats proposition {pid}", path=path, line=line, field="proposition_id")
        parents, bad = _parents(row["dependency"], path, line, "dependency")
        qs[pid] = DsgQuestion(row["question_natural_language"], row["category_broad"].strip(),
                              row["category_detailed"].strip(), parents, bad)
    if not out:
        raise InputError("no question rows", path=path)
    return out


def _split_of(item_id: str) -> str:
    return item_id.rsplit("_", 1)[0]


def read_dsg_answers(answers: Path, questions: Optional[Path] = None) -> Tuple[List[ReleaseImage], Dict[str, Any]]:
    """Images of a DSG answers CSV (module docstring) and what the reader counted."""
    qfile = read_dsg_questions(questions) if questions else None
    images: "OrderedDict[Tuple[str, str], ReleaseImage]" = OrderedDict()
    counts: Counter = Counter()
    has_qid: Optional[bool] = None
    for line, row in _csv_rows(answers, ("t2i_model", "item_id", "question", "answer")):
        if has_qid is None:
            has_qid = "question_id" in row
        group, item = row["t2i_model"].strip(), row["item_id"].strip()
        for col in ("answer", "question"):
            if "\x00" in row[col]:
                raise InputError("holds a NUL byte (a damaged or binary file?)", path=answers, line=line, field=col)
        if not group:
            raise InputError("empty text-to-image model", path=answers, line=line, field="t2i_model")
        if not item:
            raise InputError("empty item id", path=answers, line=line, field="item_id")
        img = images.get((group, item))
        if img is None:
            img = images[(group, item)] = ReleaseImage(group, item, row.get("dsg_prompt_split", "").strip())
        number = (_number(row["question_id"], answers, line, "question_id") if has_qid
                  else len(img.questions) + 1)
        if not has_qid and any(q.text == row["question"] for q in img.questions):
            counts["repeated_question_text"] += 1  # kept as its own question, as DSG's row numbering does
        if any(q.number == number for q in img.questions):
            raise InputError(f"image ({group}, {item}) repeats question {number}", path=answers, line=line,
                             field="question_id" if has_qid else "question")
        parents: Tuple[int, ...] = ()
        bad: Tuple[str, ...] = ()
        if "dependency_id" in row:
            parents, bad = _parents(row["dependency_id"], answers, line, "dependency_id")
        broad = detailed = ""
        known = qfile.get(item, {}).get(number) if qfile is not None and has_qid else None
        if known is not None:
            broad, detailed = known.broad, known.detailed
            if "dependency_id" in row and parents != known.parents:
                counts["dependency_differs_from_questions_file"] += 1
            parents, bad = known.parents, known.malformed
            category = dsg_category(broad, detailed)
        else:
            if qfile is not None and has_qid:
                counts["not_in_questions_file"] += 1
            counts["uncategorised"] += 1
            category = str(release_rules()["uncategorised"])
        img.questions.append(ReleaseQuestion(number, row["question"], f"{broad}/{detailed}" if broad else "",
                                             category, parents, row["answer"], bad, source_row=line))
        if bad:
            counts["malformed_dependency_cells"] += 1
    if not images:
        raise InputError("no answer rows", path=answers)
    if qfile is not None:
        items = {item for _, item in images}
        if not items & set(qfile):
            ours, theirs = sorted(items), list(qfile)
            raise InputError(f"no answered item is in the questions file {questions} ({len(ours)} answered items, "
                             f"e.g. {ours[0]!r}; {len(theirs)} question items, e.g. {theirs[0]!r}): a file of another "
                             "split?", path=answers, field="item_id")
        if has_qid:
            _add_missing(images, qfile, counts)
        if items - set(qfile):
            counts["answered_items_not_in_questions_file"] = len(items - set(qfile))
    for img in images.values():  # a dependency on a proposition the image does not have is counted
        numbers = {q.number for q in img.questions}
        unknown = sum(1 for q in img.questions for parent in q.parents if parent not in numbers)
        if unknown:
            counts["unknown_parent_ids"] += unknown
    return list(images.values()), dict(counts)


def _add_missing(images: "OrderedDict[Tuple[str, str], ReleaseImage]", qfile: Mapping[str, Mapping[int, DsgQuestion]],
                 counts: Counter) -> None:
    """Questions of the questions file an answered image lacks (answer ``missing``), and the images
    of each group's splits that have no answer row at all (requests without a response)."""
    for img in images.values():
        have = {q.number for q in img.questions}
        for pid, q in qfile.get(img.item_id, {}).items():
            if pid not in have:
                counts["missing_questions"] += 1
                img.questions.append(ReleaseQuestion(pid, q.text, f"{q.broad}/{q.detailed}",
                                                     dsg_category(q.broad, q.detailed), q.parents, None,
                                                     q.malformed))
        img.questions.sort(key=lambda q: q.number)
    splits: Dict[str, set] = {}
    for (group, item) in images:
        splits.setdefault(group, set()).add(_split_of(item))
    for group, covered in splits.items():
        for item, qs in qfile.items():
            if _split_of(item) in covered and (group, item) not in images:
                counts["missing_images"] += 1
                images[(group, item)] = ReleaseImage(group, item, _split_of(item), [
                    ReleaseQuestion(pid, q.text, f"{q.broad}/{q.detailed}", dsg_category(q.broad, q.detailed),
                                    q.parents, None, q.malformed) for pid, q in qs.items()], answered=False)


def read_tifa_results(path: Path, group: str) -> Tuple[List[ReleaseImage], Dict[str, Any]]:
    """Images of a TIFA evaluation-result JSON (module docstring)."""
    if not path.is_file():
        raise InputError("file not found", path=path)
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, ValueError) as e:
        raise InputError(f"not a JSON file ({e})", path=path) from None
    details = data.get("question_details") if isinstance(data, dict) else None
    if not isinstance(details, dict) or not details:
        raise InputError("expected a TIFA result object with a non-empty 'question_details'", path=path,
                         field="question_details")
    images: List[ReleaseImage] = []
    counts: Counter = Counter()
    for text_id, qs in details.items():
        if not isinstance(qs, dict) or not qs:
            raise InputError(f"text {text_id!r}: expected an object of questions", path=path,
                             field=f"question_details.{text_id}")
        img = ReleaseImage(group, str(text_id))
        for n, (question, d) in enumerate(qs.items(), 1):
            where = f"question_details.{text_id}.{question}"
            if not isinstance(d, dict):
                raise InputError("expected an object", path=path, field=where)
            for key in ("choices", "answer", "element_type", "multiple_choice_vqa"):
                if key not in d:
                    raise InputError(f"missing {key!r}", path=path, field=where)
            mc, key, choices = d["multiple_choice_vqa"], d["answer"], d["choices"]
            if not isinstance(choices, list) or not choices or not all(isinstance(c, str) for c in choices):
                raise InputError("'choices' must be a non-empty list of strings", path=path, field=where)
            if not isinstance(key, str) or key not in choices:
                raise InputError(f"answer key {key!r} is not one of the choices", path=path, field=where)
            # the VQA answer verbatim; the judgement (TIFA's score) only for a real answer
            raw = mc if isinstance(mc, str) or mc is None else json.dumps(mc)
            judged = ("yes" if mc == key else "no") if isinstance(mc, str) and mc.strip() else None
            extra = {"choices": choices, "answer_key": key, "multiple_choice_vqa": mc,
                     "free_form_vqa": d.get("free_form_vqa"), "element": d.get("element")}
            if judged and isinstance(d.get("scores"), (int, float)) and float(d["scores"]) != float(mc == key):
                counts["scores_differ_from_key"] += 1
            img.questions.append(ReleaseQuestion(n, str(question), str(d["element_type"]),
                                                 tifa_category(str(d["element_type"])), (), raw, (), extra,
                                                 judged=judged))
        images.append(img)
    return images, dict(counts)


# --- writer ----------------------------------------------------------------------------------------
def _qid(item_id: str, number: int) -> str:
    return f"{item_id}:u{number:04d}"


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


@dataclass
class ImportResult:
    """What an import wrote and counted (the manifest, ``import.json``)."""

    manifest: Dict[str, Any]
    out: Path


def import_release(fmt: str, answers: PathLike, judge: str, out: PathLike, *, questions: Optional[PathLike] = None,
                   group: str = "tifa") -> ImportResult:
    """Read a release (``fmt`` in :data:`FORMATS`) and write the judge store folder ``out``."""
    if fmt not in FORMATS:
        raise InputError(f"--format {fmt!r}: expected one of {list(FORMATS)}", field="--format")
    if not judge.strip():
        raise InputError("--judge must name the VQA model", field="--judge")
    answers, out_dir = Path(answers), check_output_dir(out)
    qpath = Path(questions) if questions else None
    if fmt == "dsg":
        images, counts = read_dsg_answers(answers, qpath)
    else:
        if qpath is not None:
            raise InputError("--questions is for --format dsg (TIFA's results carry their questions)",
                             field="--questions")
        images, counts = read_tifa_results(answers, group)
    source = {"format": fmt, "answers": {"path": str(answers), "sha256": _sha256(answers)},
              "questions": {"path": str(qpath), "sha256": _sha256(qpath)} if qpath else None}
    _refuse_other_import(out_dir, source, judge)
    params = JudgeBuildParams(model=judge, image_mode="url")
    status: Counter = Counter()
    labels: Counter = Counter()
    unrecognised: Counter = Counter()
    groups: "OrderedDict[str, Dict[str, int]]" = OrderedDict()
    with StagedFiles(out_dir) as staged:
        nbytes = 0
        with open(staged.path(REQUESTS), "wb") as rq, open(staged.path(RESPONSES), "wb") as rs, \
                open(staged.path(INDEX), "wb") as ix:
            for img in images:
                g = groups.setdefault(img.group, {"images": 0, "answered": 0, "questions": 0})
                g["images"] += 1
                g["questions"] += len(img.questions)
                row = _request(img, params, fmt)
                line = dumps_line(row)
                rq.write(line)
                nbytes += len(line)
                ix.write(index_line(row["request_id"], img.item_id, img.group, [q.category for q in img.questions],
                                    [q.number for q in img.questions]))
                if img.answered:
                    g["answered"] += 1
                    results = []
                    for q in img.questions:
                        ans, st = (q.judged, "ok") if q.judged else normalise_answer(q.raw_answer)
                        status[st] += 1
                        labels[ans] += 1
                        if st in ("empty", "unrecognised"):
                            unrecognised[q.raw_answer] += 1
                        results.append({"question_id": _qid(img.item_id, q.number), "answer": ans,
                                        "confidence": 1.0 if st == "ok" else 0.0, "raw_answer": q.raw_answer,
                                        "answer_status": st, **({"release": q.extra} if q.extra else {})})
                    rs.write(dumps_line(_response(row, img, results, judge)))
            ix.write(dumps_line({"bytes": nbytes}))
        manifest = {
            "judge": judge, "source": source, "group_option": group if fmt == "tifa" else None,
            "images": len(images), "answered_images": sum(1 for i in images if i.answered),
            "missing_images": [{"group": i.group, "item_id": i.item_id} for i in images if not i.answered],
            "questions": sum(len(i.questions) for i in images),
            "answers": dict(sorted(labels.items())), "answer_status": dict(sorted(status.items())),
            "not_yes_no_uncertain": [{"raw_answer": k, "count": v} for k, v in unrecognised.most_common()],
            "groups": groups, "reader": counts,
            "normalisation": "stripped, lower-cased, trailing .!? removed, looked up in capaudit/data/release_vqa.yaml",
            "confidence": "the release gives none: 1 for a recognised answer, 0 for one normalised to uncertain",
        }
        with open(staged.path(MANIFEST), "w", encoding="utf-8") as fh:
            fh.write(json.dumps(manifest, indent=2, ensure_ascii=False) + "\n")
        staged.commit()
    return ImportResult(manifest, out_dir)


def _refuse_other_import(out_dir: Path, source: Mapping[str, Any], judge: str) -> None:
    """A folder holding any file but a previous import of the same release by the same judge is refused."""
    if not out_dir.exists():
        return
    present = sorted(p.name for p in out_dir.iterdir() if not p.name.startswith("."))
    if not present:
        return
    man = out_dir / MANIFEST
    try:
        old = json.loads(man.read_text(encoding="utf-8")) if man.is_file() else None
    except ValueError:
        old = None
    if not old or old.get("source") != json.loads(json.dumps(source)) or old.get("judge") != judge:
        raise InputError(f"output folder is not empty ({', '.join(present[:5])}) and holds no import of this "
                         f"release by judge {judge!r}; give a new folder", path=out_dir)


def _request(img: ReleaseImage, params: JudgeBuildParams, fmt: str) -> Dict[str, Any]:
    qs = [Question(_qid(img.item_id, q.number), q.category, q.text, q.text, "", "", q.number) for q in img.questions]
    url = f"urn:capaudit:release:{fmt}:{img.group}:{img.item_id}"
    meta = {"release": {"format": fmt, "group": img.group, "item_id": img.item_id, "split": img.split,
                        "answered": img.answered},
            "release_categories": [q.release_category for q in img.questions],
            "parents": [list(q.parents) for q in img.questions],
            "malformed_dependency": [list(q.malformed) for q in img.questions],
            "source_rows": [q.source_row for q in img.questions],
            "image_path": None}
    return build_request(img.item_id, img.group, qs, url, url, params, meta=meta)


def _response(request: Mapping[str, Any], img: ReleaseImage, results: List[Dict[str, Any]],
              judge: str) -> Dict[str, Any]:
    parsed = {"caption_id": img.item_id, "question_results": results}
    return {"request_id": request["request_id"], "ok": True, "status": "imported", "attempts": 0,
            "started_at": IMPORTED_AT, "elapsed_sec": 0.0, "model": judge, "usage": None,
            "response_text": json.dumps(parsed, ensure_ascii=False), "parsed": parsed, "error": None,
            "error_kind": None, "imported": True}


def store_paths(store: PathLike) -> Tuple[Path, Path]:
    """``(requests, responses)`` of an import folder, refused (one line) when they are not there."""
    d = Path(store)
    if not d.is_dir():
        raise InputError("not a judge store folder (expected requests.jsonl and responses.jsonl, "
                         "as 'capaudit judges import' writes)", path=d)
    rq, rs = d / REQUESTS, d / RESPONSES
    for p in (rq, rs):
        if not p.is_file():
            raise InputError(f"store folder has no {p.name}", path=d)
    return rq, rs


__all__ = ["FORMATS", "ReleaseImage", "ReleaseQuestion", "ImportResult", "import_release", "normalise_answer",
           "dsg_category", "tifa_category", "read_dsg_answers", "read_dsg_questions", "read_tifa_results",
           "release_rules", "store_paths"]
