"""The yes-bias probe's table: rows from :mod:`capaudit.judges.probe`, rendered by the paper."""

from __future__ import annotations

import json
from pathlib import Path

from capaudit.judges.probe import ProbeRow, probe_numbers, probe_rows, write_probe_rows
from capaudit.paper.numbers import fragment_text
from capaudit.paper.render import to_csv, to_latex
from capaudit.paper.stage_tables import stage_table

LABELS = {"ja": ("annotation judge (offline)", "offline"), "jb": ("refcaption judge (offline)", "offline")}


def _records() -> list:
    out = []
    for i, (ptype, neg_yes) in enumerate([("replace_obj", "yes"), ("replace_obj", "no"), ("swap_att", "no"),
                                          ("swap_att", "no")]):
        out.append({"pair_id": f"p{i}", "perturbation": ptype, "kind": "positive", "answers": {"ja": "yes", "jb": "no"}})
        out.append({"pair_id": f"p{i}", "perturbation": ptype, "kind": "negative_only",
                    "answers": {"ja": neg_yes, "jb": "no"}})
    return out


def test_probe_table_from_rows(tmp_path: Path) -> None:
    rows = probe_rows(["ja", "jb"], _records(), LABELS, reps=50, seed=0, types=["replace_obj", "swap_att"])
    path = write_probe_rows(rows, tmp_path, inputs=["judged_claims.jsonl"])
    data = json.loads(path.read_text())
    assert data["function"] == "capaudit.judges.probe.probe_rows" and data["meta"]["offline_judges"] == ["ja", "jb"]
    table = stage_table(path)
    lines = to_latex(table).splitlines()
    assert lines[0].startswith("% yes-bias probe (SugarCrepe x COCO-MINI): false-yes on negative-only claims")
    assert lines[1].startswith("% offline judges: ")
    assert lines[2] == ("% columns: Judge & Perturbation & Pairs & Neg.-only claims & False yes [95\\% CI] & "
                        "True claims & Yes [95\\% CI]")
    ja_all = next(r for r in rows if r.judge == "ja" and r.perturbation == "all")
    assert lines[3].startswith("annotation judge (offline) & replace obj & $2$ & $2$ & 0.50 [")
    assert lines[5] == (f" & all & $4$ & $4$ & {ja_all.false_yes:.2f} [{ja_all.false_yes_lower:.2f}, "
                        f"{ja_all.false_yes_upper:.2f}] & $4$ & 1.00 [1.00, 1.00] \\\\")
    assert lines[6] == r"\addlinespace[0.2em]" and lines[7].startswith("refcaption judge (offline) & replace obj & ")
    csv = to_csv(table).splitlines()
    assert csv[0] == ("judge,judge_label,backend,perturbation,pairs,negative_only_claims,false_yes,false_yes_lower,"
                      "false_yes_upper,positive_claims,true_yes,true_yes_lower,true_yes_upper,gap")
    assert csv[1].startswith("ja,annotation judge (offline),offline,replace_obj,2,2,0.5,")


def test_probe_table_missing_interval_prints_dashes(tmp_path: Path) -> None:
    row = ProbeRow("m", "a VLM", "model", "all", 3, 4, 0.25, 0.0, 0.5, 9, 0.5, 0.25, 0.75)
    path = write_probe_rows([row], tmp_path)
    data = json.loads(path.read_text())
    data["rows"][0]["false_yes_upper"] = None
    path.write_text(json.dumps(data))
    tex = to_latex(stage_table(path))
    assert r"a VLM & all & $3$ & $4$ & -- & $9$ & 0.50 [0.25, 0.75] \\" in tex and "offline" not in tex


def test_probe_numbers_have_formats() -> None:
    rows = [ProbeRow("ja", "annotation judge (offline)", "offline", "all", 1234, 4, 0.125, 0.0, 0.2, 9, 0.5, 0.3, 0.7)]
    numbers = probe_numbers(rows, ["ja"])
    assert {k: v["format"] for k, v in numbers.items()} == {
        "ProbePairs": "int", "ProbeFalseYesJudgeA": "num:2", "ProbeTrueYesJudgeA": "num:2", "ProbeNegOnlyJudgeA": "int"}
    assert fragment_text(numbers["ProbePairs"]) == "1{,}234" and fragment_text(numbers["ProbeFalseYesJudgeA"]) == "0.12"
