"""The annotator guidance data (human/data/guidance.yaml): complete, consistent, in plain words."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

from capaudit.errors import InputError
from capaudit.human.guidance import GUIDANCE_FILE, load_guidance
from capaudit.human.protocol import CATEGORIES, LABELS, PHASES, REASON_TAGS, validate_judgment
from capaudit.human.widgets import annotator_message


def test_every_claim_type_and_term_has_a_definition_and_an_example_stated_by_its_caption() -> None:
    g = load_guidance()
    assert set(g.categories) == set(CATEGORIES) and set(g.phases) == set(PHASES)
    for name, t in list(g.categories.items()) + list(g.terms.items()):
        assert len(t.definition.split()) >= 6, name
        quoted = re.findall(r'"([^"]+)"', t.example_claim)
        stated = quoted[0] if quoted else t.example_claim
        assert stated.lower() in t.example_caption.lower(), (name, t.example_claim)


def test_messages_never_show_internal_field_names() -> None:
    g = load_guidance()
    internal = set(LABELS) | {"invite_code", "reason_tags", "image_support", "elapsed_ms"} | set(REASON_TAGS)
    for field, text in g.messages.items():
        words = set(re.findall(r"[a-z_]+", text.lower()))
        assert not {w for w in words if "_" in w} & internal, (field, text)
    # a refused note reads as a sentence about the note, with the check's reason
    with pytest.raises(InputError) as exc:
        validate_judgment("image", {"image_support": "yes", "note": "mail me at a@b.org"})
    msg = annotator_message(exc.value)
    assert msg.startswith("Your note looks like it contains an e-mail address") and "field" not in msg
    unknown = InputError("boom", field="something_internal")
    assert annotator_message(unknown) == g.messages["default"]


def test_incomplete_guidance_is_refused_naming_the_section(tmp_path: Path) -> None:
    data = yaml.safe_load(GUIDANCE_FILE.read_text(encoding="utf-8"))
    del data["categories"]["lighting"]
    bad = tmp_path / "guidance.yaml"
    bad.write_text(yaml.safe_dump(data), encoding="utf-8")
    with pytest.raises(InputError, match=r"field 'categories'.*lighting"):
        load_guidance(bad)
    data = yaml.safe_load(GUIDANCE_FILE.read_text(encoding="utf-8"))
    data["terms"]["atomic"].pop("example")
    bad.write_text(yaml.safe_dump(data), encoding="utf-8")
    with pytest.raises(InputError, match=r"terms.atomic"):
        load_guidance.__wrapped__(bad)
