"""Golden checks against the published reference summaries (reference-spec §14 G1–G8, G12).

Each check returns a :class:`CheckResult`; nothing raises on a mismatch, so
``capaudit paper check-reference`` can report every failure and exit 1.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Dict, List, Mapping, Optional, Sequence, Tuple

from ..summaries.agreement import JudgeAgreement
from ..summaries.cells import QWEN_JUDGE, CellsFile
from ..summaries.claimed import ClaimedSummary
from ..summaries.frontier import FrontierRow, by_budget, pareto_flags
from ..summaries.prompt_support import (
    PromptSupportRow,
    direction_summary,
    format_direction_summary_csv,
    pool_losses,
    pool_wins,
    pool_means_table,
    seven_pool_means,
    PROMPT_MASS,
    JSD,
)
from ..summaries.rollups import ClaimedRollupRow
from ..summaries.vqa import VqaSummary
from .layout import CC12M_FRONTIER, rollup_key
from .tables import lexical_window_rows, ranking_unchanged
from .vqa_tables import all_vqa_tables


@dataclass
class CheckResult:
    """Outcome of one golden check; ``failures`` lists every mismatch found."""

    name: str
    checked: int = 0
    failures: List[str] = field(default_factory=list)
    skipped: Optional[str] = None

    @property
    def passed(self) -> bool:
        return self.skipped is None and not self.failures

    def expect(self, what: str, got: object, want: object, decimals: Optional[int] = None) -> None:
        """Record one comparison: exact, or after rounding both sides to ``decimals``."""
        self.checked += 1
        if decimals is None:
            ok = got == want
        else:
            ok = isinstance(got, (int, float)) and round(float(got), decimals) == round(float(want), decimals)  # type: ignore[arg-type]
        if not ok:
            self.failures.append(f"{what}: got {got!r}, expected {want!r}" + (f" (to {decimals} dp)" if decimals is not None else ""))

    def line(self) -> str:
        if self.skipped:
            return f"SKIP {self.name}: {self.skipped}"
        status = "PASS" if self.passed else "FAIL"
        out = f"{status} {self.name}: {self.checked} comparisons"
        if self.failures:
            out += "".join(f"\n    - {f}" for f in self.failures[:20])
            if len(self.failures) > 20:
                out += f"\n    ... {len(self.failures) - 20} more"
        return out


def check_g1_tables(cells: CellsFile, reference_tables: Path, eligibility=None) -> CheckResult:
    """G1: the six VQA bodies are byte-identical to ``results/tables/*.tex``."""
    r = CheckResult("G1 VQA tables byte-identical")
    for name, text in all_vqa_tables(cells, eligibility).items():
        ref = Path(reference_tables) / name
        if not ref.exists():
            r.failures.append(f"{ref}: reference table missing")
            continue
        r.checked += 1
        want = ref.read_bytes()
        got = text.encode("utf-8")
        if got != want:
            gl, wl = got.decode().splitlines(), want.decode().splitlines()
            first = next((i for i, (a, b) in enumerate(zip(gl, wl)) if a != b), min(len(gl), len(wl)))
            r.failures.append(f"{name}: differs from {ref} at line {first + 1}")
    return r


def check_g2_cells(cells: CellsFile) -> CheckResult:
    """G2: 34 cells, every identity holds (validated on read), worked examples."""
    r = CheckResult("G2 cell arithmetic")
    r.expect("number of cells", len(cells.cells), 34)
    cells.validate()
    r.checked += len(cells.cells)
    dq = cells.get("DataComp", QWEN_JUDGE, "Ours").all_types
    r.expect("DataComp Qwen Ours yes/responses", (dq.yes, dq.responses), (65489, 4771))
    r.expect("DataComp Qwen Ours supported_cap", dq.supported_cap, 13.7265, 4)
    r.expect("DataComp Qwen Ours no/questions", (dq.no, dq.questions), (2407, 68933))
    r.expect("DataComp Qwen Ours risk", dq.risk, 0.03492, 5)
    r.expect("DataComp Qwen Ours supported_cap_std", dq.supported_cap_std, 0.053975, 6)
    r.expect("DataComp Qwen Ours risk_std", dq.risk_std, 0.0010155, 7)
    dr = cells.get("Danbooru", QWEN_JUDGE, "Ref").all_types
    r.expect("Danbooru Qwen Ref yes/responses", (dr.yes, dr.responses), (31702, 4969))
    r.expect("Danbooru Qwen Ref no/questions", (dr.no, dr.questions), (8861, 40755))
    r.expect("Danbooru Qwen Ref supported_cap", dr.supported_cap, 6.3800, 4)
    r.expect("Danbooru Qwen Ref risk", dr.risk, 0.21742, 5)
    ag = cells.cc12m_judge_agreement["__all__"]
    r.expect("CC12M agreement exact/joined", (ag.exact, ag.joined), (185718, 201065))
    return r


#: G3 expected (captions, dedup, lex, CBU/cap, CBU/100 lex) per (corpus, policy).
G3_EXPECTED: Dict[Tuple[str, str], Tuple[int, int, int, float, float]] = {
    ("CC12M", "Naive (greedy)"): (4494, 51363, 294345, 11.4292, 17.4499),
    ("CC12M", "Naive"): (4458, 50449, 292315, 11.3165, 17.2584),
    ("DataComp", "Naive (greedy)"): (4645, 50349, 304584, 10.8394, 16.5304),
    ("DataComp", "Naive"): (4645, 50848, 305120, 10.9468, 16.6649),
    ("DataComp", "Ours"): (4689, 68468, 307974, 14.6018, 22.2317),
}


def check_g3_claimed(policies: Sequence[Tuple[str, str, ClaimedSummary]], frontier: Optional[Sequence[FrontierRow]]) -> CheckResult:
    """G3: CBU/cap = dedup/captions and CBU/100 lex = 100·dedup/lex of the claimed summaries."""
    r = CheckResult("G3 claimed CBU/cap and CBU/100 lex")
    seen = set()
    for corpus, policy, summary in policies:
        key = (corpus, policy)
        s = summary.only_surface
        if key not in G3_EXPECTED:
            r.failures.append(f"{key}: no golden values")
            continue
        seen.add(key)
        cap, dedup, lex, cbu, cbu100 = G3_EXPECTED[key]
        r.expect(f"{key} captions", s.captions, cap)
        r.expect(f"{key} dedup", s.claimed_dedup_total, dedup)
        r.expect(f"{key} lex", s.caption_tokens, lex)
        r.expect(f"{key} CBU/cap", s.cbu_per_cap, cbu, 4)
        r.expect(f"{key} CBU/100 lex", s.cbu_per_100_lex, cbu100, 4)
        if key == ("CC12M", "Naive (greedy)"):
            d = s.distributions
            r.expect(f"{key} claimed_dedup median/p25/p75", (d["claimed_dedup"].median, d["claimed_dedup"].p25, d["claimed_dedup"].p75), (11.0, 9.0, 13.0))
            r.expect(f"{key} claimed_dedup trimmed mean", d["claimed_dedup"].trimmed_mean, 11.3846, 4)
            r.expect(f"{key} caption_tokens median", d["caption_tokens"].median, 65.0)
    for key in G3_EXPECTED:
        if key not in seen:
            r.failures.append(f"{key}: claimed summary not among paper.inputs.policy_control_claimed")
    if frontier is not None:
        f = {x.surface: x for x in frontier if x.budget == 64}["ours_cc12m"]
        r.expect("CC12M Ours B64 valid", f.valid, 4470)
        r.expect("CC12M Ours B64 CBU/cap", f.cbu_per_cap, 15.21, 2)
        r.expect("CC12M Ours B64 CBU/100 lex", f.cbu_per_100tok, 23.16, 2)
    return r


G4_EXPECTED: Dict[Tuple[str, str], Tuple[float, float]] = {
    ("datacomp_recap_llava15_paired_url", "ours_datacomp_forward"): (14.45, 21.99),
    ("datacomp_recap_llava15_paired_url", "ref_datacomp_recap_llava15_llama3_8b"): (10.44, 22.07),
    ("laion_pop_llama32_paired", "ours_laion_pop"): (14.82, 22.52),
    ("laion_pop_llama32_paired", "ref_laion_pop_llama32_11b"): (11.91, 18.40),
    ("pd12m_full_paired", "ours_pd12m_img2dataset"): (15.02, 22.86),
    ("pd12m_full_paired", "ref_pd12m_full"): (9.78, 24.89),
    ("danbooru2023_florence2_paired", "ours_danbooru2023"): (14.33, 21.98),
    ("danbooru2023_florence2_paired", "ref_danbooru_florence2"): (8.18, 19.26),
    ("cc12m_qwen3vl8b_paired", "ref_cc12m_qwen3vl8b"): (6.49, 55.98),
}


def check_g4_rollup(rollup: Mapping[str, ClaimedRollupRow]) -> CheckResult:
    """G4: cross-corpus claimed density and the +2.91 … +6.14 gains."""
    r = CheckResult("G4 cross-corpus claimed density")
    for (cmp_, surf), (cap, c100) in G4_EXPECTED.items():
        k = rollup_key(cmp_, surf)
        if k not in rollup:
            r.failures.append(f"{k}: missing from rollup")
            continue
        r.expect(f"{k} cbu_cap", rollup[k].cbu_cap, cap, 2)
        r.expect(f"{k} cbu_100tok", rollup[k].cbu_100tok, c100, 2)
    lp = rollup[rollup_key("laion_pop_llama32_paired", "ours_laion_pop")].cbu_cap - rollup[rollup_key("laion_pop_llama32_paired", "ref_laion_pop_llama32_11b")].cbu_cap
    db = rollup[rollup_key("danbooru2023_florence2_paired", "ours_danbooru2023")].cbu_cap - rollup[rollup_key("danbooru2023_florence2_paired", "ref_danbooru_florence2")].cbu_cap
    r.expect("LAION-pop claimed gain", lp, 2.91, 2)
    r.expect("Danbooru claimed gain", db, 6.14, 2)
    return r


def check_g5_judges(cells: CellsFile, summaries: Sequence[Tuple[Mapping[str, str], VqaSummary]]) -> CheckResult:
    """G5: per-judge summaries equal their cells (counts and per-type counts)."""
    r = CheckResult("G5 judge summaries equal cells")
    if not summaries:
        r.skipped = "no paper.inputs.judge_summaries"
        return r
    for entry, summ in summaries:
        cell = cells.get(entry["slice"], entry["judge"], entry["surface"])
        s = summ.only_surface
        label = f"{Path(str(entry['file'])).parent.name}/{Path(str(entry['file'])).name}"
        r.expect(f"{label} responses", s.responses, cell.all_types.responses)
        for a in ("questions", "yes", "no", "uncertain"):
            r.expect(f"{label} {a}", getattr(s.counts, a), getattr(cell.all_types, a))
        for t, tc in cell.by_type.items():
            if t in summ.categories:
                c = summ.categories[t]
                r.expect(f"{label} {t} yes/no/uncertain", (c.yes, c.no, c.uncertain), (tc.yes, tc.no, tc.uncertain))
    return r


def check_g6_frontier(frontier: Sequence[FrontierRow], cells: Optional[CellsFile]) -> CheckResult:
    """G6: Pareto flags recomputed, B64 values, ``bad_json`` and Σ invalid."""
    r = CheckResult("G6 budget frontier")
    want_flags = {16: [0, 0, 1, 0], 32: [1, 0, 1, 0], 48: [1, 0, 1, 0], 64: [1, 0, 1, 0]}
    order = [s for s, _ in CC12M_FRONTIER]
    flags = dict(zip([(x.budget, x.surface) for x in frontier], pareto_flags(frontier)))
    for b, want in want_flags.items():
        r.expect(f"B{b} Pareto flags (recomputed)", [flags.get((b, s)) for s in order], want)
        r.expect(f"B{b} Pareto flags (stored)", [x.pareto_efficiency_yield for s in order for x in frontier if x.budget == b and x.surface == s], want)
    b64 = {x.surface: x for x in frontier if x.budget == 64}
    for s, cap, c100 in (("ours_cc12m", 15.21, 23.16), ("ref_cc12m_llavanext", 10.78, 21.77), ("ref_cc12m_qwen3vl8b", 6.44, 55.84), ("ref_pixelprose_cc12m", 12.57, 20.44)):
        r.expect(f"B64 {s} cbu_per_cap", b64[s].cbu_per_cap, cap, 2)
        r.expect(f"B64 {s} cbu_per_100tok", b64[s].cbu_per_100tok, c100, 2)
    r.expect("bad_json per budget", [rows[0].bad_json for _, rows in by_budget(frontier).items()], [5, 30, 55, 99])
    if cells is not None and cells.cc12m_extraction:
        r.expect("B64 bad_json = sum of cc12m_extraction invalid", b64["ours_cc12m"].bad_json, sum(e.invalid for e in cells.cc12m_extraction.values()))
    return r


def check_g7_lexical(frontier: Sequence[FrontierRow], lexical: ClaimedSummary) -> CheckResult:
    """G7: whitespace → lexical window CBU/cap and CBU/100 lex, ranking unchanged, median 64."""
    r = CheckResult("G7 lexical-window sensitivity")
    rows = {x.surface: x for x in lexical_window_rows(frontier, lexical)}
    o = rows["ours_cc12m"]
    r.expect("ours CBU/cap ws", o.cbu_cap_ws, 15.2148, 4)
    r.expect("ours CBU/cap lex", o.cbu_cap_lex, 14.7474, 4)
    r.expect("ours change %", o.cbu_cap_change_pct, -3.07, 2)
    r.expect("ours CBU/100 ws", o.cbu100_ws, 23.157, 3)
    r.expect("ours CBU/100 lex", o.cbu100_lex, 23.043, 3)
    l = rows["ref_cc12m_llavanext"]
    r.expect("LLaVA CBU/cap ws -> lex", (round(l.cbu_cap_ws, 4), round(l.cbu_cap_lex, 4)), (10.7809, 10.6725))
    r.expect("LLaVA CBU/100 ws -> lex", (round(l.cbu100_ws, 3), round(l.cbu100_lex, 3)), (21.773, 21.631))
    r.expect("max |CBU/100 change| (LLaVA)", max(abs(x.cbu100_change) for x in rows.values()), abs(l.cbu100_change))
    r.expect("max |CBU/100 change|", max(abs(x.cbu100_change) for x in rows.values()), 0.14, 2)
    q = rows["ref_cc12m_qwen3vl8b"]
    r.expect("Qwen3-VL CBU/cap ws -> lex", (round(q.cbu_cap_ws, 4), round(q.cbu_cap_lex, 4)), (6.4371, 6.4323))
    p = rows["ref_pixelprose_cc12m"]
    r.expect("PixelProse CBU/cap ws -> lex", (round(p.cbu_cap_ws, 4), round(p.cbu_cap_lex, 4)), (12.5706, 12.4404))
    r.expect("ranking unchanged", ranking_unchanged(list(rows.values())), True)
    for s in ("ours_cc12m", "ref_cc12m_llavanext", "ref_pixelprose_cc12m"):
        r.expect(f"{s} lexical caption_tokens median", rows[s].caption_tokens_median_lex, 64.0)
    return r


G8_WINS = {
    "datacomp_recap_llava15_paired_url": 6,
    "laion_pop_llama32_paired": 5,
    "pd12m_full_paired": 7,
    "danbooru2023_florence2_paired": 7,
    "cc12m_llavanext_paired": 6,
    "cc12m_pixelprose_paired": 6,
    "cc12m_qwen3vl8b_paired": 7,
}
G8_MEANS = {  # comparison: (mass local, mass ref, jsd local, jsd ref)
    "datacomp_recap_llava15_paired_url": (0.5938, 0.4674, 0.4654, 0.4795),
    "laion_pop_llama32_paired": (0.5909, 0.5788, 0.4562, 0.4465),
    "pd12m_full_paired": (0.5622, 0.3206, 0.4702, 0.5156),
    "danbooru2023_florence2_paired": (0.4899, 0.2736, 0.4964, 0.5477),
}


def check_g8_prompt_support(rows: Sequence[PromptSupportRow], direction_csv: Optional[Path]) -> CheckResult:
    """G8: direction summary recomputed exactly; pool-wins; seven-pool means."""
    r = CheckResult("G8 prompt-pool support")
    if direction_csv is not None:
        r.checked += 1
        if format_direction_summary_csv(direction_summary(rows)) != Path(direction_csv).read_text(encoding="utf-8"):
            r.failures.append(f"{direction_csv}: recomputed direction summary differs")
    wins = pool_wins(rows)
    for cmp_, n in G8_WINS.items():
        r.expect(f"pool-wins {cmp_}", wins.get(cmp_), n)
    losses = pool_losses(rows)
    r.expect("LAION-pop losing pools", losses.get("laion_pop_llama32_paired"), ["flux_prompts_regpeter", "sdxl_refiner_prompts_falah"])
    table = pool_means_table(seven_pool_means(rows))
    for cmp_, (ml, mr, jl, jr) in G8_MEANS.items():
        got = table.get(cmp_, {})
        r.expect(f"{cmp_} mass local/ref", tuple(round(v, 4) for v in got.get(PROMPT_MASS, ())), (ml, mr))
        r.expect(f"{cmp_} JSD local/ref", tuple(round(v, 4) for v in got.get(JSD, ())), (jl, jr))
    return r


def check_g12_agreement(data: Mapping[str, JudgeAgreement]) -> CheckResult:
    """G12: judge–human agreement file schema and published values."""
    r = CheckResult("G12 judge-human agreement")
    q, g = data["qwen"], data["gemma"]
    r.expect("qwen overall estimate", q.overall.estimate, 0.84825, 5)
    r.expect("qwen bootstrap mean", q.overall.bootstrap_mean, 0.84862, 5)
    r.expect("qwen bootstrap std", q.overall.bootstrap_std, 0.09688, 5)
    r.expect("qwen records/clusters/resamples/seed", (q.overall.n_records, q.overall.n_clusters, q.overall.n_resamples, q.overall.seed), (57, 57, 10000, 1477))
    r.expect("qwen ours", (round(q.group("ours").estimate, 5), q.group("ours").n_records), (0.87890, 26))
    r.expect("qwen reference", (round(q.group("reference").estimate, 5), q.group("reference").n_records), (0.82535, 31))
    r.expect("gemma overall estimate/std", (round(g.overall.estimate, 5), round(g.overall.bootstrap_std, 5)), (0.84233, 0.09730))
    r.expect("gemma ours/reference", (round(g.group("ours").estimate, 5), round(g.group("reference").estimate, 5)), (0.89006, 0.80667))
    return r
