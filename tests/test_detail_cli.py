"""``capaudit detail score|select|subgraphs``: the command-line contract, end to end."""

from __future__ import annotations

import json

import pytest

from capaudit.cli import main

from _detail_data import rect, two_image_instances


def write_jsonl(path, rows):
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def read_jsonl(path):
    return [json.loads(x) for x in path.read_text(encoding="utf-8").splitlines()]


@pytest.fixture()
def files(tmp_path):
    inst = two_image_instances(rect(12, 6, 20, 10))
    more = {"images": [{"id": 3, "file_name": "b.jpg", "width": 10, "height": 10}],
            "categories": [{"id": 18, "name": "dog"}],
            "annotations": [{"id": 9, "image_id": 3, "category_id": 18, "iscrowd": 0,
                             "segmentation": rect(0, 0, 5, 5)}]}
    (tmp_path / "inst.json").write_text(json.dumps(inst), encoding="utf-8")
    (tmp_path / "more.json").write_text(json.dumps(more), encoding="utf-8")
    caps = write_jsonl(tmp_path / "caps.jsonl", [
        {"id": "c1", "image": "a.jpg", "caption": "Two dogs and a person.", "source": "s1"},
        {"id": "c2", "image": "imgs/a.jpg", "caption": "A cat."},
        {"id": "c3", "image": "b.jpg", "caption": "A dog."},
        {"id": "c4", "image": "empty.jpg", "caption": "A dog on a bed."},
    ])
    return tmp_path, caps


def score(tmp_path, caps, *extra):
    out = tmp_path / "scores.jsonl"
    rc = main(["detail", "score", "--input", str(caps), "--caption-field", "caption", "--image-field", "image",
               "--id-field", "id", "--graphs", "claims", "--grounding", f"coco:{tmp_path / 'inst.json'}",
               "--out", str(out), *extra])
    return rc, out


def test_score_contract(files):
    tmp_path, caps = files
    rc, out = score(tmp_path, caps)
    assert rc == 0
    rows = {r["id"]: r for r in read_jsonl(out)}
    assert list(rows) == ["c1", "c2", "c3", "c4"]
    for r in rows.values():
        assert {"id", "icr", "aod", "cd", "objects", "attributes", "relations", "length"} <= set(r)
        assert r["parser"] == "capaudit-offline-scene-graph" and r["grounding"] == "coco-instance-masks"
    c1 = rows["c1"]  # dog (two) + person: union 120 + 40 - 10 = 150 of 200; AOD (1 + 0) / 2; 5 lex
    assert (c1["objects"], c1["attributes"], c1["relations"], c1["length"]) == (2, 1, 0, 5)
    assert c1["icr"] == pytest.approx(0.75) and c1["aod"] == pytest.approx(0.5)
    assert c1["cd"] == pytest.approx(0.75 * 0.5 / 5) and c1["source"] == "s1"
    assert rows["c2"]["icr"] == pytest.approx(32 / 200) and rows["c2"]["cd"] == 0.0  # matched by file name
    assert rows["c3"]["icr"] is None and rows["c3"]["cd"] is None and rows["c3"]["icr_status"] == "unavailable"
    assert rows["c4"]["icr"] == 0.0 and rows["c4"]["icr_status"] == "ok"
    man = json.loads((tmp_path / "scores.manifest.json").read_text())
    assert man["counts"] == {"rows": 4, "icr_ok": 3, "icr_unavailable": 1, "parse_failed": 0}
    assert "heuristic" in man["parser"]["label"] and man["relation_ends"] == "subject"
    assert man["relation_ends_label"].startswith("subject (Eq. 3") and man["icr"] == "things-only ICR"
    assert man["grounding"]["icr_kind"] == "things-only"
    assert [r["icr_kind"] for r in rows.values()] == ["things-only", "things-only", None, "things-only"]


def test_score_two_grounding_files_and_options(files):
    tmp_path, caps = files
    rc, out = score(tmp_path, caps, "--grounding", f"coco:{tmp_path / 'more.json'}", "--length-unit", "words",
                    "--relation-ends", "both", "--itm", "annotation_precision")
    assert rc == 0
    rows = {r["id"]: r for r in read_jsonl(out)}
    assert rows["c3"]["icr"] == pytest.approx(25 / 100)
    assert rows["c1"]["length_unit"] == "words" and rows["c1"]["relation_ends"] == "both"
    man = json.loads((tmp_path / "scores.manifest.json").read_text())
    assert man["relation_ends"] == "both" and man["relation_ends_label"].startswith("both (")
    assert rows["c1"]["itm"] == 1.0 and rows["c1"]["itm_scorer"] == "annotation-precision"
    assert rows["c4"]["itm"] == 0.0  # "dog" named, no dog annotated in empty.jpg


def test_select_contract(files):
    tmp_path, caps = files
    _, scores = score(tmp_path, caps, "--itm", "annotation_precision")
    out = tmp_path / "subset.jsonl"
    rc = main(["detail", "select", "--scores", str(scores), "--itm-field", "itm", "--k", "3", "--t", "2",
               "--strategy", "itm_cd", "--out", str(out)])
    assert rc == 0
    # ITM: c1 1.0, c2 1.0, c3 None, c4 0.0 -> K=3 keeps c1, c2, c4; CD: c1 0.075, c2 0, c4 0 (tie: ITM order)
    assert [r["id"] for r in read_jsonl(out)] == ["c1", "c2"]
    assert (tmp_path / "subset.parquet").is_file()
    man = json.loads((tmp_path / "subset.wds.json").read_text())
    assert man["selection"]["k"] == 3 and man["backends"]["parser"] == ["capaudit-offline-scene-graph"]
    assert man["backends"]["icr_kind"] == ["things-only"] and man["backends"]["relation_ends"] == ["subject"]
    assert [s["__key__"] for s in man["samples"]] == ["c1", "c2"]
    rc = main(["detail", "select", "--scores", str(scores), "--k", "0.5", "--t", "0.25", "--strategy", "itm_cd",
               "--out", str(tmp_path / "prop.jsonl")])
    assert rc == 0 and [r["id"] for r in read_jsonl(tmp_path / "prop.jsonl")] == ["c1"]


def test_cli_errors_name_file_line_field(files, capsys):
    tmp_path, caps = files
    bad = write_jsonl(tmp_path / "bad.jsonl", [{"id": "x", "image": "a.jpg", "caption": "A dog."},
                                               {"id": "y", "image": "a.jpg", "caption": 3}])
    rc, _ = score(tmp_path, bad)
    err = capsys.readouterr().err
    assert rc == 1 and "bad.jsonl:2" in err and "'caption'" in err
    rc = main(["detail", "score", "--input", str(caps), "--caption-field", "text", "--grounding", "none",
               "--out", str(tmp_path / "o.jsonl")])
    err = capsys.readouterr().err
    assert rc == 1 and "'text'" in err and "fields present: caption, id, image, source" in err
    rc = main(["detail", "score", "--input", str(caps), "--graphs", "llm", "--out", str(tmp_path / "o.jsonl")])
    assert rc == 1 and "--url" in capsys.readouterr().err
    _, scores = score(tmp_path, caps)
    rc = main(["detail", "select", "--scores", str(scores), "--k", "3", "--t", "2", "--out", str(tmp_path / "s.jsonl")])
    err = capsys.readouterr().err
    assert rc == 1 and "'itm'" in err and "scores.jsonl" in err
    assert not (tmp_path / "s.jsonl").exists()


def test_score_llm_graphs_via_model_call_layer(files):
    from capaudit.standins.scene_graph import OFFLINE_BACKEND_NAME, register_offline_backends
    from capaudit.llm.server import background_server

    tmp_path, caps = files
    register_offline_backends()
    with background_server([OFFLINE_BACKEND_NAME]) as url:
        out = tmp_path / "llm_scores.jsonl"
        rc = main(["detail", "score", "--input", str(caps), "--graphs", "llm", "--url", url, "--model",
                   OFFLINE_BACKEND_NAME, "--grounding", f"coco:{tmp_path / 'inst.json'}", "--out", str(out)])
    assert rc == 0
    rows = read_jsonl(out)
    assert [r["icr"] for r in rows][:2] == [pytest.approx(0.75), pytest.approx(0.16)]
    assert all(r["parser"] == OFFLINE_BACKEND_NAME for r in rows)
    assert (tmp_path / "llm_scores.scene_graphs.jsonl").is_file()


def test_subgraphs_command(files):
    tmp_path, caps = files
    _, scores = score(tmp_path, caps)
    out = tmp_path / "sub.jsonl"
    rc = main(["detail", "subgraphs", "--scores", str(scores), "--grounding", f"coco:{tmp_path / 'inst.json'}",
               "--out", str(out), "--seed", "1"])
    assert rc == 0
    rows = read_jsonl(out)
    assert len(rows) == 4 * 2 * 4  # captions x measures x fractions
    ok = [r for r in rows if r["status"] == "ok"]
    assert all(abs(r["ratio"] - r["fraction"]) <= 0.05 + 1e-9 for r in ok)
    assert all(r["realiser"].startswith("capaudit-template-realiser") and r["realised_caption"] for r in ok)
    c1_icr = {r["fraction"]: r for r in rows if r["id"] == "c1" and r["measure"] == "icr"}
    assert c1_icr[0.2]["status"] == "unreachable"  # person alone is 40/150 = 0.27, dog alone 0.8
    assert c1_icr[0.8]["status"] == "ok" and c1_icr[0.8]["graph"]["objects"] == ["dog"]


def test_read_caption_records_skip_empty_and_row_ids(tmp_path):
    from capaudit.detail.score import read_caption_records
    from capaudit.errors import InputError

    p = write_jsonl(tmp_path / "s.jsonl", [{"image_path": "a.jpg", "caption": "A dog."},
                                          {"image_path": "b.jpg", "caption": None},
                                          {"image_path": "c.jpg"},
                                          {"image_path": "d.jpg", "caption": "A cat."}])
    recs = read_caption_records(p, "caption", "image_path", None, skip_empty=True)
    assert [(r.id, r.image, r.line) for r in recs] == [("row0", "a.jpg", 1), ("row3", "d.jpg", 4)]
    with pytest.raises(InputError, match=r"s\.jsonl:2 field 'caption'"):
        read_caption_records(p, "caption", "image_path", None)
    with pytest.raises(InputError, match=r"s\.jsonl:1 field 'id'"):
        read_caption_records(p, "caption", "image_path", "id", skip_empty=True)


def _readme_detail_commands():
    """The README's "Caption detailness" bash block as argument lists: continuation lines joined,
    optional ``[...]`` groups dropped, the first of ``a|b|c`` alternatives taken."""
    import re
    from pathlib import Path

    text = (Path(__file__).resolve().parents[1] / "README.md").read_text(encoding="utf-8")
    section = text[text.index("## Caption detailness"):]
    section = section[: section.index("\n## ", 5)]
    block = re.search(r"```bash\n(.*?)```", section, re.S).group(1)
    out = []
    for line in block.replace("\\\n", " ").splitlines():
        words, depth = [], 0
        for w in line.split():
            if w.startswith("[") and depth == 0 or depth:
                depth += w.count("[") - w.count("]")
                continue
            words.append(w.split("|")[0])
        if words:
            out.append(words)
    return out


def test_readme_detail_sequence_runs_end_to_end(tmp_path, data_dir):
    """score -> select -> subgraphs exactly as the README writes them, on 30 COCO-MINI captions."""
    cmds = _readme_detail_commands()
    assert [c[:3] for c in cmds] == [["capaudit", "detail", "score"], ["capaudit", "detail", "select"],
                                     ["capaudit", "detail", "subgraphs"]]
    assert "--itm" in cmds[0] and cmds[0][cmds[0].index("--itm") + 1] == "annotation_precision"
    assert cmds[1][cmds[1].index("--itm-field") + 1] == "itm"
    ann = data_dir / "coco_mini" / "annotations"
    inst = ann / "instances_val2017.json"
    caps = json.loads((ann / "captions_val2017.json").read_text(encoding="utf-8"))
    names = {im["id"]: im["file_name"] for im in caps["images"]}
    rows = [{"id": a["id"], "image": names[a["image_id"]], "caption": a["caption"]}
            for a in sorted(caps["annotations"], key=lambda a: a["id"])[:30]]
    write_jsonl(tmp_path / "captions.jsonl", rows)
    subs = {"CAPTIONS.jsonl": str(tmp_path / "captions.jsonl"), "coco:INSTANCES.json": f"coco:{inst}",
            "coco:X.json": f"coco:{inst}", "SCORES.jsonl": str(tmp_path / "scores.jsonl"),
            "SUBSET.jsonl": str(tmp_path / "subset.jsonl"), "SUB.jsonl": str(tmp_path / "sub.jsonl"),
            "K": "20", "T": "10"}
    for cmd in cmds:
        assert main([subs.get(w, w) for w in cmd[1:]]) == 0, cmd
    scores = read_jsonl(tmp_path / "scores.jsonl")
    assert len(scores) == 30 and all(r["itm_scorer"] == "annotation-precision" for r in scores)
    subset = read_jsonl(tmp_path / "subset.jsonl")
    assert len(subset) == 10 and [r["rank"] for r in subset] == list(range(1, 11))
    sel = json.loads((tmp_path / "subset.wds.json").read_text())["selection"]
    itm = [r["itm"] for r in scores]
    ranked = sorted((v for v in itm if v is not None), reverse=True)
    assert sel["itm_ties"] == (itm.count(ranked[19]) if itm.count(ranked[19]) > 1 else 0)
    assert read_jsonl(tmp_path / "sub.jsonl")
