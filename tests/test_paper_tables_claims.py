"""Claims-stage tables through the paper's table model: columns, notes, missing values."""

from __future__ import annotations

from pathlib import Path

from capaudit.paper.render import to_csv, to_latex
from capaudit.paper.stage_tables import stage_table
from capaudit.summaries.table_rows import write_table_rows

TYPES = ("object", "attribute", "relation", "style", "camera", "lighting", "count", "text_rendering")


def _row(label: str, captions, cap) -> dict:
    row = {"surface": label.lower(), "label": label, "extractor": "ext", "budget": 64, "captions": captions,
           "cbu_per_cap": cap, "cbu_per_100_lex": 12.345, "lex_median": 30.0, "dup_row_rate": 0.0}
    row.update({f"{t}_per_cap": 0.5 + i / 100 for i, t in enumerate(TYPES)})
    return row


def test_claims_summary_tex_columns_notes_and_missing(tmp_path: Path) -> None:
    rows = [_row("COCO_human", 1234, 3.456), {**_row("Ours", None, None), "lexical_cbu_per_cap": 2.0}]
    p = write_table_rows(tmp_path, "claims_summary", "claims", rows, function="capaudit.claims.summary_rows.summary_rows",
                         meta={"extractor": "capaudit-heuristic-extractor (heuristic baseline)", "budget": 64,
                               "offline_extractor": True})
    table = stage_table(p, run_dir=tmp_path)
    assert table.latex == "rows" and len(table.columns) == 12
    lines = to_latex(table).splitlines()
    assert lines[0] == "% claimed CBU at B=64; extractor: capaudit-heuristic-extractor (heuristic baseline)"
    # rows that say nothing about a bootstrap (no per-caption data): one line says why, no interval
    assert lines[1] == ("% no intervals: these rows come from a claims summary without per-caption data, so there "
                        "is nothing to bootstrap")
    assert lines[2].startswith("% offline extractor: claims come from capaudit's offline heuristic extractor")
    # types in the manuscript's order (count before style), whatever the rows' order
    assert lines[4] == (r"COCO\_human & $1{,}234$ & $3.46$ & $12.35$ & $0.50$ & $0.51$ & $0.52$ & $0.56$ & $0.53$ & "
                        r"$0.54$ & $0.55$ & $0.57$ \\")
    assert lines[5].startswith("Ours & -- & -- & $12.35$ & ")
    assert "[" not in "".join(lines[4:])
    csv = to_csv(table).splitlines()
    assert csv[0].split(",") == list(rows[0]) + ["lexical_cbu_per_cap"]  # every key the stage wrote
    assert csv[2].startswith("ours,Ours,ext,64,,,12.345,") and csv[2].endswith(",2.0")


def test_claims_summary_names_a_model_extractor_without_offline_caveat(tmp_path: Path) -> None:
    p = write_table_rows(tmp_path, "claims_summary", "claims", [_row("A", 1, 1.0)], function="f",
                         meta={"extractor": "Qwen/Qwen3-8B", "budget": 32, "offline_extractor": False})
    tex = to_latex(stage_table(p))
    assert tex.startswith("% claimed CBU at B=32; extractor: Qwen/Qwen3-8B\n% no intervals: ") and "offline" not in tex
    assert tex.splitlines()[2].startswith("% columns: ")


BOOT = {"method": "percentile", "level": 0.95, "quantiles": [0.025, 0.975], "reps": 2000, "seed": 0}


def _with_ci(row: dict, lo: float, hi: float) -> dict:
    out = {**row, "cbu_per_cap_lower": lo, "cbu_per_cap_upper": hi,
           "cbu_per_100_lex_lower": 12.0, "cbu_per_100_lex_upper": 12.5}
    for t in TYPES:
        out[f"{t}_per_cap_lower"], out[f"{t}_per_cap_upper"] = 0.4, 0.6
    return out


def test_claims_summary_intervals_bracket_in_tex_and_lower_upper_columns_in_csv(tmp_path: Path) -> None:
    rows = [_with_ci(_row("A", 400, 11.4292), 11.30, 11.5655), _row("B", 1, 2.0)]
    p = write_table_rows(tmp_path, "claims_summary", "claims", rows, function="f",
                         meta={"extractor": "ext", "budget": 64, "offline_extractor": False, "bootstrap": BOOT})
    table = stage_table(p)
    lines = to_latex(table).splitlines()
    assert lines[1] == ("% [lo, hi]: 95% caption-level percentile bootstrap intervals of CBU/cap and CBU/100 lex "
                        "(2,000 reps, seed 0; CBU/100 lex as a ratio of sums per replicate); per-type intervals in "
                        "the CSV; no interval for B (no answered captions)")
    assert lines[3].startswith(r"A & $400$ & $11.43$ {\scriptsize [11.30, 11.57]} & $12.35$ {\scriptsize [12.00, 12.50]} & "
                               r"$0.50$ & ")
    assert lines[4].startswith(r"B & $1$ & $2.00$ & $12.35$ & ")  # no interval: the estimate alone
    csv = to_csv(table).splitlines()
    head = csv[0].split(",")
    assert head[:len(rows[1])] == list(rows[1])  # the existing columns first, as before
    for k in ("cbu_per_cap", "cbu_per_100_lex", *(f"{t}_per_cap" for t in TYPES)):
        assert f"{k}_lower" in head and f"{k}_upper" in head
    a = dict(zip(head, csv[1].split(",")))
    assert (a["cbu_per_cap"], a["cbu_per_cap_lower"], a["cbu_per_cap_upper"]) == ("11.4292", "11.3", "11.5655")
    assert dict(zip(head, csv[2].split(",")))["cbu_per_cap_lower"] == ""  # missing, never 0


def test_claims_summary_bootstrap_off_says_so(tmp_path: Path) -> None:
    p = write_table_rows(tmp_path, "claims_summary", "claims", [_row("A", 3, 1.0)], function="f",
                         meta={"extractor": "ext", "budget": 64, "offline_extractor": False,
                               "bootstrap": {"reps": 0, "seed": 0, "off": "bootstrap_reps is 0: no intervals computed"}})
    lines = to_latex(stage_table(p)).splitlines()
    assert lines[1] == "% no intervals: caption bootstrap off (bootstrap_reps is 0: no intervals computed)"
    assert "[" not in lines[3]
