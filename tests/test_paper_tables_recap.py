"""The recap stage's summary table through the paper's table model."""

from __future__ import annotations

from pathlib import Path

from capaudit.paper.render import to_csv, to_latex
from capaudit.paper.stage_tables import stage_table
from capaudit.summaries.table_rows import write_table_rows

CAPTIONER = "capaudit-offline-coco-captioner (offline, composed from COCO annotations)"


def _row(policy: str, captioned: int, failed: int, words, lex, median, distinct) -> dict:
    return {"surface": f"recap_coco_{policy}", "policy": policy, "policy_version": "1", "prompt_version": "abc",
            "model": "capaudit-offline-coco-captioner", "backend": CAPTIONER, "images": captioned + failed,
            "captioned": captioned, "failed": failed, "mean_words": words, "mean_lex": lex, "median_lex": median,
            "distinct_caption_rate": distinct, "asked_this_run": 0, "answered_earlier": captioned}


def test_recap_summary_tex_columns_notes_and_missing(tmp_path: Path) -> None:
    rows = [_row("photorealistic", 1200, 3, 41.26, 45.5, 44.0, 0.9987), _row("naive", 0, 1203, None, None, None, None)]
    p = write_table_rows(tmp_path, "recap_summary", "recap", rows, function="capaudit.recap.summary_rows.summary_row",
                         meta={"captioners": [CAPTIONER], "offline_captioner": True})
    table = stage_table(p)
    lines = to_latex(table).splitlines()
    assert lines[0] == f"% recaptioned surfaces; captioner: {CAPTIONER}"
    assert lines[1].startswith("% heuristic captioner: ")
    assert lines[2] == ("% columns: Surface & Policy & Captioned & Failed & Mean words & Mean lex & Median lex & "
                        "Distinct")
    assert lines[3] == r"recap\_coco\_photorealistic & photorealistic & $1{,}200$ & $3$ & $41.3$ & $45.5$ & $44$ & $1.00$ \\"
    # a policy without captions has no length or distinctness: "--", never 0
    assert lines[4] == r"recap\_coco\_naive & naive & $0$ & $1{,}203$ & -- & -- & -- & -- \\"
    csv = to_csv(table).splitlines()
    assert csv[0].split(",") == list(rows[0]) and csv[2].endswith(",0,1203,,,,,0,0")


def test_recap_summary_model_captioner_has_no_caveat(tmp_path: Path) -> None:
    row = {**_row("naive", 2, 0, 9.0, 10.0, 10.0, 1.0), "model": "Qwen/Qwen2.5-VL-7B", "backend": "Qwen/Qwen2.5-VL-7B"}
    p = write_table_rows(tmp_path, "recap_summary", "recap", [row], function="f",
                         meta={"captioners": ["Qwen/Qwen2.5-VL-7B"], "offline_captioner": False})
    tex = to_latex(stage_table(p))
    assert tex.startswith("% recaptioned surfaces; captioner: Qwen/Qwen2.5-VL-7B\n% columns:")
