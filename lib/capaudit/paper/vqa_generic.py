"""The VQA paper elements for any run's cells, laid out by ``vqa_layout.json`` (our judges stage).

The reference run keeps its fixed layout (:mod:`.vqa_tables`, :mod:`.tables`, byte-identical to
the published tables); a run with a ``paper.inputs.vqa_layout`` gets the same six table files,
the headline and the policy-control table from these functions, with the same columns, so one
manuscript serves both. Judge columns are the layout's first two judges ("A", "B"; a single
judge fills B with ``--``); "Ours"/"Refs" pool the surfaces whose role is ``ours``/``ref``;
``control`` and ``probe`` surfaces appear in the per-surface tables but in no pool. Every judge
label printed carries the layout's label (offline judges say "offline").
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Dict, List, Optional, Sequence, Tuple

from ..summaries.cells import AGREEMENT_ALL, CellsFile, CellStats, SliceAgreement
from ..summaries.vqa_layout import LayoutJudge, VqaLayout
from .fmt import body, row
from .vqa_rows import (
    arrow_or_dash,
    by_type_all_row,
    by_type_row,
    cell_value,
    denominators_tex_rows,
    excl_count_relation_tex_rows,
    mean_std_row,
    policy_control_tex_rows,
    questions_row,
    tex_text,
    vqa_by_type_tex_rows,
    vqa_mean_std_tex_rows,
    vqa_questions_tex_rows,
)
from .vqa_tables import TABLE_TYPES


def judge_pair(layout: VqaLayout) -> Tuple[LayoutJudge, Optional[LayoutJudge]]:
    """The two judges of the A/B columns (B is ``None`` with a single judge)."""
    return layout.judges[0], (layout.judges[1] if len(layout.judges) > 1 else None)


def _stats(cells: CellsFile, slice_: str, judge: Optional[LayoutJudge], surface: str,
           excl: bool = False) -> Optional[CellStats]:
    if judge is None:
        return None
    try:
        c = cells.get(slice_, judge.name, surface)
    except KeyError:
        return None
    return c.excluding_count_relation if excl else c.all_types


@dataclass(frozen=True)
class ComparisonRow:
    """One ref → ours comparison: claimed CBU/cap and per judge supported CBU/cap and risk."""

    key: str
    label: str
    slice: str
    claimed_ref: Optional[float]
    claimed_ours: Optional[float]
    judges: Tuple[str, ...]
    sup_ref: Tuple[float, ...]
    sup_ours: Tuple[float, ...]
    risk_ref: Tuple[float, ...]
    risk_ours: Tuple[float, ...]
    excl_sup_ref: Tuple[float, ...]
    excl_sup_ours: Tuple[float, ...]
    excl_risk_ref: Tuple[float, ...]
    excl_risk_ours: Tuple[float, ...]


def comparison_rows(cells: CellsFile, layout: VqaLayout) -> List[ComparisonRow]:
    """Rows of the headline / exclusion tables, one per layout comparison."""
    out = []
    for c in layout.comparisons:
        sl = layout.slice(c.slice)
        cr, co = sl.surface(c.ref).claimed, sl.surface(c.ours).claimed
        vals: Dict[str, List[float]] = {k: [] for k in ("sr", "so", "rr", "ro", "esr", "eso", "err", "ero")}
        for j in layout.judges:
            r, o = cells.get(c.slice, j.name, c.ref), cells.get(c.slice, j.name, c.ours)
            vals["sr"].append(r.all_types.supported_cap)
            vals["so"].append(o.all_types.supported_cap)
            vals["rr"].append(r.all_types.risk)
            vals["ro"].append(o.all_types.risk)
            vals["esr"].append(r.excluding_count_relation.supported_cap)
            vals["eso"].append(o.excluding_count_relation.supported_cap)
            vals["err"].append(r.excluding_count_relation.risk)
            vals["ero"].append(o.excluding_count_relation.risk)
        out.append(ComparisonRow(c.key, c.label, c.slice, cr.get("cbu_per_cap") if cr else None,
                                 co.get("cbu_per_cap") if co else None, tuple(j.name for j in layout.judges),
                                 *(tuple(vals[k]) for k in ("sr", "so", "rr", "ro", "esr", "eso", "err", "ero"))))
    return out


def _pair(r: Optional[CellStats], o: Optional[CellStats], attr: str) -> Tuple[Optional[float], Optional[float]]:
    """(ref, ours) values of ``attr``, both ``None`` unless both cells exist and have responses (``--``)."""
    if r is None or o is None or not r.responses or not o.responses:
        return None, None
    return getattr(r, attr), getattr(o, attr)


def headline_table_rows(cells: CellsFile, layout: VqaLayout) -> List[Dict[str, Any]]:
    """Per layout comparison: claimed CBU/cap and, per judge A/B, supported CBU/cap and risk (ref, ours)."""
    a, b = judge_pair(layout)
    out = []
    for c in layout.comparisons:
        sl = layout.slice(c.slice)
        cr, co = sl.surface(c.ref).claimed, sl.surface(c.ours).claimed
        out_row: Dict[str, Any] = {"comparison": c.label, "claimed_ref": cr["cbu_per_cap"] if cr and co else None,
                                   "claimed_ours": co["cbu_per_cap"] if cr and co else None}
        for k, j in (("a", a), ("b", b)):
            r, o = _stats(cells, c.slice, j, c.ref), _stats(cells, c.slice, j, c.ours)
            out_row[f"sup_{k}_ref"], out_row[f"sup_{k}_ours"] = _pair(r, o, "supported_cap")
            out_row[f"risk_{k}_ref"], out_row[f"risk_{k}_ours"] = _pair(r, o, "risk")
        out.append(out_row)
    return out


def headline_tex(cells: CellsFile, layout: VqaLayout) -> str:
    """``headline.tex``: comparison & claimed & A sup & A risk & B sup & B risk (ref → ours)."""
    return body(row([tex_text(r["comparison"]), arrow_or_dash(r["claimed_ref"], r["claimed_ours"], 2),
                     *(arrow_or_dash(r[f"{m}_{k}_ref"], r[f"{m}_{k}_ours"], d)
                       for k in "ab" for m, d in (("sup", 2), ("risk", 3)))])
                for r in headline_table_rows(cells, layout))


def excl_count_relation_rows(cells: CellsFile, layout: VqaLayout) -> List[Dict[str, Any]]:
    """Per comparison × judge: supported CBU/cap with and without count/relation (ref, ours), the
    change of the latter and the risk without count/relation."""
    out = []
    for c in layout.comparisons:
        for j in layout.judges:
            r, o = _stats(cells, c.slice, j, c.ref), _stats(cells, c.slice, j, c.ours)
            re_, oe = _stats(cells, c.slice, j, c.ref, True), _stats(cells, c.slice, j, c.ours, True)
            sup = _pair(r, o, "supported_cap")
            esup = _pair(re_, oe, "supported_cap")
            erisk = _pair(re_, oe, "risk")
            out.append({"comparison": c.label, "judge": j.short, "sup_ref": sup[0], "sup_ours": sup[1],
                        "excl_sup_ref": esup[0], "excl_sup_ours": esup[1],
                        "excl_delta": None if esup[0] is None else esup[1] - esup[0],
                        "excl_risk_ref": erisk[0], "excl_risk_ours": erisk[1]})
    return out


def excl_count_relation_tex(cells: CellsFile, layout: VqaLayout) -> str:
    """``excl_count_relation.tex``: per comparison × judge, ref → ours with/without count and relation."""
    return excl_count_relation_tex_rows(excl_count_relation_rows(cells, layout))


def pooled_types(cells: CellsFile, layout: VqaLayout, judge: str, role: str) -> Dict[str, Tuple[int, int, int]]:
    """Per type (yes, no, uncertain) pooled over the cells of ``judge`` whose surface has ``role``."""
    roles = {(sl.name, s.name): s.role for sl in layout.slices for s in sl.surfaces}
    out: Dict[str, List[int]] = {t: [0, 0, 0] for t, _ in TABLE_TYPES}
    for c in cells.cells:
        if c.judge != judge or roles.get((c.slice, c.surface)) != role:
            continue
        for t, k in c.by_type.items():
            acc = out.setdefault(t, [0, 0, 0])
            acc[0] += k.yes
            acc[1] += k.no
            acc[2] += k.uncertain
    return {t: (v[0], v[1], v[2]) for t, v in out.items()}


def agreement_of(cells: CellsFile, layout: VqaLayout) -> Optional[SliceAgreement]:
    """The judge agreement block of the layout's agreement slice (``None`` without one)."""
    if layout.agreement_slice is None:
        return None
    return cells.judge_agreement.get(layout.agreement_slice)


def vqa_by_type_rows(cells: CellsFile, layout: VqaLayout) -> List[Dict[str, Any]]:
    """Per claim type: yes/no rates of A-Ours, A-Refs, B-Ours, B-Refs and the judges' exact agreement."""
    a, b = judge_pair(layout)
    pools = [pooled_types(cells, layout, j.name, role) if j is not None else None
             for j in (a, b) for role in ("ours", "ref")]
    ag = agreement_of(cells, layout)
    rows = [by_type_row(name, [p[t] if p is not None else None for p in pools],
                        ag.by_type[t].exact_rate if ag is not None and t in ag.by_type else None)
            for t, name in TABLE_TYPES]
    rows.append(by_type_all_row(ag.by_type[AGREEMENT_ALL].exact_rate
                                if ag is not None and AGREEMENT_ALL in ag.by_type else None))
    return rows


def vqa_by_type_tex(cells: CellsFile, layout: VqaLayout) -> str:
    """``vqa_by_type.tex``: yes/no rates per type for A-Ours, A-Refs, B-Ours, B-Refs and the agreement."""
    return vqa_by_type_tex_rows(vqa_by_type_rows(cells, layout))


def vqa_mean_std_rows(cells: CellsFile, layout: VqaLayout) -> List[Dict[str, Any]]:
    """Every (slice, surface): A and B sup/cap and risk, mean ± bootstrap std."""
    a, b = judge_pair(layout)
    return [mean_std_row(sl.name, s.label, _stats(cells, sl.name, a, s.name), _stats(cells, sl.name, b, s.name))
            for sl in layout.slices for s in sl.surfaces]


def vqa_mean_std_tex(cells: CellsFile, layout: VqaLayout) -> str:
    """``vqa_mean_std.tex``: every (slice, surface): A and B sup/cap and risk, mean ± bootstrap std."""
    return vqa_mean_std_tex_rows(vqa_mean_std_rows(cells, layout))


def vqa_questions_rows(cells: CellsFile, layout: VqaLayout) -> List[Dict[str, Any]]:
    """Per (slice, surface) judged by A: B-eligibility and A's denominators."""
    a, _ = judge_pair(layout)
    out = []
    for sl in layout.slices:
        for s in sl.surfaces:
            c = _stats(cells, sl.name, a, s.name)
            if c is not None:
                out.append(questions_row(sl.name, s.label, s.eligibility, c))
    return out


def vqa_questions_tex(cells: CellsFile, layout: VqaLayout) -> str:
    """``vqa_questions.tex``: per (slice, surface) with judge A: B-eligibility, responses, questions,
    questions per response, risk."""
    return vqa_questions_tex_rows(vqa_questions_rows(cells, layout))


def denominators_rows(cells: CellsFile, layout: VqaLayout) -> List[Dict[str, Any]]:
    """The denominators slice's surfaces judged by A: extraction requests, valid, at the token cap,
    zero-claim (``None`` without an extraction record), judged captions, questions, A and B risk."""
    sl_name = layout.denominators_slice or layout.slices[0].name
    sl = layout.slice(sl_name)
    a, b = judge_pair(layout)
    ext = cells.extraction.get(sl_name, {})
    out = []
    for s in sl.surfaces:
        e = ext.get(s.name)
        ca, cb = _stats(cells, sl_name, a, s.name), _stats(cells, sl_name, b, s.name)
        if ca is None:
            continue
        out.append({"surface": s.label, "requests": e.requests if e else None, "valid": e.valid if e else None,
                    "at_cap": e.invalid_at_token_cap if e else None, "zero_claim": e.valid_zero_claims if e else None,
                    "judged": ca.responses, "questions": ca.questions, "risk_a": cell_value(ca, "risk"),
                    "risk_b": cell_value(cb, "risk"), "short_captions": False})
    return out


def denominators_tex(cells: CellsFile, layout: VqaLayout) -> str:
    """``cc12m_denominators.tex`` for the layout's denominators slice: extraction requests, valid, at
    the token cap, zero-claim, judged captions, questions, A risk, B risk."""
    return denominators_tex_rows(denominators_rows(cells, layout), lambda r: tex_text(r["surface"]))


@dataclass(frozen=True)
class PolicyRow:
    corpus: str
    policy: str
    slice: str
    surface: str
    responses: int
    questions: int
    sup: Tuple[Optional[float], Optional[float]]
    risk: Tuple[Optional[float], Optional[float]]

    def flat(self) -> Dict[str, Any]:
        """The row as the policy-control table's columns."""
        return {"corpus": self.corpus, "policy": self.policy, "responses": self.responses, "questions": self.questions,
                "sup_a": self.sup[0], "risk_a": self.risk[0], "sup_b": self.sup[1], "risk_b": self.risk[1],
                "slice": self.slice, "surface": self.surface}


def policy_rows(cells: CellsFile, layout: VqaLayout) -> List[PolicyRow]:
    """Surfaces with a ``policy`` (the recaptioning runner's), grouped by corpus in layout order."""
    a, b = judge_pair(layout)
    out = []
    for sl in layout.slices:
        for s in sl.surfaces:
            if s.policy is None:
                continue
            sa, sb = _stats(cells, sl.name, a, s.name), _stats(cells, sl.name, b, s.name)
            if sa is None:
                continue
            out.append(PolicyRow(s.corpus or sl.name, s.policy, sl.name, s.name, sa.responses, sa.questions,
                                 (sa.supported_cap, sb.supported_cap if sb else None), (sa.risk, sb.risk if sb else None)))
    order = list(dict.fromkeys(r.corpus for r in out))
    return [r for c in order for r in out if r.corpus == c]


def policy_control_tex(rows: Sequence[PolicyRow]) -> str:
    """``policy_control.tex`` rows: corpus & policy & responses & questions & A sup & A risk & B sup & B risk."""
    return policy_control_tex_rows([r.flat() for r in rows])


def provenance_comment(layout: VqaLayout) -> str:
    """A LaTeX comment line naming the judges behind a table (offline ones say they are not VLMs)."""
    names = [f"{k} = {j.name} ({j.label}{'; ' + j.stand_in_note if j.stand_in_note else ''})"
             for k, j in zip("AB", layout.judges)]
    return "% judges: " + "; ".join(names) + "\n"


def all_generic_tables(cells: CellsFile, layout: VqaLayout) -> Dict[str, str]:
    """The six §5.5 file names (same as the reference run) plus ``headline.tex`` and, when some surface
    has a policy, ``policy_control.tex``."""
    out = {
        "cc12m_denominators.tex": denominators_tex(cells, layout),
        "excl_count_relation.tex": excl_count_relation_tex(cells, layout),
        "vqa_by_type.tex": vqa_by_type_tex(cells, layout),
        "vqa_mean_std.tex": vqa_mean_std_tex(cells, layout),
        "vqa_questions.tex": vqa_questions_tex(cells, layout),
    }
    pol = policy_rows(cells, layout)
    if pol:
        out["policy_control.tex"] = policy_control_tex(pol)
    return out


#: Table id → rows function of our own runs' layouts (``policy_control``: :func:`policy_rows`).
GENERIC_ROWS = {
    "cc12m_denominators": denominators_rows,
    "excl_count_relation": excl_count_relation_rows,
    "vqa_by_type": vqa_by_type_rows,
    "vqa_mean_std": vqa_mean_std_rows,
    "vqa_questions": vqa_questions_rows,
}


def all_generic_rows(cells: CellsFile, layout: VqaLayout) -> Dict[str, List[Dict[str, Any]]]:
    """The rows of :func:`all_generic_tables` by table id (``policy_control`` only with a policy surface)."""
    out = {k: fn(cells, layout) for k, fn in GENERIC_ROWS.items()}
    pol = policy_rows(cells, layout)
    if pol:
        out["policy_control"] = [r.flat() for r in pol]
    return out


__all__ = ["GENERIC_ROWS", "all_generic_rows", "headline_table_rows", "excl_count_relation_rows", "vqa_by_type_rows",
           "vqa_mean_std_rows", "vqa_questions_rows", "denominators_rows",
           "ComparisonRow", "comparison_rows", "headline_tex", "excl_count_relation_tex", "vqa_by_type_tex",
           "vqa_mean_std_tex", "vqa_questions_tex", "denominators_tex", "PolicyRow", "policy_rows",
           "policy_control_tex", "all_generic_tables", "provenance_comment", "pooled_types", "agreement_of", "judge_pair", "tex_text"]
