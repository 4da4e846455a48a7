"""Paper tables beyond the six VQA bodies: cross-corpus headline, lexical-window sensitivity and
policy-control claimed density (reference-spec §4.4, §14 G3, G4, G7).

Each table has a data function (rows as dataclasses; the numbers map reuses them) and a ``*_tex``
function returning the tabular body (rows only, reference formatting of §5.5).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Dict, List, Mapping, Optional, Sequence, Tuple

from ..budgets import DEFAULT_BUDGET
from ..summaries.cells import GEMMA_JUDGE, QWEN_JUDGE, CellsFile
from ..summaries.claimed import ClaimedSummary
from ..summaries.frontier import FrontierRow
from ..summaries.rollups import ClaimedRollupRow
from .fmt import ADDLINESPACE, body, row, tex_arrow, tex_int, tex_num
from .layout import CC12M_FRONTIER, CROSS_CORPUS, PAIRINGS, rollup_key

FRONTIER_BUDGET = DEFAULT_BUDGET


@dataclass(frozen=True)
class HeadlineRow:
    """One paired comparison: ref → ours on claimed CBU/cap and both judges' supported CBU/cap, risk."""

    key: str
    label: str
    claimed_ref: float
    claimed_ours: float
    qwen_sup_ref: float
    qwen_sup_ours: float
    qwen_risk_ref: float
    qwen_risk_ours: float
    gemma_sup_ref: float
    gemma_sup_ours: float
    gemma_risk_ref: float
    gemma_risk_ours: float

    @property
    def claimed_gain(self) -> float:
        return self.claimed_ours - self.claimed_ref


def frontier_at(rows: Sequence[FrontierRow], budget: int = FRONTIER_BUDGET) -> Dict[str, FrontierRow]:
    """Frontier rows of one budget keyed by surface."""
    out = {r.surface: r for r in rows if r.budget == budget}
    if not out:
        raise ValueError(f"frontier table has no rows at budget {budget}")
    return out


def headline_rows(
    cells: CellsFile, rollup: Mapping[str, ClaimedRollupRow], frontier: Sequence[FrontierRow]
) -> List[HeadlineRow]:
    """Cross-corpus rows (claimed CBU/cap from the rollup, G4) then CC12M rows (claimed from the
    budget-64 frontier rows, the 4,494-caption set of the CC12M cells)."""
    f64 = frontier_at(frontier)
    out = []
    for p in PAIRINGS:
        if p in CROSS_CORPUS:
            ko, kr = rollup_key(p.comparison, p.ours_surface), rollup_key(p.comparison, p.ref_surface)
            for k in (ko, kr):
                if k not in rollup:
                    raise ValueError(f"claimed rollup has no row {k!r} (needed for {p.label})")
            c_ours, c_ref = rollup[ko].cbu_cap, rollup[kr].cbu_cap
        else:
            for s in (p.ours_surface, p.ref_surface):
                if s not in f64:
                    raise ValueError(f"frontier table has no budget-{FRONTIER_BUDGET} row for {s!r}")
            c_ours, c_ref = f64[p.ours_surface].cbu_per_cap, f64[p.ref_surface].cbu_per_cap
        q_o, q_r = cells.get(p.slice, QWEN_JUDGE, "Ours").all_types, cells.get(p.slice, QWEN_JUDGE, p.ref_surface_cell).all_types
        g_o, g_r = cells.get(p.slice, GEMMA_JUDGE, "Ours").all_types, cells.get(p.slice, GEMMA_JUDGE, p.ref_surface_cell).all_types
        out.append(
            HeadlineRow(
                key=p.key,
                label=p.label,
                claimed_ref=c_ref,
                claimed_ours=c_ours,
                qwen_sup_ref=q_r.supported_cap,
                qwen_sup_ours=q_o.supported_cap,
                qwen_risk_ref=q_r.risk,
                qwen_risk_ours=q_o.risk,
                gemma_sup_ref=g_r.supported_cap,
                gemma_sup_ours=g_o.supported_cap,
                gemma_risk_ref=g_r.risk,
                gemma_risk_ours=g_o.risk,
            )
        )
    return out


def headline_tex(rows: Sequence[HeadlineRow]) -> str:
    """Body: comparison & claimed & Qwen sup & Qwen risk & Gemma sup & Gemma risk (ref → ours)."""
    lines: List[str] = []
    cross = {p.key for p in CROSS_CORPUS}
    for i, r in enumerate(rows):
        if i and (r.key in cross) != (rows[i - 1].key in cross):
            lines.append(ADDLINESPACE)
        lines.append(
            row(
                [
                    r.label,
                    tex_arrow(r.claimed_ref, r.claimed_ours, 2),
                    tex_arrow(r.qwen_sup_ref, r.qwen_sup_ours, 2),
                    tex_arrow(r.qwen_risk_ref, r.qwen_risk_ours, 3),
                    tex_arrow(r.gemma_sup_ref, r.gemma_sup_ours, 2),
                    tex_arrow(r.gemma_risk_ref, r.gemma_risk_ours, 3),
                ]
            )
        )
    return body(lines)


@dataclass(frozen=True)
class LexicalWindowRow:
    """Whitespace-window (extraction) vs lexical-window claimed density of one CC12M surface (G7)."""

    surface: str
    label: str
    cbu_cap_ws: float
    cbu_cap_lex: float
    cbu100_ws: float
    cbu100_lex: float
    captions_lex: int
    caption_tokens_median_lex: float

    @property
    def cbu_cap_change_pct(self) -> float:
        return 100.0 * (self.cbu_cap_lex - self.cbu_cap_ws) / self.cbu_cap_ws

    @property
    def cbu100_change(self) -> float:
        return self.cbu100_lex - self.cbu100_ws


def lexical_window_rows(frontier: Sequence[FrontierRow], lexical: ClaimedSummary) -> List[LexicalWindowRow]:
    """Pair the budget-64 frontier rows (whitespace window) with the lexical-window summary: the
    reference's four CC12M surfaces, or (another run's frontier) every surface of the file that the
    lexical summary also has."""
    f64 = frontier_at(frontier)
    pairs = list(CC12M_FRONTIER)
    if not any(s in f64 for s, _ in pairs):  # not the reference's CC12M sweep: every surface of the file
        pairs = [(r.surface, r.label) for r in frontier if r.budget == FRONTIER_BUDGET and r.surface in lexical.surfaces]
    out = []
    for surface, label in pairs:
        if surface not in f64:
            raise ValueError(f"frontier table has no budget-{FRONTIER_BUDGET} row for {surface!r}")
        lx = lexical.surface(surface)
        out.append(
            LexicalWindowRow(
                surface=surface,
                label=label,
                cbu_cap_ws=f64[surface].cbu_per_cap,
                cbu_cap_lex=lx.cbu_per_cap,
                cbu100_ws=f64[surface].cbu_per_100tok,
                cbu100_lex=lx.cbu_per_100_lex,
                captions_lex=lx.captions,
                caption_tokens_median_lex=lx.distributions["caption_tokens"].median,
            )
        )
    return out


def ranking(values: Mapping[str, float]) -> List[str]:
    """Keys sorted by value, highest first."""
    return [k for k, _ in sorted(values.items(), key=lambda kv: -kv[1])]


def ranking_unchanged(rows: Sequence[LexicalWindowRow]) -> bool:
    """Same CBU/cap and CBU/100-lex ranking under both windows (G7)."""
    return ranking({r.surface: r.cbu_cap_ws for r in rows}) == ranking({r.surface: r.cbu_cap_lex for r in rows}) and ranking(
        {r.surface: r.cbu100_ws for r in rows}
    ) == ranking({r.surface: r.cbu100_lex for r in rows})


def lexical_window_tex(rows: Sequence[LexicalWindowRow]) -> str:
    """Body: surface & CBU/cap ws → lex & change % & CBU/100 ws → lex & captions & median lex."""
    lines = []
    for r in rows:
        lines.append(
            row(
                [
                    r.label,
                    f"${r.cbu_cap_ws:.2f} \\to {r.cbu_cap_lex:.2f}$",
                    f"${r.cbu_cap_change_pct:+.2f}\\%$",
                    f"${r.cbu100_ws:.2f} \\to {r.cbu100_lex:.2f}$",
                    tex_int(r.captions_lex),
                    tex_num(r.caption_tokens_median_lex, 0),
                ]
            )
        )
    return body(lines)


@dataclass(frozen=True)
class PolicyCbuRow:
    """Claimed density of one captioning policy (G3)."""

    corpus: str
    policy: str
    captions: int
    cbu_cap: float
    cbu100: float
    source: str


def policy_cbu_rows(
    policies: Sequence[Tuple[str, str, ClaimedSummary]],
    frontier: Optional[Sequence[FrontierRow]] = None,
    cc12m_ours_surface: str = "ours_cc12m",
) -> List[PolicyCbuRow]:
    """CC12M Ours from the budget-64 frontier row (if given), then one row per claimed summary.

    Each summary must hold exactly one surface besides ``__all__``; CBU/cap =
    ``claimed_dedup_total / captions``, CBU/100 lex = ``100 · claimed_dedup_total / caption_tokens``.
    """
    out: List[PolicyCbuRow] = []
    if frontier is not None and cc12m_ours_surface in frontier_at(frontier):
        f = frontier_at(frontier)[cc12m_ours_surface]
        out.append(PolicyCbuRow("CC12M", "Ours", f.valid, f.cbu_per_cap, f.cbu_per_100tok, "frontier B64"))
    for corpus, policy, summary in policies:
        s = summary.only_surface
        name = [n for n in summary.surfaces if n != "__all__"][0]
        out.append(PolicyCbuRow(corpus, policy, s.captions, s.cbu_per_cap, s.cbu_per_100_lex, name))
    # Group by corpus, keeping first-seen order.
    order = list(dict.fromkeys(r.corpus for r in out))
    return [r for c in order for r in out if r.corpus == c]


def policy_cbu_tex(rows: Sequence[PolicyCbuRow]) -> str:
    """Body: corpus & policy & captions & CBU/cap & CBU/100 lex."""
    lines: List[str] = []
    prev = None
    for r in rows:
        if prev is not None and r.corpus != prev:
            lines.append(ADDLINESPACE)
        lines.append(
            row([r.corpus if r.corpus != prev else "", r.policy, tex_int(r.captions), tex_num(r.cbu_cap, 2), tex_num(r.cbu100, 2)])
        )
        prev = r.corpus
    return body(lines)
