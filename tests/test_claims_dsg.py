"""DSG-1k extractor evaluation: category mapping, tuple parsing, matching and scores."""

from __future__ import annotations

import json

import pytest

from capaudit.claims.dsg_eval import (
    EVAL_TYPES,
    GoldProp,
    TypeCounts,
    eval_type,
    evaluate,
    gold_matches,
    match_item,
    read_dsg,
    stem,
    tuple_args,
    write_eval,
)
from capaudit.paper.render import to_csv, to_latex, write_table
from capaudit.paper.stage_tables import stage_table


def fake_lem(text):
    words = [w.strip(".,'\"").lower() for w in text.replace("==", " ").split()]
    return tuple(w for w in words if w and w not in ("a", "the", "on", "of", "is"))


def test_mapping():
    assert eval_type("entity", "whole") == "object" and eval_type("entity", "part") == "object"
    assert eval_type("attribute", "color") == "attribute" and eval_type("attribute", "state") == "attribute"
    assert eval_type("attribute", "count") == "count" and eval_type("other", "count") == "count"
    assert eval_type("other", "text rendering") == "text_rendering"
    assert eval_type("attribute", "style") == "global" and eval_type("global", "-") == "global"
    assert eval_type("relation", "spatial") == "relation" and eval_type("relation", "action") == "relation"
    assert eval_type("other", "aspect ratio") is None and eval_type("attribute", "seed") is None


def test_tuple_args():
    assert tuple_args("attribute - color (rubix cube, purple)") == ["rubix cube", "purple"]
    assert tuple_args('other - text rendering (word, "hello, world")') == ["word", '"hello, world"']
    assert tuple_args("relation - spatial (rocks, ground, on)") == ["rocks", "ground", "on"]
    assert tuple_args("other - count (security guards, ==3)") == ["security guards", "==3"]


def test_stem():
    assert stem("sitting") == "sit" and stem("standing") == "stand" and stem("dogs") == "dog"
    assert stem("wooden") == "wood" and stem("grey") == "gray" and stem("is") == "is"


def test_gold_matching_rules():
    g_obj = GoldProp("x", 1, "object", ("security guards",), "")
    assert gold_matches(g_obj, {"guard"}, fake_lem) and not gold_matches(g_obj, {"security"}, fake_lem)
    g_attr = GoldProp("x", 2, "attribute", ("cube", "dark purple"), "")
    assert gold_matches(g_attr, {"cube", "purple"}, fake_lem)
    assert not gold_matches(g_attr, {"purple"}, fake_lem)
    g_rel = GoldProp("x", 3, "relation", ("rocks", "ground", "on"), "")
    assert gold_matches(g_rel, {"rock", "ground", "ly"}, fake_lem)
    assert not gold_matches(g_rel, {"rock"}, fake_lem)
    g_cnt = GoldProp("x", 4, "count", ("guards", "==3"), "")
    assert gold_matches(g_cnt, {"guard", "3"}, fake_lem) and not gold_matches(g_cnt, {"guard", "2"}, fake_lem)
    g_txt = GoldProp("x", 5, "text_rendering", ("sign", '"open all night"'), "")
    assert gold_matches(g_txt, {"open", "night"}, fake_lem) and not gold_matches(g_txt, {"open"}, fake_lem)


def test_match_item_one_to_one_and_scores():
    gold = [GoldProp("x", 1, "object", ("dog",), ""), GoldProp("x", 2, "object", ("dog",), ""),
            GoldProp("x", 3, "global", ("photo",), "")]
    preds = [{"category": "object", "unit": "dog", "target": "dog"},
             {"category": "object", "unit": "cat", "target": "cat"},
             {"category": "camera", "unit": "photo", "target": "scene"},
             {"category": "lighting", "unit": "sunset", "target": "scene"}]
    got = match_item(gold, preds, fake_lem)
    assert vars(got["object"]) == {"gold": 2, "predicted": 2, "matched_gold": 1, "matched_pred": 1}
    assert vars(got["global"]) == {"gold": 1, "predicted": 2, "matched_gold": 1, "matched_pred": 1}
    c = TypeCounts(gold=4, predicted=2, matched_gold=1, matched_pred=1)
    assert c.scores() == {"precision": 0.5, "recall": 0.25, "f1": pytest.approx(1 / 3)}


class _FakeLemmatizer:
    def prime(self, texts):
        list(texts)

    def __call__(self, text):
        return fake_lem(text)


def test_evaluate_and_write(tmp_path):
    texts = {"a_1": "a dog", "b_1": "two cats"}
    gold = {"a_1": [GoldProp("a_1", 1, "object", ("dog",), "")],
            "b_1": [GoldProp("b_1", 1, "object", ("cats",), ""), GoldProp("b_1", 2, "count", ("cats", "==2"), "")]}

    def extract_many(ts):
        return [[{"category": "object", "unit": t.split()[-1], "target": ""}] for t in ts]

    res = evaluate(texts, gold, extract_many, _FakeLemmatizer(), "fake (heuristic baseline)")
    rows = {r["type"]: r for r in res.rows()}
    assert [r for r in rows] == list(EVAL_TYPES) + ["overall"]
    assert rows["object"]["recall"] == 1.0 and rows["count"]["recall"] == 0.0
    assert rows["overall"]["gold"] == 3 and rows["overall"]["matched_gold"] == 2
    assert rows["overall"]["precision"] == 1.0
    paths = write_eval(res, tmp_path, tmp_path / "claims", offline=True)
    assert json.loads(paths["json"].read_text())["rows"] == res.rows()
    written = write_table(stage_table(paths["rows"]), tmp_path / "tables")
    csv = written["csv"].read_text().splitlines()
    assert csv[0] == "extractor,type,gold,predicted,matched_gold,matched_pred,precision,recall,f1"
    assert csv[1] == "fake (heuristic baseline),object,2,2,2,2,1.0,1.0,1.0"
    tex = written["tex"].read_text()
    assert tex.startswith("% DSG-1k extractor evaluation; extractor: fake (heuristic baseline)\n% mapping: entity->object;")
    assert "% offline extractor: claims come from capaudit's offline heuristic extractor" in tex
    assert "\\begin{tabular}{lrrrrr}" in tex and "Type & Gold & Pred. & P & R & F1 \\\\" in tex
    assert "count & $1$ & $0$ & -- & $0.000$ & -- \\\\" in tex  # no prediction: no precision, no F1
    assert "overall & $3$ & $2$ & $1.000$ & $0.667$ & $0.800$ \\\\" in tex


def test_extractor_eval_undefined_scores_print_dashes(tmp_path):
    """A type without gold or predictions has no precision/recall/F1: missing ("--", empty CSV cell), not 0."""
    res = evaluate({"a_1": "a dog"}, {"a_1": [GoldProp("a_1", 1, "object", ("dog",), "")]},
                   lambda ts: [[{"category": "object", "unit": "dog", "target": ""}] for _ in ts], _FakeLemmatizer(), "x")
    rows = {r["type"]: r for r in res.rows()}
    assert rows["relation"]["precision"] is None and rows["relation"]["f1"] is None
    paths = write_eval(res, tmp_path)
    table = stage_table(paths["rows"])
    tex = to_latex(table)
    assert "object & $1$ & $1$ & $1.000$ & $1.000$ & $1.000$ \\\\" in tex
    assert "text-rendering & $0$ & $0$ & -- & -- & -- \\\\" in tex
    assert "offline extractor" not in tex
    assert "x,relation,0,0,0,0,,," in to_csv(table)


def test_paper_render_makes_the_table_of_a_stage_rows_file(tmp_path, capsys):
    """``capaudit claims eval-dsg`` writes rows; ``capaudit paper render DIR --out DIR`` renders them."""
    from capaudit.cli import main

    res = evaluate({"a_1": "a dog"}, {"a_1": [GoldProp("a_1", 1, "object", ("dog",), "")]},
                   lambda ts: [[{"category": "object", "unit": "dog", "target": ""}] for _ in ts], _FakeLemmatizer(), "x")
    write_eval(res, tmp_path, tmp_path)
    assert not (tmp_path / "extractor_eval_dsg.csv").exists()
    assert main(["paper", "render", str(tmp_path), "--out", str(tmp_path)]) == 0
    tex = (tmp_path / "extractor_eval_dsg.tex").read_text()
    assert "object & $1$ & $1$ & $1.000$ & $1.000$ & $1.000$ \\\\" in tex
    assert "x,relation,0,0,0,0,,," in (tmp_path / "extractor_eval_dsg.csv").read_text()
    assert (tmp_path / "extractor_eval_dsg.table.json").is_file() and (tmp_path / "extractor_eval_dsg.json").is_file()
    assert "extractor_eval_dsg:" in capsys.readouterr().out
    assert main(["paper", "render", str(tmp_path / "nothing"), "--out", str(tmp_path)]) != 0
    assert "unreadable table rows" in capsys.readouterr().err


def test_read_real_dsg(data_dir):
    texts, gold, excluded = read_dsg(data_dir / "dsg" / "data" / "dsg-1k-anns.csv")
    assert len(texts) == 1060
    assert sum(len(v) for v in gold.values()) + sum(excluded.values()) == 8182
    assert sum(excluded.values()) == 7


@pytest.mark.slow
def test_heuristic_extractor_on_dsg(tmp_path):
    """Regression floor for the heuristic extractor on all of DSG-1k (measured: overall F1 0.671)."""
    pytest.importorskip("spacy")
    from capaudit.claims.dsg_eval import run_dsg_eval

    result, paths = run_dsg_eval(tmp_path, tmp_path)
    written = write_table(stage_table(paths["rows"]), tmp_path / "tables")
    rows = {r["type"]: r for r in result.rows()}
    assert rows["overall"]["f1"] >= 0.65
    assert rows["object"]["f1"] >= 0.8
    assert rows["overall"]["gold"] == 8175
    assert "heuristic baseline" in written["csv"].read_text()
    assert "offline extractor" in written["tex"].read_text()


def test_served_extractor_is_named_by_its_recorded_card(tmp_path):
    """The evaluation asks the extractor through ``capaudit serve`` (in process) and the client's
    model-call layer; the table names the extractor by the card the client recorded, and a second
    run answers from the resumable store."""
    pytest.importorskip("spacy")
    from capaudit.claims.dsg_eval import run_dsg_eval
    from capaudit.llm.store import answered_by

    csv_path = tmp_path / "dsg.csv"
    csv_path.write_text(
        "item_id,text,keywords,proposition_id,dependency,category_broad,category_detailed,tuple,question_natural_language\n"
        "whoops_5,A rubix cube with ten squares of purple,rubix cube,1,0,entity,whole,entity - whole (rubix cube),?\n"
        'whoops_5,A rubix cube with ten squares of purple,"rubix cube, purple",2,1,attribute,color,'
        '"attribute - color (rubix cube, purple)",?\n'
        "coco_1,two dogs on a red sofa,dog,1,0,entity,whole,entity - whole (dogs),?\n", encoding="utf-8")
    result, paths = run_dsg_eval(tmp_path / "art", tmp_path / "detail", dsg_path=csv_path)
    store = tmp_path / "detail" / "dsg_eval" / "responses.jsonl"
    cards = answered_by(store)
    assert [c["model"] for c in cards] == ["capaudit-heuristic-extractor"] and cards[0]["kind"] == "heuristic"
    assert result.extractor == cards[0]["label"] and "heuristic baseline" in result.extractor
    meta = json.loads(paths["rows"].read_text())["meta"]
    assert meta["offline_extractor"] is True and meta["extractor"] == cards[0]["label"]
    assert len(store.read_text().splitlines()) == 2
    again, _ = run_dsg_eval(tmp_path / "art", tmp_path / "detail", dsg_path=csv_path)
    assert again.rows() == result.rows() and len(store.read_text().splitlines()) == 2  # nothing asked again
