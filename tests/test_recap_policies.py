"""Captioning policies as data (reference-spec §6): decoding, messages, request ids, context."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

from capaudit.errors import InputError
from capaudit.llm.requests import make_request
from capaudit.recap.policies import identify_policy, load_policies, load_policy, normalize_context
from capaudit.recap.preprocess import PrepOptions
from capaudit.recap.runner import TASK, TEXT_SCHEMA, chat_payload, id_template, request_row

POLICIES = Path(__file__).resolve().parents[1] / "params" / "policies"
NAIVE_INSTRUCTION = "Please generate a detailed caption of this image. Please be as descriptive as possible."


def test_the_four_policies_and_their_decoding():
    pols = load_policies(POLICIES)
    assert sorted(pols) == ["anime-booru", "naive", "naive-greedy", "photorealistic"]
    # policy runs send no temperature/top-k/top-p: the server's generation defaults decide (§6)
    for name in ("photorealistic", "anime-booru"):
        assert dict(pols[name].decoding) == {"max_tokens": 512, "chat_template_kwargs": {"enable_thinking": False}}
    assert dict(pols["naive"].decoding) == {"max_tokens": 512, "temperature": 1.0, "top_k": 20, "top_p": 0.95,
                                            "chat_template_kwargs": {"enable_thinking": False}}
    assert dict(pols["naive-greedy"].decoding) == {"max_tokens": 512, "temperature": 0.0,
                                                   "chat_template_kwargs": {"enable_thinking": False}}
    assert pols["anime-booru"].context_fields == ("general_tags", "character_tags", "confirmed_characters",
                                                  "copyright_tags", "rating")
    assert {p.offline_style for p in pols.values()} == {"detailed", "plain"}


def test_naive_control_is_one_user_message_without_system_prompt():
    for name in ("naive", "naive-greedy"):
        pol = load_policy(name, POLICIES)
        msgs = pol.messages("data:image/jpeg;base64,AAAA")
        assert pol.messages_policy == "single_user_message_with_image_no_system_prompt"
        assert msgs == [{"role": "user", "content": [
            {"type": "text", "text": NAIVE_INSTRUCTION},
            {"type": "image_url", "image_url": {"url": "data:image/jpeg;base64,AAAA"}}]}]
    photo = load_policy("photorealistic", POLICIES).messages("file:///x.jpg")
    assert [m["role"] for m in photo] == ["system", "user"]
    payload = chat_payload(load_policy("naive", POLICIES), "Qwen/Qwen3.5-35B-A3B-FP8", "file:///x.jpg", {})
    assert payload["temperature"] == 1.0 and payload["top_k"] == 20 and payload["top_p"] == 0.95
    assert "temperature" not in chat_payload(load_policy("photorealistic", POLICIES), "m", "file:///x.jpg", {})


def test_prompt_text_is_ours_not_the_references(reference_dir: Path):
    """No 8-word run of our policy prompts appears in the reference's recap configs (the naive
    control's instruction is the published Recap-DataComp sentence on purpose)."""
    files = sorted((reference_dir / "configs" / "recap").rglob("*.yaml"))
    if not files:
        pytest.skip("reference recap configs not available")
    ref = " ".join(re.findall(r"[a-z']+", " ".join(f.read_text(encoding="utf-8").lower() for f in files)))
    for name in ("photorealistic", "anime-booru"):
        pol = load_policy(name, POLICIES)
        words = re.findall(r"[a-z']+", f"{pol.system} {pol.user} {pol.context_header}".lower())
        shared = [" ".join(words[i:i + 8]) for i in range(len(words) - 7) if " ".join(words[i:i + 8]) in ref]
        assert shared == [], f"{name}: copied wording {shared[:3]}"


def test_request_ids_follow_version_prompt_decoding_and_model(tmp_path: Path):
    opts = PrepOptions()
    base = load_policy("photorealistic", POLICIES)
    key = "sha256:" + "ab" * 32
    rid = id_template(base, "m", None, opts).request_id(key, "img1", {})
    # the runner's id is the llm layer's content address of the full request row
    row = request_row(base, "m", None, opts, image_url="data:image/jpeg;base64,AAAA", image_key=key, image_id="img1")
    assert row["request_id"] == rid and row["task"] == TASK and row["schema"] == TEXT_SCHEMA
    assert row["request_id"] == make_request(task=TASK, task_version=1, model="m", revision=None,
                                             prompt_version=base.prompt_version, schema=TEXT_SCHEMA,
                                             messages=row["messages"], decoding=dict(base.decoding),
                                             input=row["input"])["request_id"]
    data = yaml.safe_load((POLICIES / "photorealistic.yaml").read_text(encoding="utf-8"))
    bumped = dict(data, version=2)
    edited = dict(data, user=data["user"] + " Mention the weather.")
    greedy = dict(data, decoding={**data["decoding"], "temperature": 0.0})
    ids = {rid}
    for i, variant in enumerate((bumped, edited, greedy)):
        d = tmp_path / f"v{i}"
        d.mkdir()
        (d / "photorealistic.yaml").write_text(yaml.safe_dump(variant), encoding="utf-8")
        ids.add(id_template(load_policy("photorealistic", d), "m", None, opts).request_id(key, "img1", {}))
    ids.add(id_template(base, "other-model", None, opts).request_id(key, "img1", {}))
    ids.add(id_template(base, "m", "rev2", opts).request_id(key, "img1", {}))
    ids.add(id_template(base, "m", None, PrepOptions(mode="file")).request_id(key, "img1", {}))
    ids.add(id_template(base, "m", None, PrepOptions(quality=95)).request_id(key, "img1", {}))
    assert len(ids) == 8
    assert id_template(base, "m", None, opts).request_id(key, "img1", {}) == rid  # deterministic


def test_anime_context_normalised_and_appended():
    pol = load_policy("anime-booru", POLICIES)
    ctx = normalize_context(pol, {"general_tags": "1girl long_hair smile smile", "artist_tags": "x",
                                  "confirmed_characters": "hatsune miku, hatsune miku (append)",
                                  "copyright_tags": ["vocaloid"], "rating": "g", "character_tags": ""})
    assert ctx == {"general_tags": ["1girl", "long_hair", "smile"],
                   "confirmed_characters": ["hatsune miku", "hatsune miku (append)"],
                   "copyright_tags": ["vocaloid"], "rating": "g"}
    text = pol.user_text(ctx)
    assert text.startswith(pol.user + "\n\n" + pol.context_header)
    assert text.endswith("general tags: 1girl, long hair, smile\n"
                         "confirmed_characters (broadest to most specific): hatsune miku, hatsune miku (append)\n"
                         "copyright tags: vocaloid\nrating: g")
    assert pol.user_text({}) == pol.user
    with pytest.raises(InputError, match="field 'rating'"):
        normalize_context(pol, {"rating": {"a": 1}}, where="m.jsonl:3")


def test_identify_policy_from_messages():
    pols = load_policies(POLICIES)
    anime = pols["anime-booru"]
    assert identify_policy(anime.messages("u", {"rating": "g"}), pols).name == "anime-booru"
    assert identify_policy(pols["photorealistic"].messages("u"), pols).name == "photorealistic"
    assert identify_policy(pols["naive-greedy"].messages("u"), pols).offline_style == "plain"
    assert identify_policy([{"role": "user", "content": "hello"}], pols) is None


def test_bad_policy_files(tmp_path: Path):
    good = yaml.safe_load((POLICIES / "naive.yaml").read_text(encoding="utf-8"))
    cases = {
        "decoding": dict(good, decoding={"temperature": 1.0}),
        "messages_policy": dict(good, system="be brief"),
        "context_fields": dict(good, context_fields=["artist_tags"]),
        "name": dict(good, name="Naive Policy"),
    }
    for field, data in cases.items():
        (tmp_path / "naive.yaml").write_text(yaml.safe_dump(data), encoding="utf-8")
        with pytest.raises(InputError, match=f"naive.yaml field '{field}'"):
            load_policy("naive", tmp_path)
    with pytest.raises(InputError, match="unknown policy 'nope'; known: naive"):
        load_policy("nope", tmp_path)
