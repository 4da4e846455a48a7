"""run_filters / run_coverage on a small params file: artifacts, tables, numbers fragments (issue 14)."""

from __future__ import annotations

import json

import pandas as pd
import yaml

from capaudit.summaries.numbers_fragments import macro_word as letters
from capaudit.alttext.stage import run_coverage, run_filters
from capaudit.config import load_config
from capaudit.paper.stage_tables import render_stage_tables
from capaudit.summaries.numbers_fragments import read_numbers_fragments


def test_stage_filters_then_coverage(tmp_path):
    params = {
        "run": "t", "out_root": str(tmp_path / "outputs"), "notebooks": [],
        "surfaces": [{"name": "docci_test_docci", "dataset": "imageinwords", "path": "DOCCI_Test/data.jsonl",
                      "format": "jsonl", "caption_field": "DOCCI", "key_field": "image"}],
        "alttext": {
            "filters": {
                "pipelines": ["cc3m", "cc12m"],
                "overrides": {"cc3m": {"rare_words": {"min_count": 1}}, "cc12m": {"rare_words": {"min_count": 1}}},
                "person_labels": "shipped",
                "corpora": [
                    {"name": "alttext_raw", "dataset": "img2dataset_alttext_sample", "path": "test_10000.parquet",
                     "text_field": "TEXT", "url_field": "URL", "max_rows": 300},
                    {"name": "coco_mini", "source": "coco_mini", "text_field": "caption", "max_rows": 60},
                ],
            },
            "coverage": {
                "vocabularies": ["nocaps_ood", "lvis"],
                "corpora": [
                    {"name": "cc3m_val", "dataset": "cc3m_validation", "path": "Validation_GCC-1.1.0-Validation.tsv",
                     "format": "tsv", "header": False, "columns": ["caption", "url"], "text_field": "caption",
                     "url_field": "url", "max_rows": 500},
                    {"surface": "docci_test_docci"},
                ],
                "filtered": ["alttext_raw"],
                "extra_surfaces": [{"name": "missing", "file": str(tmp_path / "nope.jsonl"), "text_field": "caption"}],
                "hypernym_check": ["cc3m_val", "alttext_raw:cc3m"],
                "size_matched": {"n": 2000, "unit": "tokens", "seeds": [0, 1, 2]},
            },
        },
    }
    p = tmp_path / "p.yaml"
    p.write_text(yaml.safe_dump(params))
    cfg = load_config(p)
    out = run_filters(cfg)
    f = out["funnels"]["alttext_raw"]["cc3m"]
    assert f.input_rows == 300 and f.dropped + f.kept == 300
    side = out["side_by_side"]["alttext_raw"]
    assert list(side.columns) == ["rule", "cc3m dropped", "cc3m kept", "cc3m checked", "cc12m dropped", "cc12m kept",
                                  "cc12m checked"]
    assert side.set_index("rule").loc["image_min_side", "cc3m checked"] == "not run"  # URL + text: never 0
    assert side.set_index("rule").loc["image_min_side", "cc3m dropped"] is pd.NA
    assert side.set_index("rule").loc["capitalisation", "cc12m kept"] is pd.NA      # not a CC12M rule
    mini = out["funnels"]["coco_mini"]["cc3m"]
    overlap = next(r for r in mini.rows if r.rule == "image_text_overlap")
    assert overlap.rows_in > 0 and overlap.unchecked == 0                          # COCO-MINI images have tags
    tables = tmp_path / "outputs" / "t" / "tables"
    art = tmp_path / "outputs" / "t" / "artifacts"
    rows = json.loads((art / "tables" / "alttext_funnel_alttext_raw.json").read_text())
    assert rows["meta"]["pipelines"] == ["cc3m", "cc12m"] and rows["stage"] == "alttext_filters"
    changed = "rule parameters changed from the published: cc12m rare_words.min_count=1, cc3m rare_words.min_count=1"
    assert changed in rows["meta"]["note"]  # the funnel tables name what this run changed
    assert "image_min_side, image_aspect_ratio did not run" in rows["meta"]["note"]  # ... and what did not run
    assert rows["inputs"] == ["artifacts/alttext/filters/alttext_raw/cc3m/funnel.csv",
                              "artifacts/alttext/filters/alttext_raw/cc12m/funnel.csv"]
    render_stage_tables(art, tables, run_dir=cfg.out_dir)
    assert (tables / "alttext_funnel.csv").exists()
    side_tex = (tables / "alttext_funnel_alttext_raw.tex").read_text()
    assert "rule & cc3m dropped & cc3m kept & cc3m checked & cc12m dropped & cc12m kept & cc12m checked \\\\" in side_tex
    assert "\nimage\\_min\\_side & -- & -- & not run & -- & -- & not run \\\\" in side_tex
    cap = side_tex.split("\ncapitalisation & ")[1].split("\n")[0]
    assert cap.startswith("$") and cap.endswith("& -- & -- & -- \\\\")  # not a CC12M rule: "--", never 0
    assert pd.read_csv(tables / "alttext_funnel_alttext_raw.csv").columns.tolist() == list(side.columns)
    kept = (art / "alttext" / "filters" / "alttext_raw" / "cc3m" / "kept.jsonl").read_text().splitlines()
    assert len(kept) == f.kept

    cov = run_coverage(cfg)
    render_stage_tables(art, tables, run_dir=cfg.out_dir)
    t = cov["table"]
    assert set(t["corpus"]) == {"cc3m_val", "docci_test_docci", "alttext_raw:cc3m", "alttext_raw:cc12m"}
    assert cov["notes"]["missing"].startswith("skipped")
    row = t[(t.corpus == "cc3m_val") & (t.vocabulary == "nocaps_ood")].iloc[0]
    assert row["records"] == 500 and row["classes"] == 511
    detail = json.loads((art / "alttext" / "coverage" / "cc3m_val__lvis.json").read_text())
    assert set(detail["groups"]) == {"r", "c", "f"} and detail["domains"]["urls"] == 500
    hyp = cov["hypernym_check"].set_index("corpus")
    assert hyp.loc["cc3m_val", "share_with_hypernym"] > 0.15      # CC3M captions are full of hypernyms
    nums = read_numbers_fragments(art)
    assert nums["AlttextNocapsOODClasses"]["value"] == 511
    assert nums["AlttextAlttextRawCcThreemKeptPct"]["format"] == "num:1"
    assert nums["AlttextCcThreemValNocapsMedianPerMillion"]["format"] == "num:1"

    # issue 22: size-dependent figures with their corpus size, and the size-matched comparison
    sz = cov["size_stats"].set_index("corpus")
    assert sz.loc["cc3m_val", "captions"] == 500 and sz.loc["cc3m_val", "matched_n"] == 2000
    assert sz.loc["cc3m_val", "token_type_ratio"] == sz.loc["cc3m_val", "words"] / sz.loc["cc3m_val", "types"]
    assert sz.loc["docci_test_docci", "matched_token_type_ratio_mean"] > 0
    assert pd.isna(sz.loc["alttext_raw:cc3m", "matched_token_type_ratio_mean"])
    assert "< n = 2000" in sz.loc["alttext_raw:cc3m", "note"]
    tex = (tables / "alttext_size_stats.tex").read_text()
    assert "n = 2,000 tokens" in tex and "seeds 0..2" in tex and "grow with corpus size" in tex
    # a corpus smaller than n: no size-matched values, printed "--"
    small = tex.split("\nalttext\\_raw:cc3m & ")[1].split("\n")[0]
    assert small.startswith("$") and small.endswith("& -- & -- & -- & -- \\\\")
    assert pd.read_csv(tables / "alttext_size_stats.csv").columns.tolist() == list(cov["size_stats"].columns)
    assert "grow with corpus size" in (tables / "alttext_coverage.tex").read_text()
    assert "AlttextCcThreemValTokenTypeRatioMatched" in nums
    # issue 22: person substitution scored on the shipped labels, before (ner_only) and chosen filter
    ps = out["person_substitution"]
    chosen = ps[(ps.pipeline == "cc12m") & ps.chosen & (ps.split == "held_out")].iloc[0]
    before = ps[(ps.pipeline == "cc12m") & (ps.name_filter == "ner_only") & (ps.split == "held_out")].iloc[0]
    assert chosen["name_filter"] == "name_shape" and chosen["match_rule"] == "overlap"
    assert chosen["precision"] > before["precision"] and chosen["recall"] >= before["recall"]
    assert "match rule overlap" in (tables / "alttext_person_substitution.tex").read_text()
    assert "AlttextCcOneTwomPersonNameShapePrecision" in nums


def test_letters_only_number_names():
    assert letters("cc3m") == "CcThreem" and letters("raw:cc12m") == "RawCcOneTwom"


def test_size_matched_options_are_checked():
    import pytest

    from capaudit.alttext.params import AlttextParams
    from capaudit.errors import InputError

    for bad, field in (({"unit": "bytes"}, "unit"), ({"n": 0}, "n"), ({"seeds": []}, "seeds"), ({"seeds": [-1]}, "seeds"),
                       ({"size": 1}, "size")):
        with pytest.raises(InputError, match=f"^p.yaml: alttext.coverage.size_matched.{field}"):
            AlttextParams.from_section({"coverage": {"size_matched": bad}}, "p.yaml")
    cp = AlttextParams.from_section({}, "p").coverage
    assert (cp.size_unit, cp.size_seeds, cp.size_n) == ("tokens", tuple(range(10)), None)
    with pytest.raises(InputError, match=r"^p.yaml: alttext.filters.person_match: 'any' is not one of"):
        AlttextParams.from_section({"filters": {"person_match": "any"}}, "p.yaml")
