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
    assert lines[1].startswith("% offline extractor: claims come from capaudit's offline heuristic extractor")
    # types in the manuscript's order (count before style), whatever the rows' order
    assert lines[3] == (r"COCO\_human & $1{,}234$ & $3.46$ & $12.35$ & $0.50$ & $0.51$ & $0.52$ & $0.56$ & $0.53$ & "
                        r"$0.54$ & $0.55$ & $0.57$ \\")
    assert lines[4].startswith("Ours & -- & -- & $12.35$ & ")
    csv = to_csv(table).splitlines()
    assert csv[0].split(",") == list(rows[0]) + ["lexical_cbu_per_cap"]  # every key the stage wrote
    assert csv[2].startswith("ours,Ours,ext,64,,,12.345,") and csv[2].endswith(",2.0")


def test_claims_summary_names_a_model_extractor_without_offline_caveat(tmp_path: Path) -> None:
    p = write_table_rows(tmp_path, "claims_summary", "claims", [_row("A", 1, 1.0)], function="f",
                         meta={"extractor": "Qwen/Qwen3-8B", "budget": 32, "offline_extractor": False})
    tex = to_latex(stage_table(p))
    assert tex.startswith("% claimed CBU at B=32; extractor: Qwen/Qwen3-8B\n% columns: ") and "offline" not in tex
