"""--prompts reference: the requests carry exactly the reference's messages and decoding.

The expected messages are built here, independently, from the published data files
(``prompts/claimed_cbu_v2.json``, ``prompts/cbu_vqa_v1.json`` of the reference folder) by their
documented placeholders, and compared text for text with what ``claims build`` and ``judges
build`` write.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from capaudit.data.reference import fetch_reference, reference_dir
from capaudit.errors import InputError

REF = reference_dir()
pytestmark = pytest.mark.skipif(not (REF / "prompts" / "claimed_cbu_v2.json").is_file(),
                                reason=f"reference folder {REF} not present")

CAPTIONS = [
    {"id": "a", "caption": "A red cup\non a wooden table,  next to two   spoons. " + "word " * 80},
    {"id": "b", "caption": "Line one\nline two with \u00e9t\u00e9 and a \"quoted\" {brace} sign reading 'OPEN'."},
    {"caption": "x" * 2500},  # no id: '<surface>:<row>'; longer than 1,800 characters
    {"id": "d", "caption": "   "},  # blank: skipped, as the reference does
]


def _expected_extraction(spec: dict, caption_id: str, caption: str, budget) -> tuple:
    window = caption if budget is None else " ".join(caption.split()[:budget])
    schema = json.dumps(spec["schema"], ensure_ascii=False, separators=(",", ":"))
    clipped = window[: spec["max_caption_chars"]].replace("\n", " ")
    user = spec["user_prompt_template"].format(categories=", ".join(spec["unit_categories"]), schema=schema,
                                               caption_id=caption_id, caption=clipped)
    return spec["system_prompt"], user


def _capaudit(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "capaudit.cli", *args], capture_output=True, text=True)


@pytest.mark.parametrize("budget", [64, None])
def test_claims_build_sends_the_reference_messages_and_decoding(tmp_path: Path, budget) -> None:
    spec = json.loads((REF / "prompts" / "claimed_cbu_v2.json").read_text(encoding="utf-8"))
    src = tmp_path / "captions.jsonl"
    src.write_text("".join(json.dumps(r) + "\n" for r in CAPTIONS), encoding="utf-8")
    out = tmp_path / "req.jsonl"
    r = _capaudit("claims", "build", "--input", str(src), "--surface", "s",
                  "--budget", "full" if budget is None else str(budget), "--out", str(out))
    assert r.returncode == 0, r.stderr
    rows = [json.loads(x) for x in out.read_text(encoding="utf-8").splitlines()]
    assert [x["input"]["caption_id"] for x in rows] == ["s:0", "s:1", "s:2"]
    for row, src_row in zip(rows, CAPTIONS):
        system, user = _expected_extraction(spec, row["input"]["caption_id"], src_row["caption"], budget)
        assert [m["role"] for m in row["messages"]] == ["system", "user"]
        assert row["messages"][0]["content"] == system
        assert row["messages"][1]["content"] == user
        assert row["schema"] == spec["schema"]
        assert row["decoding"] == {"temperature": 0.0, "max_tokens": 4096, "chat_template_kwargs": {"enable_thinking": False}}
        assert row["prompt_version"].startswith("reference:claimed_cbu_v2@")
    manifest = json.loads(out.with_name("req.manifest.json").read_text(encoding="utf-8"))
    assert manifest["prompt_set"] == "reference" and manifest["system_prompt"] == spec["system_prompt"]


def test_the_two_wordings_never_share_an_answer(tmp_path: Path) -> None:
    from capaudit.claims.requests import BuildParams, build_requests

    items = [(0, "A red cup on a table.", "c1", None)]
    ref, _ = build_requests(items, BuildParams(surface="s"))
    own, _ = build_requests(items, BuildParams(surface="s", prompts="capaudit"))
    assert ref[0]["request_id"] != own[0]["request_id"]
    assert ref[0]["messages"] != own[0]["messages"]
    with pytest.raises(InputError, match="not in the reference protocol"):
        BuildParams(surface="s", parent_links=True)
    with pytest.raises(InputError, match="prompt set must be one of"):
        BuildParams(surface="s", prompts="paraphrase")


def test_unknown_prompt_set_is_one_line_from_the_cli(tmp_path: Path) -> None:
    src = tmp_path / "c.jsonl"
    src.write_text('{"caption": "a dog"}\n', encoding="utf-8")
    r = _capaudit("claims", "build", "--input", str(src), "--surface", "s", "--prompts", "mine",
                  "--out", str(tmp_path / "r.jsonl"))
    assert r.returncode == 2 and "--prompts" in r.stderr and "Traceback" not in r.stderr
    assert not (tmp_path / "r.jsonl").exists()


def _expected_judge_user(spec: dict, questions: list, evidence: bool) -> str:
    rules = (Path(__file__).parents[1] / "lib" / "capaudit" / "judges" / "data" / "reference_runner_text.yaml")
    import yaml

    swap = yaml.safe_load(rules.read_text(encoding="utf-8"))
    template = spec["user_prompt_template"]
    if not evidence:
        template = template.replace(swap["evidence_rule"], swap["no_evidence_rule"])
    qs = json.dumps([{"question_id": q["question_id"], "category": q["category"], "question": q["question"]}
                     for q in questions], ensure_ascii=False, separators=(",", ":"))
    return template.format(questions=qs)


@pytest.mark.parametrize("evidence", [False, True])
def test_judge_requests_carry_the_reference_messages(tmp_path: Path, evidence: bool) -> None:
    from capaudit.judges.questions import Question
    from capaudit.judges.requests import FastRows, JudgeBuildParams, build_request
    from capaudit.prompt_sets import reference_question

    spec = json.loads((REF / "prompts" / "cbu_vqa_v1.json").read_text(encoding="utf-8"))
    units = [("object", "cup", "cup"), ("attribute", "red \u00e9t\u00e9 cup", "cup"), ("text_rendering", "'OPEN'", ""),
             ("relation", "cup on table", "")]
    qs = [Question(f"c1:u{i:04d}", cat, reference_question(spec["question_templates"], cat, unit, target), unit,
                   target, unit, i) for i, (cat, unit, target) in enumerate(units)]
    params = JudgeBuildParams(model="judge", evidence=evidence)
    row = build_request("c1", "s", qs, "file:///img.png", "sha256:00", params)
    assert row["messages"][0]["content"] == spec["system_prompt"]
    text = row["messages"][1]["content"][0]["text"]
    assert text == _expected_judge_user(spec, [q.public() for q in qs], evidence)
    assert row["decoding"] == {"temperature": 0.0, "max_tokens": 2048, "chat_template_kwargs": {"enable_thinking": False}}
    items = row["schema"]["properties"]["question_results"]
    assert (items["minItems"], items["maxItems"]) == (4, 4)
    assert ("evidence" in items["items"]["required"]) is evidence
    # the fast writer writes the same bytes
    from capaudit.io.canonical_json import dumps_line

    meta = {"source_row": 0, "claims_request_id": "r", "image_path": "/img.png"}
    slow = build_request("c1", "s", qs, "file:///img.png", "sha256:00", params, meta=meta)
    assert FastRows(params).line("c1", "s", qs, "file:///img.png", "sha256:00", meta) == (slow["request_id"], dumps_line(slow))


def test_question_templates_are_the_reference_ones() -> None:
    from capaudit.judges.questions import question_text

    spec = json.loads((REF / "prompts" / "cbu_vqa_v1.json").read_text(encoding="utf-8"))
    from capaudit.prompt_sets import reference_question

    for cat, unit, target in [("text_rendering", " SALE ", "sign"), ("object", "dog", "dog"), ("style", "photo", ""),
                              ("count", "two dogs", " ")]:
        assert question_text(cat, unit, target) == reference_question(spec["question_templates"], cat, unit, target)


def test_reference_files_are_checksummed(tmp_path: Path, monkeypatch) -> None:
    import shutil

    copy = tmp_path / "ref"
    shutil.copytree(REF / "prompts", copy / "prompts")
    monkeypatch.setenv("CAPAUDIT_REFERENCE_DIR", str(copy))
    monkeypatch.setenv("CAPAUDIT_HASH_CACHE", str(tmp_path / "hashes.json"))
    assert fetch_reference("prompts/cbu_vqa_v1.json") == copy / "prompts" / "cbu_vqa_v1.json"
    p = copy / "prompts" / "cbu_vqa_v1.json"
    p.write_text(p.read_text(encoding="utf-8").replace("strict", "lenient"), encoding="utf-8")
    from capaudit.data.registry import DataError

    with pytest.raises(DataError, match="sha256 mismatch"):
        fetch_reference("prompts/cbu_vqa_v1.json")
    (copy / "prompts" / "claimed_cbu_v2.json").unlink()
    with pytest.raises(DataError, match="missing"):
        fetch_reference("prompts/claimed_cbu_v2.json")


def test_reference_registry_is_current() -> None:
    """Every file of the reference folder is registered with its current sha256 (regenerate with
    ``python -m capaudit.data.reference <folder>``)."""
    from capaudit.data import reference

    built = reference.build(REF)
    shipped = json.loads(reference.REGISTRY_PATH.read_text(encoding="utf-8"))
    assert built["entries"] == shipped["entries"]


def test_reference_policies_send_the_published_text(tmp_path: Path) -> None:
    import yaml

    from capaudit.recap.policies import load_policy

    for domain in ("photorealistic", "anime_booru"):
        cfg = yaml.safe_load((REF / "configs" / "recap" / "domains" / f"{domain}.yaml").read_text(encoding="utf-8"))
        pol = load_policy(f"reference-{domain}")
        msgs = pol.messages("file:///img.jpg")
        assert msgs[0] == {"role": "system", "content": cfg["caption"]["system_prompt"].rstrip("\n")}
        stage = cfg["caption"]["stages"][cfg["caption"]["stage_order"][0]]
        assert msgs[1]["content"][0]["text"] == stage["prompt"].rstrip("\n")
        assert msgs[1]["content"][1] == {"type": "image_url", "image_url": {"url": "file:///img.jpg"}}
        assert pol.decoding == {"max_tokens": stage["max_tokens"], "chat_template_kwargs": {"enable_thinking": False}}
        assert list(pol.context_fields) == list(stage.get("context_fields") or [])
        assert load_policy(REF / "configs" / "recap" / "domains" / f"{domain}.yaml").prompt_version == pol.prompt_version
    assert load_policy("reference-photorealistic").prompt_version != load_policy("photorealistic").prompt_version


def test_reference_policy_errors_name_the_file_and_field(tmp_path: Path) -> None:
    from capaudit.recap.policies import load_policy

    (tmp_path / "base.yaml").write_text("caption: {system_prompt: 'sys'}\n", encoding="utf-8")
    bad = tmp_path / "d" / "x.yaml"
    bad.parent.mkdir()
    bad.write_text("extends: ../base.yaml\ncaption: {stage_order: [long], stages: {long: {prompt: 'p', max_tokens: 0}}}\n",
                   encoding="utf-8")
    with pytest.raises(InputError, match="max_tokens"):
        load_policy(bad)
    bad.write_text("extends: ../base.yaml\ncaption: {stage_order: [long], stages: {long: {prompt: 'p', max_tokens: 9}}}\n",
                   encoding="utf-8")
    pol = load_policy(bad)
    assert (pol.system, pol.user, pol.name) == ("sys", "p", "reference-x")
    with pytest.raises(InputError, match="unknown reference policy"):
        load_policy("reference-watercolour")
