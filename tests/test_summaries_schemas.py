"""Summary schemas: byte-identical round trips of the reference files and clear validation errors."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest

from capaudit.summaries.agreement import format_agreement, read_agreement
from capaudit.summaries.cells import CellStats, format_cells, parse_cells, read_cells
from capaudit.summaries.claimed import (
    ClaimedStatus,
    ClaimedSummary,
    ClaimedSurface,
    Distribution,
    format_claimed_summary,
    parse_claimed_summary,
    read_claimed_summary,
    surface_field_order,
    write_claimed_summary,
)
from capaudit.summaries.frontier import (
    FrontierRow,
    dominates,
    format_frontier_csv,
    pareto_flags,
    read_frontier_csv,
    rows_from_claimed,
    write_frontier_csv,
)
from capaudit.summaries.rollups import format_claimed_rollup_csv, read_claimed_rollup_csv
from capaudit.summaries.vqa import format_vqa_summary, parse_vqa_summary, read_vqa_summary

CLAIMED = [
    "naive_qwen35_cc12m/claimed_cbu_summary.json",
    "naive_qwen35_sampled_cc12m/claimed_cbu_summary.json",
    "naive_qwen35_datacomp/claimed_cbu_summary.json",
    "naive_qwen35_sampled_datacomp/claimed_cbu_summary.json",
    "policy_control_ours_datacomp/claimed_cbu_summary.json",
    "sensitivity/cc12m_lexical_window_claimed_cbu_summary.json",
]
VQA = [
    "naive_qwen35_cc12m/vqa_summary_qwen397.json",
    "naive_qwen35_cc12m/vqa_summary_gemma4_31b_it.json",
    "naive_qwen35_sampled_cc12m/vqa_summary_qwen397.json",
]
FRONTIER = "raw_summaries/cbu_claimed/cc12m_budget_frontier_plot_4494.csv"


@pytest.fixture(scope="module")
def results(reference_dir: Path) -> Path:
    return reference_dir / "results"


# -- claimed -------------------------------------------------------------------------------
@pytest.mark.parametrize("rel", CLAIMED)
def test_claimed_round_trip_byte_identical(results: Path, rel: str, tmp_path: Path) -> None:
    src = results / rel
    summary = read_claimed_summary(src)
    assert format_claimed_summary(summary) == src.read_text(encoding="utf-8")
    out = write_claimed_summary(summary, tmp_path / "x.json")
    assert out.read_bytes() == src.read_bytes()


def test_claimed_values_g3(results: Path) -> None:
    s = read_claimed_summary(results / "naive_qwen35_cc12m/claimed_cbu_summary.json").only_surface
    assert (s.captions, s.claimed_dedup_total, s.caption_tokens) == (4494, 51363, 294345)
    assert s.cbu_per_cap == 51363 / 4494
    assert round(s.cbu_per_100_lex, 4) == 17.4499
    assert s.distributions["claimed_dedup"] == Distribution(11.0, 9.0, 13.0, 11.384593993325918)
    assert s.distributions["caption_tokens"].median == 65.0


def _claimed_obj(results: Path) -> dict:
    return json.loads((results / "naive_qwen35_cc12m/claimed_cbu_summary.json").read_text())


def test_claimed_ratio_mismatch_names_file_and_field(results: Path) -> None:
    obj = _claimed_obj(results)
    obj["surfaces"]["naive_qwen35_cc12m"]["claimed_dedup_per_caption"] = 12.0
    with pytest.raises(ValueError, match=r"x\.json: surfaces\.naive_qwen35_cc12m\.claimed_dedup_per_caption"):
        parse_claimed_summary(obj, "x.json")


def test_claimed_type_sum_and_missing_field(results: Path) -> None:
    obj = _claimed_obj(results)
    obj["surfaces"]["__all__"]["claimed_object"] += 1
    with pytest.raises(ValueError, match=r"surfaces\.__all__\.claimed_total: 51365 != sum"):
        parse_claimed_summary(obj, "f")
    obj = _claimed_obj(results)
    del obj["surfaces"]["__all__"]["caption_tokens_p75"]
    with pytest.raises(ValueError, match=r"caption_tokens_p75: required field is missing"):
        parse_claimed_summary(obj, "f")
    obj = _claimed_obj(results)
    obj["surfaces"]["__all__"]["captions"] = 4494.0
    with pytest.raises(ValueError, match=r"captions: expected an integer"):
        parse_claimed_summary(obj, "f")


def test_claimed_from_counts_builds_a_consistent_block() -> None:
    counts = dict(captions=4, claimed_total=10, claimed_dedup_total=9, duplicate_units=1, suspicious_units=0,
                  caption_tokens=200, rows_with_duplicate=1, rows_with_suspicious=0,
                  claimed_object=6, claimed_attribute=4, claimed_dedup_object=5, claimed_dedup_attribute=4)
    d = Distribution(2, 1, 3, 2)
    s = ClaimedSurface.from_counts(counts, {n: d for n in ("claimed", "claimed_dedup", "claimed_dedup_per_100_tokens", "caption_tokens")})
    assert s.cbu_per_cap == 2.25 and s.cbu_per_100_lex == 4.5
    assert s.ratios["duplicate_row_rate"] == 0.25
    assert s.per_type_dedup_per_caption["object"] == 1.25
    assert list(s.to_dict()) == surface_field_order()
    assert s.to_dict()["claimed_median"] == 2.0 and isinstance(s.to_dict()["claimed_median"], float)
    summary = ClaimedSummary(status=ClaimedStatus(responses=5, captions=4, bad=1), surfaces={"__all__": s, "x": s})
    text = format_claimed_summary(summary)
    assert text.endswith("}\n") and '"mode": "claimed"' in text
    bad = ClaimedSummary(status=ClaimedStatus(responses=5, captions=3, bad=1), surfaces={"__all__": s, "x": s})
    with pytest.raises(ValueError, match="status.captions: 3 != surfaces.__all__.captions 4"):
        format_claimed_summary(bad)


# -- per-judge VQA -------------------------------------------------------------------------
@pytest.mark.parametrize("rel", VQA)
def test_vqa_round_trip_byte_identical(results: Path, rel: str) -> None:
    src = results / rel
    assert format_vqa_summary(read_vqa_summary(src), ensure_ascii=True) == src.read_text(encoding="utf-8")


def test_vqa_values_g5(results: Path) -> None:
    s = read_vqa_summary(results / "naive_qwen35_cc12m/vqa_summary_qwen397.json").only_surface
    assert (s.responses, s.counts.questions, s.counts.yes, s.counts.no, s.counts.uncertain) == (4423, 51365, 49079, 1115, 1171)
    assert round(s.counts.risk_rate, 7) == 0.0217074


def test_vqa_errors_name_the_field(results: Path) -> None:
    obj = json.loads((results / VQA[0]).read_text())
    obj["surfaces"]["naive_qwen35_cc12m"]["no"] += 1
    with pytest.raises(ValueError, match=r"v\.json: surfaces\.naive_qwen35_cc12m\.questions: 51365 != yes"):
        parse_vqa_summary(obj, "v.json")
    obj = json.loads((results / VQA[0]).read_text())
    obj["categories"]["count"]["risk_rate"] = 0.5
    with pytest.raises(ValueError, match=r"categories\.count\.risk_rate"):
        parse_vqa_summary(obj, "v.json")


# -- cells ----------------------------------------------------------------------------------
def test_cells_round_trip_and_g2(results: Path) -> None:
    src = results / "cbu_vqa_by_category_b64.json"
    cells = read_cells(src)
    assert format_cells(cells) == src.read_text(encoding="utf-8")  # no trailing newline
    assert len(cells.cells) == 34
    c = cells.get("DataComp", "Qwen3.5-397B-A17B-FP8", "Ours").all_types
    assert (c.yes, c.responses, c.no, c.questions) == (65489, 4771, 2407, 68933)
    assert round(c.supported_cap, 4) == 13.7265 and round(c.risk, 5) == 0.03492


def _cells_obj(results: Path) -> dict:
    return json.loads((results / "cbu_vqa_by_category_b64.json").read_text())


def test_cells_questions_mismatch_names_the_cell(results: Path) -> None:
    obj = _cells_obj(results)
    obj["cells"][3]["all_types"]["questions"] += 1
    with pytest.raises(ValueError, match=r"c\.json: cells\[3\] \(LAION-pop, Qwen3\.5-397B-A17B-FP8, Ref\)\.all_types\.questions"):
        parse_cells(obj, "c.json")


def test_cells_by_type_and_exclusion_identities(results: Path) -> None:
    obj = _cells_obj(results)
    obj["cells"][0]["by_type"]["count"]["yes"] += 1
    with pytest.raises(ValueError, match=r"by_type: sum of 'yes'"):
        parse_cells(obj, "c.json")
    obj = _cells_obj(results)
    ex = obj["cells"][0]["excluding_count_relation"]
    ex["yes"] += 1
    ex["questions"] += 1
    ex["supported_cap"] = ex["yes"] / ex["responses"]
    ex["risk"] = ex["no"] / ex["questions"]
    ex["uncertain_rate"] = ex["uncertain"] / ex["questions"]
    with pytest.raises(ValueError, match=r"excluding_count_relation\.yes: .* != all_types minus count/relation"):
        parse_cells(obj, "c.json")


def test_cells_intersection_and_duplicates(results: Path) -> None:
    obj = _cells_obj(results)
    for view in ("all_types", "excluding_count_relation"):
        st = obj["cells"][8][view]  # DataComp Gemma Ours
        st["responses"] += 1
        st["supported_cap"] = st["yes"] / st["responses"]
    with pytest.raises(ValueError, match="both-judges intersection"):
        parse_cells(obj, "c.json")
    obj = _cells_obj(results)
    obj["cells"].append(copy.deepcopy(obj["cells"][0]))
    with pytest.raises(ValueError, match=r"cells\[34\]: duplicate cell \(DataComp"):
        parse_cells(obj, "c.json")


def test_cell_stats_from_counts() -> None:
    s = CellStats.from_counts(responses=4, yes=6, no=2, uncertain=2, supported_cap_std=0.1, risk_std=0.01)
    assert (s.questions, s.supported_cap, s.risk, s.uncertain_rate) == (10, 1.5, 0.2, 0.2)


# -- frontier -------------------------------------------------------------------------------
def test_frontier_round_trip_crlf_and_g6(results: Path, tmp_path: Path) -> None:
    src = results / FRONTIER
    rows = read_frontier_csv(src)
    assert format_frontier_csv(rows).encode() == src.read_bytes()
    assert write_frontier_csv(rows, tmp_path / "f.csv").read_bytes() == src.read_bytes()
    flags = {b: [r.pareto_efficiency_yield for r in rows if r.budget == b] for b in (16, 32, 48, 64)}
    assert flags == {16: [0, 0, 1, 0], 32: [1, 0, 1, 0], 48: [1, 0, 1, 0], 64: [1, 0, 1, 0]}
    assert [rows[i].bad_json for i in (0, 4, 8, 12)] == [5, 30, 55, 99]


def test_frontier_wrong_flag_is_rejected(results: Path, tmp_path: Path) -> None:
    text = (results / FRONTIER).read_bytes().decode()
    lines = text.split("\r\n")
    lines[1] = lines[1][:-1] + "1"  # B16 ours: 0 -> 1
    bad = tmp_path / "bad.csv"
    bad.write_bytes("\r\n".join(lines).encode())
    with pytest.raises(ValueError, match=r"budget 16, surface ours_cc12m: pareto_efficiency_yield 1 != 0"):
        read_frontier_csv(bad)
    lines = text.split("\r\n")
    lines[2] = lines[2].replace(",4492,", ",many,")
    bad.write_bytes("\r\n".join(lines).encode())
    with pytest.raises(ValueError, match=r"row 3, column 'valid': expected an integer"):
        read_frontier_csv(bad)


def _row(b: int, s: str, cap: float, lex: float) -> FrontierRow:
    return FrontierRow(b, s, s, 1, 0, cap, lex, 0.0, {t: 0.0 for t in ("object", "attribute", "relation", "style", "camera", "lighting", "count", "text_rendering")})


def test_dominance_rule_hand_cases() -> None:
    a, b, c, d = _row(64, "a", 10, 20), _row(64, "b", 10, 20), _row(64, "c", 9, 20), _row(64, "d", 5, 50)
    assert not dominates(a, b) and not dominates(b, a)  # ties dominate nobody
    assert dominates(a, c) and not dominates(c, a)
    assert pareto_flags([a, b, c, d]) == [1, 1, 0, 1]
    assert pareto_flags([c, _row(32, "e", 1, 1)]) == [1, 1]  # different budgets never compete


def test_rows_from_claimed(results: Path) -> None:
    s = read_claimed_summary(results / "sensitivity/cc12m_lexical_window_claimed_cbu_summary.json")
    rows = rows_from_claimed(64, s, {"ours_cc12m": "Ours", "ref_cc12m_llavanext": "LLaVA-NeXT"})
    assert [r.label for r in rows] == ["Ours", "LLaVA-NeXT"]
    assert rows[0].valid == 4470 and rows[0].bad_json == 86
    assert rows[0].cbu_per_cap == 65921 / 4470


# -- rollup, agreement ----------------------------------------------------------------------
def test_rollup_and_agreement_round_trip(results: Path) -> None:
    src = results / "all_cbu_b64_summary.csv"
    rows = read_claimed_rollup_csv(src)
    assert format_claimed_rollup_csv(rows.values()) == src.read_text()
    assert round(rows["danbooru2023_florence2_paired__ref_danbooru_florence2"].cbu_cap, 2) == 8.18
    src = results / "human_cbu/judge_human_agreement_bootstrap.json"
    ag = read_agreement(src)
    assert format_agreement(ag) == src.read_text()
    assert ag["qwen"].overall.n_records == 57 and ag["gemma"].group("reference").n_records == 31
