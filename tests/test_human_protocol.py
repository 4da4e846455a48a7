"""Human-verification protocol and sampling (reference-spec §7)."""

from __future__ import annotations

import hashlib
import json
import random
from pathlib import Path

import pytest

from capaudit.errors import InputError
from capaudit.human.protocol import PHASE_FIELDS, StudyConfig, screen_text, validate_judgment
from capaudit.human.sampling import item_id_for, read_judged_claims, sample_items

KEY = "sha256:" + "ab" * 32


def _row(qid: str, surface: str, category: str, unit: str, answers=None, **kw) -> dict:
    cap = qid.rsplit(":u", 1)[0]
    row = {"question_id": qid, "caption_id": cap, "surface": surface, "slice": "s", "category": category,
           "unit": unit, "target": kw.pop("target", ""), "span": "", "span_offsets": None,
           "caption_window": kw.pop("window", "a red car on a road"), "image_path": None, "image_key": KEY,
           "answers": answers if answers is not None else {"qwen": "yes", "gemma": "no"},
           "judges": ["qwen", "gemma"], "backend": {"qwen": "offline", "gemma": "offline"}}
    row.update(kw)
    return row


def _write(path: Path, rows) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


# -- protocol --------------------------------------------------------------------------------------------
def test_phase_fields_are_the_spec_values() -> None:
    assert PHASE_FIELDS["caption"]["caption_licensed"] == ("yes", "no", "uncertain")
    assert PHASE_FIELDS["caption"]["atomic_visual_claim"] == ("yes", "not_visual", "not_atomic", "uncertain")
    assert PHASE_FIELDS["caption"]["category_check"] == ("correct", "incorrect", "uncertain", "not_applicable")
    assert PHASE_FIELDS["image"]["image_support"] == (
        "yes", "no", "uncertain", "not_visual", "image_unavailable", "prefer_not_to_answer")


def test_validate_judgment() -> None:
    ok = validate_judgment("caption", {"caption_licensed": "yes", "atomic_visual_claim": "not_atomic",
                                       "category_check": "incorrect", "corrected_category": "attribute"},
                           item_category="object")
    assert ok["corrected_category"] == "attribute" and ok["reason_tags"] == [] and ok["note"] is None
    with pytest.raises(InputError, match="corrected_category"):
        validate_judgment("caption", {"caption_licensed": "yes", "atomic_visual_claim": "yes",
                                      "category_check": "incorrect"})
    with pytest.raises(InputError, match="must differ"):
        validate_judgment("caption", {"caption_licensed": "yes", "atomic_visual_claim": "yes", "category_check":
                                      "incorrect", "corrected_category": "object"}, item_category="object")
    with pytest.raises(InputError, match="'image_support'"):
        validate_judgment("image", {"image_support": "maybe"})
    with pytest.raises(InputError, match="'caption_licensed'.*not a field of the image phase"):
        validate_judgment("image", {"image_support": "yes", "caption_licensed": "yes"})
    img = validate_judgment("image", {"image_support": "yes", "confidence": 4, "reason_tags": ["occluded", "occluded"]})
    assert img["confidence"] == 4 and img["reason_tags"] == ["occluded"] and img["image_unavailable"] == 0
    assert validate_judgment("image", {"image_support": "image_unavailable"})["image_unavailable"] == 1
    with pytest.raises(InputError, match="confidence"):
        validate_judgment("image", {"image_support": "yes", "confidence": 6})
    pair = validate_judgment("pair", {"salient_coverage": "3", "control_usefulness": 5})
    assert (pair["salient_coverage"], pair["control_usefulness"]) == (3, 5)
    assert validate_judgment("pair", {"image_unavailable": True})["image_unavailable"] == 1
    with pytest.raises(InputError, match="salient_coverage"):
        validate_judgment("pair", {"control_usefulness": 5})
    with pytest.raises(InputError, match="phase"):
        validate_judgment("video", {})


@pytest.mark.parametrize("note", ["mail me at jane.doe@example.org", "see https://example.com/x", "www.foo.bar/page",
                                  "call +1 (555) 123-4567", "host 192.168.0.12", "my site janedoe.com"])
def test_notes_with_contact_data_are_rejected(note: str) -> None:
    with pytest.raises(InputError, match="'note'"):
        screen_text(note)
    with pytest.raises(InputError, match="'note'"):
        validate_judgment("image", {"image_support": "yes", "note": note})


def test_plain_notes_pass() -> None:
    assert screen_text("  two dogs, 3 cats; the sign is blurry.  ") == "two dogs, 3 cats; the sign is blurry."
    with pytest.raises(InputError, match="longer than 500"):
        screen_text("x" * 501)


def test_study_config_validation() -> None:
    c = StudyConfig.from_mapping({"study_id": "s1", "readiness": {"min_substantive": 10}})
    assert c.readiness.min_substantive == 10 and c.seed == 1477 and c.claims_per_stratum == 30
    assert c.item_namespace == "s1"
    with pytest.raises(InputError, match="'colour'"):
        StudyConfig.from_mapping({"study_id": "s1", "colour": 1}, source="p.yaml")
    with pytest.raises(InputError, match="study_id"):
        StudyConfig.from_mapping({})
    with pytest.raises(InputError, match="mode"):
        StudyConfig(study_id="s", mode="fake")
    with pytest.raises(InputError, match="surface_groups"):
        StudyConfig(study_id="s", surface_groups={"a": ["x"], "b": ["x"]})
    assert StudyConfig(study_id="s", surface_groups={"ours": ["x"]}).group_of("y") is None


# -- sampling ----------------------------------------------------------------------------------------------
def test_item_id_is_blake2b_of_namespace_qid_repeat() -> None:
    want = hashlib.blake2b(b"ns\x00cap:1:u0003\x001", digest_size=16).hexdigest()
    assert item_id_for("ns", "cap:1:u0003", 1) == want and len(want) == 32


def test_sample_hand_checked(tmp_path: Path) -> None:
    rows = [_row(f"ours_s:{i}:u0000", "ours_s", "object", f"thing{i}") for i in range(3)]
    rows += [_row(f"ref_s:{i}:u0000", "ref_s", "object", f"thing{i}") for i in range(5)]
    path = _write(tmp_path / "jc.jsonl", rows)
    claims, counts = read_judged_claims([path])
    conf = StudyConfig(study_id="s", claims_per_stratum=2, repeat_fraction=0.5, require_all_strata=False,
                       surface_groups={"ours": ["ours_s"], "reference": ["ref_s"]}, overlap_per_stratum=1)
    items, rep = sample_items(claims, conf)
    base = [i for i in items if i.repeat_index == 0]
    reps = [i for i in items if i.repeat_index == 1]
    assert rep.pools == {"ours/object": 3, "reference/object": 5} and rep.samples == {"ours/object": 2, "reference/object": 2}
    assert len(base) == 4 and len(reps) == 2  # round(4 * 0.5)
    for it in base:
        n_pool = 3 if it.surface_group == "ours" else 5
        assert it.weight == pytest.approx(n_pool / 2) and it.sample_probability == pytest.approx(2 / n_pool)
    assert sum(it.overlap for it in base) == 2
    for r in reps:
        assert r.weight == 0 and r.repeat_of in {b.item_id for b in base}
        assert r.item_id == item_id_for("s", r.claim.question_id, 1)
    assert sorted(i.sample_order for i in items) == list(range(6))
    # 14 of 16 strata missing (2 groups x 8 types, one present in each) and all are required by default
    with pytest.raises(InputError, match="14 of 16 strata"):
        sample_items(claims, StudyConfig(study_id="s", surface_groups={"ours": ["ours_s"], "reference": ["ref_s"]}))


def _independent_sample(claims, conf: StudyConfig):
    """Restatement of §7 sampling: sorted strata, one Random(seed), shuffle pool, take k, repeats, final shuffle."""
    strata = {}
    for c in claims:
        strata.setdefault(f"{conf.group_of(c.surface)}/{c.category}", []).append(c)
    rng = random.Random(conf.seed)
    base = []
    for s in sorted(strata):
        pool = sorted(strata[s], key=lambda c: c.question_id)
        rng.shuffle(pool)
        k = min(conf.claims_per_stratum, len(pool))
        base += [(c.question_id, 0, len(pool) / k) for c in pool[:k]]
    copy = list(base)
    rng.shuffle(copy)
    final = base + [(q, 1, 0.0) for q, _, _ in copy[: round(len(base) * conf.repeat_fraction)]]
    rng.shuffle(final)
    return final


def test_sample_matches_independent_restatement(tmp_path: Path) -> None:
    r = random.Random(5)
    cats = ["object", "attribute", "relation", "count", "style", "camera", "lighting", "text_rendering"]
    rows = []
    for s in ("a", "b", "c"):
        for i in range(60):
            rows.append(_row(f"{s}:{i}:u0000", s, r.choice(cats), f"unit {i}"))
    path = _write(tmp_path / "jc.jsonl", rows)
    claims, _ = read_judged_claims([path])
    conf = StudyConfig(study_id="x", claims_per_stratum=4, repeat_fraction=0.05, seed=1477,
                       surface_groups={"ours": ["a"], "reference": ["b", "c"]})
    items, _ = sample_items(claims, conf)
    assert [(i.claim.question_id, i.repeat_index, i.weight) for i in items] == _independent_sample(claims, conf)
    items2, _ = sample_items(claims, conf)
    assert [i.item_id for i in items] == [i.item_id for i in items2]  # seeded


def test_pool_dedup_missing_judge_and_overrides(tmp_path: Path) -> None:
    rows = [
        _row("c1:u0000", "s", "object", "Red  Car", target="car"),
        _row("c1:u0001", "s", "object", "red car", target="CAR"),  # duplicate by key -> dropped
        _row("c1:u0002", "s", "object", "dog", answers={"qwen": "yes"}),  # gemma missing -> not in pool
        _row("c1:u0003", "s", "mood", "happy"),  # category outside the 8 types -> dropped
        _row("c2:u0000", "s", "object", "tree"),
    ]
    p1 = _write(tmp_path / "a.jsonl", rows)
    p2 = _write(tmp_path / "b.jsonl", [_row("c2:u0000", "s", "object", "bush")])  # later file overrides
    claims, counts = read_judged_claims([p1, p2])
    assert counts == {"rows": 6, "other_category": 1, "overridden": 1}
    items, rep = sample_items(claims, StudyConfig(study_id="s", require_all_strata=False, repeat_fraction=0,
                                                  judges=["qwen", "gemma"]))
    assert rep.counts == {"duplicates": 1, "missing_judge": 1, "ungrouped": 0}
    assert sorted(i.claim.unit for i in items) == ["Red  Car", "bush"]


@pytest.mark.parametrize("mutate,field", [
    (lambda r: r.pop("answers"), "answers"),
    (lambda r: r.update(image_key="md5:1"), "image_key"),
    (lambda r: r.update(span_offsets=[5, 500]), "span_offsets"),
    (lambda r: r.update(answers={"qwen": "maybe"}), "answers"),
    (lambda r: r.update(unit=3), "unit"),
])
def test_bad_rows_name_file_line_and_field(tmp_path: Path, mutate, field: str) -> None:
    good = _row("c1:u0000", "s", "object", "car")
    bad = _row("c2:u0000", "s", "object", "car")
    mutate(bad)
    path = _write(tmp_path / "jc.jsonl", [good, bad])
    with pytest.raises(InputError) as ei:
        read_judged_claims([path])
    msg = str(ei.value)
    assert "jc.jsonl:2" in msg and f"'{field}'" in msg


def test_not_json_and_missing_file(tmp_path: Path) -> None:
    p = tmp_path / "jc.jsonl"
    p.write_text('{"question_id": 1\n', encoding="utf-8")
    with pytest.raises(InputError, match="jc.jsonl:1"):
        read_judged_claims([p])
    with pytest.raises(InputError, match="not found"):
        read_judged_claims([tmp_path / "nope.jsonl"])
