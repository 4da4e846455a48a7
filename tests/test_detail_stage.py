"""The detail stage on COCO-MINI (five human captions per image) plus an extra JSONL surface, and
the figure data of ``capaudit.paper.detail_figures``."""

from __future__ import annotations

import json

import pytest
import yaml

from capaudit.config import load_config
from capaudit.paper.stage_tables import render_stage_tables


@pytest.fixture(scope="module")
def stage_out(tmp_path_factory):
    pytest.importorskip("spacy")
    from capaudit.data.coco import coco_mini
    from capaudit.detail import stage

    tmp = tmp_path_factory.mktemp("detail")
    imgs = list(coco_mini())[:12]
    extra = tmp / "recap.jsonl"
    extra.write_text("".join(json.dumps({"image_id": im.id, "image_path": str(im.path),
                                         "caption": "A photo of a dog next to a person on a bench."}) + "\n"
                             for im in imgs) + json.dumps({"image_id": 0, "image_path": "/nowhere/x.jpg",
                                                           "caption": "A cat."}) + "\n", encoding="utf-8")
    params = tmp / "p.yaml"
    params.write_text(yaml.safe_dump({
        "run": "t", "out_root": str(tmp / "outputs"),
        "detail": {
            "surfaces": [{"name": "coco_human", "source": "coco_mini", "label": "COCO human"},
                         {"name": "recap_test", "path": str(extra), "caption_field": "caption",
                          "image_field": "image_path", "id_field": None},
                         {"name": "absent", "path": "{artifacts}/nothing/here.jsonl", "on_missing": "skip"}],
            "bootstrap": {"n_resamples": 200},
            "selection": {"k": 0.6, "t": 0.4, "seed": 0},
            "subgraphs": {"n_captions": 10},
        }}), encoding="utf-8")
    cfg = load_config(params)
    out = stage.run(cfg)
    dirs = cfg.dirs()
    render_stage_tables(dirs["artifacts"], dirs["tables"], run_dir=cfg.out_dir)
    return cfg, out


def test_stage_surfaces_and_means(stage_out):
    cfg, out = stage_out
    assert out["skipped"] == ["absent"]
    coco = out["scores"]["coco_human"]
    assert len(coco) == 795 and len({r["image_id"] for r in coco}) == 159
    assert sorted({r["caption_index"] for r in coco}) == [0, 1, 2, 3, 4]
    assert all(r["icr"] is not None for r in coco)  # every COCO-MINI image is annotated
    recap = out["scores"]["recap_test"]
    assert [r["id"] for r in recap][:2] == ["recap_test:0", "recap_test:1"]
    assert recap[-1]["icr"] is None and recap[-1]["icr_status"] == "unavailable"
    m = out["means"]["coco_human"]
    assert m["captions"] == 795 and m["images"] == 159 and m["n_icr"] == 795
    est = sum(r["icr"] for r in coco) / 795
    assert m["icr"]["estimate"] == pytest.approx(est) and m["icr"]["lower"] < est < m["icr"]["upper"]
    assert out["means"]["recap_test"]["n_icr"] == 12
    tab = out["surface_table"]
    assert list(tab["surface"]) == ["coco_human", "recap_test"] and "heuristic" in tab["parser"][0]


def test_stage_selection_table_and_exports(stage_out):
    cfg, out = stage_out
    sel = out["selection_table"].set_index("strategy")
    assert sel.loc["full", "selected"] == 795 and sel.loc["itm_cd", "selected"] == 318 and sel.loc["itm_cd", "k"] == 477
    assert sel.loc["itm_icr", "avg_icr"] >= sel.loc["itm_length", "avg_icr"]
    assert sel.loc["length", "avg_length"] == pytest.approx(sel["avg_length"].max())
    assert (sel["itm_scorer"].str.contains("annotation-precision")).all()
    art = out["artifacts"]
    for s in ("itm_cd", "random", "full"):
        assert (art / "selection" / f"{s}.parquet").is_file() and (art / "selection" / f"{s}.wds.json").is_file()
    tables = cfg.dirs()["tables"]
    tex = (tables / "detail_selection.tex").read_text()
    # the paper prints the label as it is (pdflatex sets → as \textrightarrow); numbers in math
    assert "% ITM: annotation-precision" in tex and "\nITM→CD (method) & $318$ & $" in tex
    assert "% columns: strategy & selected & avg things-only ICR & avg AOD & avg length & avg ITM" in tex
    rows = json.loads((cfg.dirs()["artifacts"] / "tables" / "detail_selection.json").read_text())
    assert rows["function"] == "capaudit.detail.selection_report.selection_rows"
    assert rows["inputs"] == ["artifacts/detail/scores_coco_human.jsonl"]
    assert [r["strategy"] for r in rows["rows"]] == list(sel.index)
    assert (tables / "detail_surfaces.csv").is_file() and "heuristic" in (tables / "detail_surfaces.tex").read_text()


def test_stage_subgraphs_numbers_manifest(stage_out):
    cfg, out = stage_out
    sub = out["subgraphs"]
    assert len({r["id"] for r in sub}) == 10 and len(sub) == 10 * 2 * 4
    assert all(abs(r["ratio"] - r["fraction"]) <= 0.05 + 1e-9 for r in sub if r["status"] == "ok")
    nums = json.loads((cfg.dirs()["artifacts"] / "numbers" / "detail.json").read_text())
    assert nums["numbers"]["DetailCocoHumanICR"]["value"] == pytest.approx(out["means"]["coco_human"]["icr"]["estimate"])
    assert "DetailSelItmCdAvgIcr" in nums["numbers"] and "heuristic" in nums["backend"]
    man = json.loads((out["artifacts"] / "stage_manifest.json").read_text())
    assert man["surfaces"] == {"coco_human": 795, "recap_test": 13} and "annotation-precision" in man["backends"]["itm"]


def test_figure_data_and_files(stage_out, tmp_path):
    from capaudit.paper.detail_figures import itm_bin_rows, length_scatter_rows, plot_itm_bins, plot_length_scatter

    cfg, out = stage_out
    pts = length_scatter_rows(out["scores"], out["labels"])
    assert len(pts) == 795 + 13 and pts[0].label == "COCO human"
    bins = itm_bin_rows(out["scores"], bins=4, labels=out["labels"])
    coco_icr = [b for b in bins if b.surface == "coco_human" and b.measure == "icr"]
    n_with_itm = sum(1 for r in out["scores"]["coco_human"] if r["itm"] is not None)
    assert sum(b.n for b in coco_icr) == n_with_itm and len(coco_icr) <= 4
    assert all(b.lo <= b.measure_mean <= b.hi for b in coco_icr)
    fig = plot_length_scatter(pts, tmp_path, {**out["backends"], **out["definitions"]},
                              measure_labels=out["measure_labels"])
    assert [ax.get_ylabel() for ax in fig.axes[::2]] == ["things-only ICR (Eq. 2)", "AOD (Eq. 4; relations: subject)"]
    assert any("things-only ICR" in t.get_text() and "Eq. 3" in t.get_text() for t in fig.texts)  # footer
    fig = plot_itm_bins(bins, tmp_path, out["backends"], measure_labels=out["measure_labels"])
    assert fig.axes[0].get_xlabel() == "things-only ICR (Eq. 2), bin mean"
    for name in ("detail_length_scatter", "detail_itm_bins"):
        for ext in ("pdf", "png", "csv"):
            assert (tmp_path / f"{name}.{ext}").stat().st_size > 0


def test_itm_bins_hand_computed():
    from capaudit.paper.detail_figures import itm_bin_rows

    rows = [{"icr": x, "itm": y, "aod": 1.0} for x, y in [(0.0, 0.2), (0.1, 0.4), (0.2, 0.6), (0.3, 0.8)]]
    b = itm_bin_rows({"s": rows}, bins=2, measures=("icr",))
    assert [(r.n, r.itm_mean) for r in b] == [(2, pytest.approx(0.3)), (2, pytest.approx(0.7))]
    single = itm_bin_rows({"s": rows}, bins=3, measures=("aod",))
    assert len(single) == 1 and single[0].n == 4  # one distinct value: one bin


def test_stage_names_its_definitions(stage_out):
    """Default AOD is Eq. 3 (a relation once, for its subject: Σ D = |A| + |R|); every output names
    it and the ICR (COCO instance masks: things-only ICR)."""
    cfg, out = stage_out
    for r in out["scores"]["coco_human"]:
        assert r["relation_ends"] == "subject" and r["icr_kind"] == "things-only"
        if r["objects"]:
            assert r["aod"] == pytest.approx((r["attributes"] + r["relations"]) / r["objects"])
    assert out["manifest"]["relation_ends"] == "subject" and out["manifest"]["icr"]["name"] == "things-only ICR"
    tables = cfg.dirs()["tables"]
    for stem in ("detail_surfaces", "detail_selection", "detail_subgraphs"):
        tex = (tables / f"{stem}.tex").read_text()
        assert "% ICR = things-only ICR (COCO instance masks: the 80 thing classes only" in tex, stem
        assert "% AOD and CD relation count: subject (Eq. 3: a relation counts once, for its subject)" in tex, stem
    import pandas as pd

    for stem in ("detail_surfaces", "detail_selection"):
        csv = pd.read_csv(tables / f"{stem}.csv")
        assert set(csv["icr_definition"]) == {"things-only ICR"} and set(csv["relation_ends"]) == {"subject"}
    means = json.loads((out["artifacts"] / "surface_means.json").read_text())
    assert means["icr"]["name"] == "things-only ICR" and means["relation_ends"] == "subject"
    nums = json.loads((cfg.dirs()["artifacts"] / "numbers" / "detail.json").read_text())["numbers"]
    assert nums["DetailIcrName"] == {"value": "things-only ICR", "format": "text",
                                     "description": "name of the ICR the grounding gives"}
    assert nums["DetailIcrKind"]["value"] == "things-only" and nums["DetailRelationEnds"]["value"].startswith("subject (Eq. 3")
    assert nums["DetailCocoHumanICR"]["format"] == "num:3" and nums["DetailSelFullAvgLength"]["format"] == "num:1"
    assert "things-only ICR" in nums["DetailCocoHumanICR"]["description"]


def test_stage_relation_ends_both_option(tmp_path):
    """``relation_ends: both`` (edges at a node): Σ D = |A| + 2|R|, and the outputs say so."""
    pytest.importorskip("spacy")
    from capaudit.detail import stage

    caps = tmp_path / "c.jsonl"
    caps.write_text("".join(json.dumps({"id": f"c{i}", "image": f"{i}.jpg", "caption": c}) + "\n" for i, c in enumerate(
        ["A man riding a brown horse.", "A woman holding an umbrella next to a red car.", "A dog."])))
    params = tmp_path / "p.yaml"
    params.write_text(yaml.safe_dump({"run": "t", "out_root": str(tmp_path / "o"), "detail": {
        "grounding": "none", "itm": "none", "relation_ends": "both", "bootstrap": {"n_resamples": 50},
        "surfaces": [{"name": "s", "path": str(caps)}], "selection": {"strategies": ["full"]},
        "subgraphs": {"n_captions": 1, "measures": ["aod"]}}}))
    cfg = load_config(params)
    out = stage.run(cfg)
    render_stage_tables(cfg.dirs()["artifacts"], cfg.dirs()["tables"], run_dir=cfg.out_dir)
    rows = out["scores"]["s"]
    assert any(r["relations"] for r in rows)
    for r in rows:
        assert r["relation_ends"] == "both" and r["icr"] is None and r["icr_kind"] is None
        if r["objects"]:
            assert r["aod"] == pytest.approx((r["attributes"] + 2 * r["relations"]) / r["objects"])
    tex = (cfg.dirs()["tables"] / "detail_surfaces.tex").read_text()
    assert "relation count: both (a relation counts once at each end" in tex
    assert "ICR: not computed (no grounding source)" in tex
    # no grounding: ICR and CD are missing and print "--", never a number
    assert "\ns & $3$ & -- & $" in tex and " & -- & $" in tex.split("& -- &", 1)[1]
