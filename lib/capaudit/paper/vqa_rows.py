"""Rows of the six VQA tables (reference-spec §5.5) and their LaTeX bodies, shared by the reference
layout (:mod:`.vqa_tables`) and our own runs' layouts (:mod:`.vqa_generic`).

A rows function computes plain values (``None`` where the table prints ``--``); the ``*_tex_rows``
functions print them with ``paper.fmt``; :mod:`.element_models` makes the same rows table models.
"""

from __future__ import annotations

from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

from ..summaries.cells import CellStats
from .fmt import ADDLINESPACE, body, row, tex_arrow, tex_int, tex_num, tex_pct, tex_pm, tex_signed

DASH = "--"


def tex_text(s: str) -> str:
    """Escape a label for a LaTeX table cell."""
    for a, b in (("\\", "\\textbackslash{}"), ("&", "\\&"), ("%", "\\%"), ("#", "\\#"), ("_", "\\_"), ("$", "\\$")):
        s = s.replace(a, b)
    return s


def cell_value(s: Optional[CellStats], attr: str) -> Optional[float]:
    """A cell's ``attr``; ``None`` without the cell or (but for ``responses``) without responses."""
    return None if s is None or (attr != "responses" and s.responses == 0) else getattr(s, attr)


def num_or_dash(v: Optional[float], d: int) -> str:
    return DASH if v is None else tex_num(v, d)


def arrow_or_dash(ref: Optional[float], ours: Optional[float], d: int) -> str:
    return DASH if ref is None or ours is None else tex_arrow(ref, ours, d)


def pm_or_dash(v: Optional[float], std: Optional[float], d: int) -> str:
    return DASH if v is None or std is None else tex_pm(v, std, d)


def group_starts(rows: Sequence[Dict[str, Any]], key: str) -> List[bool]:
    """True where ``rows[i][key]`` differs from the row before (the first row included)."""
    return [i == 0 or r[key] != rows[i - 1][key] for i, r in enumerate(rows)]


def excl_count_relation_tex_rows(rows: Sequence[Dict[str, Any]], label: Callable[[str], str] = tex_text) -> str:
    """Tabular body of :func:`excl_count_relation_rows` (the comparison on its first row only)."""
    starts = group_starts(rows, "comparison")
    return body(row([label(r["comparison"]) if first else "", label(r["judge"]),
                     arrow_or_dash(r["sup_ref"], r["sup_ours"], 2), arrow_or_dash(r["excl_sup_ref"], r["excl_sup_ours"], 2),
                     DASH if r["excl_delta"] is None else tex_signed(r["excl_delta"], 2),
                     arrow_or_dash(r["excl_risk_ref"], r["excl_risk_ours"], 3)]) for r, first in zip(rows, starts))


#: the four pooled groups of ``vqa_by_type`` in column order: (judge A/B, pool)
BY_TYPE_POOLS = (("a", "ours"), ("a", "ref"), ("b", "ours"), ("b", "ref"))


def by_type_row(name: str, pools: Sequence[Optional[Tuple[int, int, int]]], agree: Optional[float]) -> Dict[str, Any]:
    """One type's row: yes/no rates of the four pools (``None`` without questions) and the agreement."""
    out: Dict[str, Any] = {"type": name}
    for (k, pool), counts in zip(BY_TYPE_POOLS, pools):
        y, n, u = counts if counts is not None else (0, 0, 0)
        q = y + n + u
        out[f"yes_{k}_{pool}"] = y / q if q else None
        out[f"no_{k}_{pool}"] = n / q if q else None
    out["agree"] = agree
    return out


def by_type_all_row(agree: Optional[float]) -> Dict[str, Any]:
    """The closing "all types" row: the agreement only."""
    return {"type": "all types", **{f"{m}_{k}_{p}": None for k, p in BY_TYPE_POOLS for m in ("yes", "no")},
            "agree": agree}


def vqa_by_type_tex_rows(rows: Sequence[Dict[str, Any]]) -> str:
    """Tabular body of the by-type rows (the last one is "all types": a rule, then the agreement)."""
    def pct(v: Optional[float]) -> str:
        return DASH if v is None else tex_pct(v)

    lines = [row([r["type"], *(num_or_dash(r[f"{m}_{k}_{p}"], 3) for k, p in BY_TYPE_POOLS for m in ("yes", "no")),
                  pct(r["agree"])]) for r in rows[:-1]]
    lines += ["\\midrule", row([rows[-1]["type"], "\\multicolumn{8}{c}{}", pct(rows[-1]["agree"])])]
    return body(lines)


def mean_std_row(group: str, surface: str, sa: Optional[CellStats], sb: Optional[CellStats]) -> Dict[str, Any]:
    """Supported CBU/cap and risk of judges A and B with their bootstrap stds (``None`` without responses)."""
    out: Dict[str, Any] = {"slice": group, "surface": surface}
    for k, s in (("a", sa), ("b", sb)):
        ok = s is not None and s.responses > 0
        for m, attr in (("sup", "supported_cap"), ("risk", "risk")):
            out[f"{m}_{k}"] = getattr(s, attr) if ok else None
            out[f"{m}_{k}_std"] = getattr(s, attr + "_std") if ok else None
    return out


def vqa_mean_std_tex_rows(rows: Sequence[Dict[str, Any]], label: Callable[[str], str] = tex_text) -> str:
    """Tabular body of mean ± std rows: slices apart by a small space, named on their first row."""
    lines: List[str] = []
    for i, (r, first) in enumerate(zip(rows, group_starts(rows, "slice"))):
        if first and i:
            lines.append(ADDLINESPACE)
        lines.append(row([label(r["slice"]) if first else "", label(r["surface"]),
                          *(pm_or_dash(r[f"{m}_{k}"], r[f"{m}_{k}_std"], d) for k in "ab" for m, d in (("sup", 2), ("risk", 3)))]))
    return body(lines)


def questions_row(slice_: str, surface: str, eligibility: Optional[float], c: CellStats) -> Dict[str, Any]:
    """Judge A's denominators of one surface: responses, questions, questions per response, risk."""
    return {"slice": slice_, "surface": surface, "eligibility": eligibility, "responses": c.responses,
            "questions": c.questions, "q_per_resp": c.questions / c.responses if c.responses else None,
            "risk": cell_value(c, "risk")}


def vqa_questions_tex_rows(rows: Sequence[Dict[str, Any]], label: Callable[[str], str] = tex_text) -> str:
    """Tabular body of the questions rows."""
    return body(row([label(r["slice"]), label(r["surface"]), num_or_dash(r["eligibility"], 2), tex_int(r["responses"]),
                     tex_int(r["questions"]), num_or_dash(r["q_per_resp"], 2), num_or_dash(r["risk"], 3)]) for r in rows)


def denominators_tex_rows(rows: Sequence[Dict[str, Any]], label: Callable[[Dict[str, Any]], str]) -> str:
    """Tabular body of the denominators rows (``label`` prints a row's surface)."""
    def count(v: Optional[int]) -> str:
        return DASH if v is None else tex_int(v)

    return body(row([label(r), *(count(r[k]) for k in ("requests", "valid", "at_cap", "zero_claim")),
                     tex_int(r["judged"]), tex_int(r["questions"]), num_or_dash(r["risk_a"], 3), num_or_dash(r["risk_b"], 3)])
                for r in rows)


def policy_control_tex_rows(rows: Sequence[Dict[str, Any]], label: Callable[[str], str] = tex_text) -> str:
    """Tabular body of policy-control rows: corpora apart by a small space, named on their first row."""
    lines: List[str] = []
    for i, (r, first) in enumerate(zip(rows, group_starts(rows, "corpus"))):
        if first and i:
            lines.append(ADDLINESPACE)
        lines.append(row([label(r["corpus"]) if first else "", label(r["policy"]), tex_int(r["responses"]),
                          tex_int(r["questions"]), num_or_dash(r["sup_a"], 2), num_or_dash(r["risk_a"], 3),
                          num_or_dash(r["sup_b"], 2), num_or_dash(r["risk_b"], 3)]))
    return body(lines)
