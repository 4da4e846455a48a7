"""One table model for every table the paper and the HTML report show.

A stage writes the rows of a table it computed (``summaries.table_rows``); the paper layer turns
them into a :class:`Table` (columns with labels, units and one number format per quantity, notes,
caveats and provenance) and renders it as CSV, LaTeX and HTML with the formatters of
``paper.render``. The model itself holds no formatting.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

#: number formats: text (escaped), int (thousands separator), num (fixed decimals), pm (mean ± std,
#: the std from ``std_key``), pct (a rate printed as a percentage), signed (``+1.23``), count_of
#: (``k/n`` from ``std_key`` as the denominator), ci (an estimate and its interval ``[lo, hi]`` from
#: ``lo_key``/``hi_key``, the interval printed small in LaTeX)
KINDS = ("text", "int", "num", "pm", "pct", "signed", "count_of", "sci", "ci")

#: caveats that travel with the data: a table carrying one is shown with its explanation
CAVEATS: Dict[str, str] = {
    "offline judges": "answers come from capaudit's offline heuristic judges, not from vision-language models",
    "offline extractor": "claims come from capaudit's offline heuristic extractor, not from a language model",
    "offline backends": "scores come from capaudit's offline backends (heuristics or tiny random-init models)",
    "simulated annotators": "human labels are SIMULATED annotators, not people",
    "things-only ICR": "ICR is grounded on COCO instance masks: the 80 thing classes only, not stuff",
    "random-init encoder": "the encoder is a tiny random-init model: numbers test the pipeline, not CLIP",
    "heuristic captioner": "captions come from capaudit's offline heuristic captioner",
    "published answers": "answers are the judges' published releases, imported",
    "random-vision test model": ("answers come from a random-vision test model (real language weights, random vision "
                                 "weights): they exercise the protocol and are not evidence about the images"),
    "unknown model": "who answered is unknown: the server declared no model card (the run's *.models.json says so)",
}

#: the caveat a heuristic stand-in gives a table, by what it stands in for
HEURISTIC_CAVEAT = {"judges": "offline judges", "extractor": "offline extractor", "captioner": "heuristic captioner"}


@dataclass(frozen=True)
class Column:
    """One column: ``key`` in the rows, a plain-text ``label`` (``tex_label`` when LaTeX needs math)."""

    key: str
    label: str
    kind: str = "text"
    decimals: int = 2
    unit: str = ""
    std_key: Optional[str] = None
    mark_key: Optional[str] = None
    group: bool = False
    tex_label: Optional[str] = None
    lo_key: Optional[str] = None
    hi_key: Optional[str] = None

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"column {self.key!r}: kind {self.kind!r} is not one of {', '.join(KINDS)}")
        if self.kind in ("pm", "count_of") and not self.std_key:
            raise ValueError(f"column {self.key!r}: kind {self.kind!r} needs std_key")
        if self.kind == "ci" and not (self.lo_key and self.hi_key):
            raise ValueError(f"column {self.key!r}: kind 'ci' needs lo_key and hi_key")

    @property
    def numeric(self) -> bool:
        return self.kind != "text"


@dataclass(frozen=True)
class Provenance:
    """Where a table's numbers come from: paper element → file → notebook → function → input."""

    element: str
    files: Tuple[str, ...]
    notebook: str
    function: str
    inputs: Tuple[str, ...] = ()


@dataclass
class Table:
    """A table: rows (mappings), the columns shown, notes printed with it, caveats, provenance.

    ``latex`` is ``rows`` (a body read by the manuscript's ``\\tablerows``, with a ``% columns:``
    line) or ``tabular`` (a whole booktabs tabular for ``\\tabfileinput``). ``csv_columns`` are the
    CSV's columns (every row key, in first-seen order, by default).
    """

    id: str
    title: str
    axis: str
    columns: Tuple[Column, ...]
    rows: List[Mapping[str, Any]]
    provenance: Provenance
    notes: Tuple[str, ...] = ()
    footnotes: Tuple[str, ...] = ()
    caveats: Tuple[str, ...] = ()
    latex: str = "rows"
    csv_columns: Optional[Tuple[str, ...]] = None
    columns_line: bool = True
    extra: Dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.latex not in ("rows", "tabular"):
            raise ValueError(f"table {self.id!r}: latex must be 'rows' or 'tabular'")
        unknown = [c for c in self.caveats if c not in CAVEATS]
        if unknown:
            raise ValueError(f"table {self.id!r}: unknown caveat(s) {unknown}; known: {sorted(CAVEATS)}")

    def csv_keys(self) -> List[str]:
        if self.csv_columns is not None:
            return list(self.csv_columns)
        keys: Dict[str, None] = {}
        for r in self.rows:
            for k in r:
                keys.setdefault(k, None)
        return list(keys) or [c.key for c in self.columns]

    def to_json(self) -> Dict[str, Any]:
        """The model as JSON (the report's input): rows as given, columns, notes, caveats, provenance."""
        return {"id": self.id, "title": self.title, "axis": self.axis,
                "columns": [asdict(c) for c in self.columns], "rows": [json_row(r) for r in self.rows],
                "notes": list(self.notes), "footnotes": list(self.footnotes),
                "caveats": {c: CAVEATS[c] for c in self.caveats},
                "provenance": asdict(self.provenance), "latex": self.latex}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> "Table":
        prov = dict(data["provenance"])
        return cls(id=data["id"], title=data["title"], axis=data["axis"],
                   columns=tuple(Column(**c) for c in data["columns"]), rows=list(data["rows"]),
                   provenance=Provenance(**{**prov, "files": tuple(prov["files"]), "inputs": tuple(prov.get("inputs", ()))}),
                   notes=tuple(data.get("notes", ())), footnotes=tuple(data.get("footnotes", ())),
                   caveats=tuple(data.get("caveats", {})), latex=data.get("latex", "rows"))


def json_row(row: Mapping[str, Any]) -> Dict[str, Any]:
    """A row with NaN as None (JSON has no NaN)."""
    return {k: (None if isinstance(v, float) and math.isnan(v) else v) for k, v in row.items()}


def caveats_in(texts: Sequence[str]) -> Tuple[str, ...]:
    """Caveat tags named by backend strings (``offline``, ``heuristic``, ``simulated``, ...)."""
    joined = " ".join(t.lower() for t in texts if t)
    out: List[str] = []
    if "simulated" in joined:
        out.append("simulated annotators")
    if "things-only" in joined:
        out.append("things-only ICR")
    if "random-init" in joined or "random init" in joined:
        out.append("random-init encoder")
    if "heuristic extractor" in joined or "heuristic-extractor" in joined:
        out.append("offline extractor")
    return tuple(out)


def stand_in_caveats(role: str, kinds: Sequence[str], offline: bool = False) -> Tuple[str, ...]:
    """The caveats of a table fed by models of these card ``kinds`` (:mod:`capaudit.llm.cards`) in
    ``role`` (judges, extractor, captioner): a heuristic stand-in, the random-vision test model, a
    model nobody declared. ``offline`` with no kinds (a store recorded before model cards) counts as
    a heuristic."""
    seen = set(kinds) or ({"heuristic"} if offline else set())
    out: List[str] = []
    if "heuristic" in seen:
        out.append(HEURISTIC_CAVEAT[role])
    if "random-vision test model" in seen:
        out.append("random-vision test model")
    if "unknown" in seen:
        out.append("unknown model")
    return tuple(out)


def judge_caveats(meta: Mapping[str, Any]) -> Tuple[str, ...]:
    """The caveats of the judges who answered, judge by judge: the kinds their recorded cards give,
    or a heuristic for an offline judge recorded before model cards existed."""
    offline = set(meta.get("offline_judges") or ())
    kinds = meta.get("judge_kinds") or {}
    seen = {k for name in set(kinds) | offline
            for k in ([k for k in kinds.get(name) or () if k != "real"] or (["heuristic"] if name in offline else []))}
    return stand_in_caveats("judges", sorted(seen))


__all__ = ["CAVEATS", "HEURISTIC_CAVEAT", "judge_caveats", "KINDS", "Column", "Provenance", "Table", "caveats_in", "stand_in_caveats"]
