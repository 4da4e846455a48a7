"""A judge is labelled by who answered it (the model cards recorded beside its stores), never by
the name the params file gave it; a table's caveats follow from the cards' kinds."""

from __future__ import annotations

from pathlib import Path

from capaudit.judges.answerers import as_answered, recorded_cards
from capaudit.judges.stage_params import JudgeSpec
from capaudit.llm.store import record_answerers
from capaudit.paper.table_model import CAVEATS, stand_in_caveats

SPEC = JudgeSpec("qwen", "Qwen/Qwen3.5-397B-A17B-FP8", "http://127.0.0.1:8001", None, "Qwen3.5 judge", "Q", False)
VLM = {"model": SPEC.model, "kind": "random-vision test model", "version": "", "url": "http://127.0.0.1:8001",
       "label": "random-vision test VLM (Idefics3)", "caveat": "answers are not about the image"}


def test_a_judge_served_by_the_test_vlm_is_named_by_its_card(tmp_path: Path) -> None:
    a, b = tmp_path / "s1" / "responses.jsonl", tmp_path / "s2" / "responses.jsonl"
    record_answerers(a, [VLM])
    record_answerers(b, [VLM])
    spec, kinds = as_answered(SPEC, [a, b])
    assert kinds == ["random-vision test model"] and spec.offline and spec.label == VLM["label"]
    assert (spec.name, spec.model, spec.short) == (SPEC.name, SPEC.model, SPEC.short)
    assert len(recorded_cards([a, b])) == 1  # the same card from two stores once


def test_a_real_judge_keeps_its_label_and_nothing_recorded_changes_nothing(tmp_path: Path) -> None:
    real = {**VLM, "kind": "real", "label": SPEC.model, "caveat": ""}
    store = tmp_path / "responses.jsonl"
    record_answerers(store, [real])
    assert as_answered(SPEC, [store]) == (SPEC, ["real"])
    assert as_answered(SPEC, [tmp_path / "never_run.jsonl"]) == (SPEC, [])


def test_caveats_follow_the_kinds() -> None:
    assert stand_in_caveats("judges", ["real"]) == ()
    assert stand_in_caveats("judges", ["heuristic"]) == ("offline judges",)
    assert stand_in_caveats("judges", [], offline=True) == ("offline judges",)  # recorded before cards existed
    assert stand_in_caveats("extractor", ["random-vision test model"], offline=True) == ("random-vision test model",)
    assert stand_in_caveats("captioner", ["heuristic", "unknown"]) == ("heuristic captioner", "unknown model")
    assert all(t in CAVEATS for role in ("judges", "extractor", "captioner")
               for t in stand_in_caveats(role, ["heuristic", "random-vision test model", "unknown"]))


def test_notes_and_caveats_follow_each_judge() -> None:
    from capaudit.paper.table_model import judge_caveats
    from capaudit.paper.vqa_generic import provenance_comment
    from capaudit.summaries.vqa_layout import LayoutJudge, LayoutSlice, LayoutSurface, VqaLayout

    vlm = LayoutJudge("a", "A", "random-vision test VLM", "offline", ("random-vision test model",))
    real = LayoutJudge("b", "B", "Gemma", "model", ("real",))
    old = LayoutJudge("c", "C", "offline judge", "offline")  # recorded before model cards
    assert vlm.stand_in_note == "a random-vision test model, its answers not about the images"
    assert real.stand_in_note == "" and old.stand_in_kinds == ("heuristic",)
    layout = VqaLayout([vlm, real], [LayoutSlice("s", [LayoutSurface("x", "x")])], [])
    line = provenance_comment(layout)
    assert "A = a (random-vision test VLM; a random-vision test model" in line and line.endswith("; B = b (Gemma)\n")
    # judge by judge: one real judge does not hide another's heuristic answers
    assert judge_caveats({"offline_judges": ["c"], "judge_kinds": {"b": ["real"], "c": []}}) == ("offline judges",)
    assert judge_caveats({"offline_judges": [], "judge_kinds": {"b": ["real"]}}) == ()
