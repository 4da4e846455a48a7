"""Schema validation, task rules, lenient parsing of model output."""

from __future__ import annotations

import pytest

from capaudit.io.canonical_json import loads_lenient
from capaudit.llm.validate import TaskRules, ValidatorCache, check_output, validate

SCHEMA = {
    "type": "object",
    "properties": {
        "caption_id": {"type": "string"},
        "claimed_units": {"type": "array", "maxItems": 2, "items": {
            "type": "object", "properties": {"category": {"enum": ["object", "count"]},
                                             "unit": {"type": "string", "maxLength": 5}},
            "required": ["category", "unit"], "additionalProperties": False}},
    },
    "required": ["caption_id", "claimed_units"],
    "additionalProperties": False,
}


def test_valid_and_invalid_messages():
    assert validate({"caption_id": "a", "claimed_units": [{"category": "object", "unit": "dog"}]}, SCHEMA) == []
    errs = validate({"caption_id": 1, "claimed_units": [{"category": "cat", "unit": "toolong"}], "x": 0}, SCHEMA)
    assert "$: Additional properties are not allowed ('x' was unexpected)" in errs
    assert "caption_id: 1 is not of type 'string'" in errs
    assert "claimed_units/0/category: 'cat' is not one of ['object', 'count']" in errs
    assert "claimed_units/0/unit: 'toolong' is too long" in errs
    assert len(errs) == 4
    assert validate([], SCHEMA) == ["$: [] is not of type 'object'"]


def test_invalid_schema_is_a_clear_error():
    with pytest.raises(ValueError, match="invalid JSON schema"):
        validate({}, {"type": "strin"})


def test_cache_reuses_compiled_validator():
    cache = ValidatorCache(size=2)
    a = cache.get(SCHEMA)
    assert cache.get(dict(SCHEMA)) is a  # equal schema, different object
    cache.get({"type": "string"})
    cache.get({"type": "integer"})
    assert cache.get(dict(SCHEMA)) is not a  # evicted (LRU of 2)


def test_task_rules_registry_and_check_output():
    rules = TaskRules(providers=())

    def no_dupes(parsed, request):
        units = [u["unit"] for u in parsed["claimed_units"]]
        return ["duplicate unit"] if len(units) != len(set(units)) else []

    rules.register("t", no_dupes)
    rules.register("t", no_dupes)  # idempotent
    assert len(rules.rules("t")) == 1
    req = {"task": "t", "schema": SCHEMA}
    dup = {"caption_id": "a", "claimed_units": [{"category": "object", "unit": "dog"}] * 2}
    assert check_output(dup, req, rules=rules) == ("rule", "duplicate unit")
    assert check_output({"caption_id": 3, "claimed_units": []}, req, rules=rules)[0] == "schema"
    assert check_output({"caption_id": "a", "claimed_units": []}, req, rules=rules) == (None, None)
    rules.register("t", lambda p, r: 1 / 0)
    assert "raised ZeroDivisionError" in rules.errors("t", dup, req)[-1]


def test_rule_providers_imported_lazily_and_missing_ones_ignored():
    rules = TaskRules(providers=("capaudit.no_such_module_xyz", "json"))
    assert rules.rules("unknown-task") == []


def test_loads_lenient():
    assert loads_lenient('{"a": "line\nbreak"}') == {"a": "line\nbreak"}  # raw control char (§2.3)
    assert loads_lenient('```json\n{"a": 1}\n```') == {"a": 1}
    assert loads_lenient('  {"a": 2}  ') == {"a": 2}
    with pytest.raises(ValueError):
        loads_lenient('{"a": ')
    with pytest.raises(ValueError):
        loads_lenient('Sure! {"a": 1}')
