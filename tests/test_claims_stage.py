"""Claims stage end to end on a tiny surface: requests → in-process capaudit serve → summaries."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from capaudit.config import load_config
from capaudit.paper.stage_tables import render_stage_tables
from capaudit.summaries.claimed import read_claimed_summary
from capaudit.summaries.frontier import read_frontier_csv

pytest.importorskip("spacy")

CAPTIONS = [
    "A red bus parked next to a tall building on a rainy street, photographed from a low angle at night.",
    "Two dogs play on green grass in front of a wooden fence. Soft morning light. A sign reads \"NO PARKING\".",
    "A bowl of ripe oranges on a marble table.",
    "Close-up photo of a cat.",
]


def _params(tmp_path: Path) -> Path:
    src = tmp_path / "caps.jsonl"
    src.write_text("".join(json.dumps({"id": i, "text": c}) + "\n" for i, c in enumerate(CAPTIONS)))
    src2 = tmp_path / "caps2.jsonl"
    src2.write_text("".join(json.dumps({"id": i, "text": c.split(".")[0]}) + "\n" for i, c in enumerate(CAPTIONS)))
    params = {
        "run": "t", "out_root": str(tmp_path / "outputs"),
        "surfaces": [{"name": "long", "file": str(src), "format": "jsonl", "caption_field": "text", "key_field": "id"},
                     {"name": "short", "file": str(src2), "format": "jsonl", "caption_field": "text", "key_field": "id"}],
        "claims": {"budget": 8, "budgets": [4, 8], "lexical_window": True,
                   "surfaces": ["long", {"name": "short", "sample_records": 3}],
                   "labels": {"long": "Long", "short": "Short"}, "concurrency": 4},
    }
    p = tmp_path / "params.yaml"
    p.write_text(yaml.safe_dump(params))
    return p


def test_stage_end_to_end(tmp_path):
    from capaudit.claims.stage import run

    cfg = load_config(_params(tmp_path))
    out = run(cfg)
    art = Path(out["artifacts"])
    main = read_claimed_summary(art / "claimed_cbu_summary.json")
    assert main.status.to_dict() == {"responses": 7, "captions": 7, "bad": 0}
    assert main.surface("long").captions == 4 and main.surface("short").captions == 3
    raw = json.loads((art / "claimed_cbu_summary.json").read_text())
    assert raw["input"]["backend"] == "capaudit-heuristic-extractor (heuristic baseline)"
    assert main.surface("long").cbu_per_cap > 0
    lex = read_claimed_summary(art / "lexical_window_claimed_cbu_summary.json")
    assert lex.surface("long").distributions["caption_tokens"].median == 8.0  # lexical cut: exactly B units
    frontier = read_frontier_csv(art / "budget_frontier.csv")
    assert [(r.budget, r.surface) for r in frontier] == [(4, "long"), (4, "short"), (8, "long"), (8, "short")]
    assert {r.label for r in frontier} == {"Long", "Short"}
    for w in ("b4", "b8", "lexical_b8"):
        assert (art / w / "requests.manifest.json").exists()
        resp = [json.loads(line) for line in (art / w / "responses.jsonl").read_text().splitlines()]
        assert all(r["ok"] and r["model"] == "capaudit-heuristic-extractor" for r in resp)
    dirs = cfg.dirs()
    rows = json.loads((dirs["artifacts"] / "tables" / "claims_summary.json").read_text())
    assert rows["function"] == "capaudit.claims.summary_rows.summary_rows"
    assert [r["surface"] for r in rows["rows"]] == ["long", "short"]
    render_stage_tables(dirs["artifacts"], dirs["tables"], run_dir=cfg.out_dir)
    tex = (dirs["tables"] / "claims_summary.tex").read_text().splitlines()
    # the note names the text the requests carried, read from the requests
    version = json.loads((art / "b8" / "requests.jsonl").read_text().splitlines()[0])["prompt_version"]
    assert version.startswith("reference:claimed_cbu_v2@")
    assert tex[0] == ("% claimed CBU at B=8; extractor: capaudit-heuristic-extractor (heuristic baseline); "
                      f"prompt: the reference study's own ({version})")
    assert tex[1].startswith("% [lo, hi]: 95% caption-level percentile bootstrap intervals of CBU/cap and CBU/100 lex "
                             "(2,000 reps, seed 0;")
    assert tex[2].startswith("% offline extractor: ")
    assert tex[3] == ("% columns: Surface & Captions & CBU/cap & CBU/100 lex & object & attribute & relation & count & "
                      "style & camera & lighting & text-rendering")
    long_row = rows["rows"][0]
    lo, hi = long_row["cbu_per_cap_lower"], long_row["cbu_per_cap_upper"]
    assert lo <= long_row["cbu_per_cap"] <= hi
    assert tex[4].startswith(f"Long & $4$ & ${long_row['cbu_per_cap']:.2f}$ {{\\scriptsize [{lo:.2f}, {hi:.2f}]}} & "
                             f"${long_row['cbu_per_100_lex']:.2f}$ {{\\scriptsize [")
    assert f"${long_row['object_per_cap']:.2f}$ & " in tex[4]
    assert len(tex) == 6 and all(line.count(" & ") == 11 for line in tex[4:])
    csv_head = (dirs["tables"] / "claims_summary.csv").read_text().splitlines()[0].split(",")
    assert csv_head[:5] == ["surface", "label", "extractor", "budget", "captions"] and "lexical_cbu_per_cap" in csv_head
    assert {"cbu_per_cap_lower", "cbu_per_100_lex_upper", "count_per_cap_lower", "lexical_cbu_per_cap_upper"} <= set(csv_head)
    # the intervals files: one per window, the main and lexical ones copied beside their summaries
    assert rows["meta"]["bootstrap"]["reps"] == 2000 and rows["meta"]["bootstrap"]["seed"] == 0
    ivs = json.loads((art / "claimed_cbu_summary.intervals.json").read_text())
    assert ivs["surfaces"]["long"]["cbu_per_cap"] == {"lower": lo, "upper": hi}
    assert ivs["surfaces"]["short"]["captions"] == 3
    for w in ("b4", "b8", "lexical_b8"):
        assert json.loads((art / w / "claimed_cbu_summary.intervals.json").read_text())["bootstrap"]["reps"] == 2000
    assert (art / "lexical_window_claimed_cbu_summary.intervals.json").is_file()
    assert list(out["table"]["surface"]) == ["long", "short"]
    # a second run resumes: nothing is asked again, numbers identical
    again = run(cfg)
    assert all(s["sent"] == 0 for s in again["manifest"]["run_stats"].values())
    assert again["main"].to_dict()["surfaces"] == main.to_dict()["surfaces"]


def test_stage_bootstrap_off_and_bad_reps(tmp_path):
    from capaudit.claims.stage import run

    params = _params(tmp_path)
    doc = yaml.safe_load(params.read_text())
    doc["claims"]["bootstrap_reps"] = 0
    params.write_text(yaml.safe_dump(doc))
    cfg = load_config(params)
    out = run(cfg)
    art = Path(out["artifacts"])
    assert json.loads((art / "claimed_cbu_summary.intervals.json").read_text())["surfaces"] == {}
    rows = json.loads((cfg.dirs()["artifacts"] / "tables" / "claims_summary.json").read_text())
    assert rows["meta"]["bootstrap"]["reps"] == 0 and "cbu_per_cap_lower" not in rows["rows"][0]
    render_stage_tables(cfg.dirs()["artifacts"], cfg.dirs()["tables"], run_dir=cfg.out_dir)
    tex = (cfg.dirs()["tables"] / "claims_summary.tex").read_text().splitlines()
    assert tex[1] == "% no intervals: caption bootstrap off (bootstrap_reps is 0: no intervals computed)"
    doc["claims"]["bootstrap_reps"] = 1
    params.write_text(yaml.safe_dump(doc))
    with pytest.raises(ValueError, match="claims\\.bootstrap_reps: bootstrap reps must be 0 \\(off\\) or at least 2"):
        run(load_config(params))


def test_rerun_after_an_extractor_revision_change_leaves_old_answers_out(tmp_path, capsys):
    """Answers of another extractor revision stay in the store but never reach the summary."""
    from capaudit.claims.stage import run

    params = _params(tmp_path)
    first = run(load_config(params))
    doc = yaml.safe_load(params.read_text())
    doc["claims"]["revision"] = "another-rule-set"  # as a new EXTRACTOR_VERSION would: new request ids
    params.write_text(yaml.safe_dump(doc))
    capsys.readouterr()
    again = run(load_config(params))
    assert "7 stored answers belong to requests no longer built" in capsys.readouterr().err
    assert again["manifest"]["run_stats"]["b8"]["stale_answers_left_out"] == 7
    assert all(s["sent"] > 0 for s in again["manifest"]["run_stats"].values())
    assert again["main"].status.to_dict() == {"responses": 7, "captions": 7, "bad": 0}
    assert again["main"].to_dict()["surfaces"] == first["main"].to_dict()["surfaces"]
    lines = (Path(again["artifacts"]) / "b8" / "responses.jsonl").read_text().splitlines()
    assert len(lines) == 14  # nothing computed is lost
