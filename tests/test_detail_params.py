"""``DetailParams``: the detail stage's only defaults, read from the ``detail:`` params section (an
unknown key or a wrong type is one line naming the file, section and key) or from the
``capaudit detail score`` options; the stage's typed result keeps dict-style access."""

from __future__ import annotations

import dataclasses

import pytest

from capaudit.cli import build_parser
from capaudit.detail.params import (SCORE_GROUNDING, SCORE_ITM, DetailParams, SelectionParams, SubgraphParams,
                                    SurfaceSpec)
from capaudit.errors import InputError


def test_defaults_are_the_params_class():
    p = DetailParams.from_section(None, "p.yaml")
    assert p == DetailParams()
    assert p.parser == "claims" and p.grounding == ("coco_mini",) and p.itm == "annotation_precision"
    assert p.relation_ends == "subject" and p.length_unit == "lex" and not p.sharded and p.offline_parser
    assert [s.name for s in p.surfaces] == ["coco_human"] and p.surfaces[0].source == "coco_mini"
    assert (p.bootstrap.n_resamples, p.bootstrap.seed, p.bootstrap.confidence) == (2000, 1477, 0.95)
    assert (p.selection.k, p.selection.t, p.selection.seed) == (0.6, 0.4, 0)
    assert (p.subgraphs.n_captions, p.subgraphs.fractions, p.subgraphs.tolerance) == (100, (0.2, 0.4, 0.6, 0.8), 0.05)
    assert p.figure_bins == 5
    with pytest.raises(dataclasses.FrozenInstanceError):
        p.parser = "llm"  # type: ignore[misc]


def test_section_values_typed():
    p = DetailParams.from_section({
        "grounding": ["coco:a.json", "coco:b.json"], "itm": "none", "relation_ends": "both", "workers": 2,
        "surfaces": ["coco_human",
                     {"name": "r", "path": "{artifacts}/r.jsonl", "id_field": None, "on_missing": "skip"}],
        "bootstrap": {"n_resamples": 50}, "selection": {"k": 300, "t": 0.5, "strategies": ["full", "itm_cd"]},
        "subgraphs": {"fractions": [0.5], "measures": ["aod"]}, "figures": {"bins": 4}}, "p.yaml")
    assert p.grounding == ("coco:a.json", "coco:b.json") and p.itm == "none" and p.sharded
    assert p.surfaces[1] == SurfaceSpec("r", "r", path="{artifacts}/r.jsonl", id_field=None, on_missing="skip")
    assert isinstance(p.selection.k, int) and p.selection.k == 300 and p.selection.t == 0.5  # as written
    assert p.selection.strategies == ("full", "itm_cd") and p.subgraphs.fractions == (0.5,)
    assert p.bootstrap.to_dict() == {"n_resamples": 50, "seed": 1477, "confidence": 0.95, "unit": "image clusters"}
    assert p.figure_bins == 4


@pytest.mark.parametrize("section, words", [
    ({"parsr": "claims"}, ["p.yaml", "detail.parsr", "unknown key"]),
    ({"relation_ends": "half"}, ["p.yaml", "detail.relation_ends", "half"]),
    ({"parser": "gpt"}, ["p.yaml", "detail.parser", "gpt"]),
    ({"parser": "llm"}, ["p.yaml", "detail.url", "needs 'url' and 'model'"]),
    ({"parser": "llm", "url": "http://x", "model": "m", "workers": 2}, ["p.yaml", "detail.engine", "not sharded"]),
    ({"workers": "two"}, ["p.yaml", "detail.workers"]),
    ({"bootstrap": {"n_resamples": "many"}}, ["p.yaml", "detail.bootstrap.n_resamples"]),
    ({"bootstrap": {"resamples": 5}}, ["p.yaml", "detail.bootstrap.resamples", "unknown key"]),
    ({"selection": {"k": 0}}, ["p.yaml", "detail.selection.k"]),
    ({"selection": {"t": 1.5}}, ["p.yaml", "detail.selection.t"]),
    ({"selection": {"strategies": ["best"]}}, ["p.yaml", "detail.selection.strategies", "best"]),
    ({"subgraphs": {"fractions": [1.2]}}, ["p.yaml", "detail.subgraphs.fractions"]),
    ({"subgraphs": {"measures": ["cd"]}}, ["p.yaml", "detail.subgraphs.measures", "cd"]),
    ({"figures": {"bins": 0}}, ["p.yaml", "detail.figures.bins"]),
    ({"surfaces": [{"label": "x"}]}, ["p.yaml", "detail.surfaces item 1", "'name'"]),
    ({"surfaces": [{"name": "s"}]}, ["p.yaml", "detail surface 's'", "'path'"]),
    ({"surfaces": [{"name": "s", "path": "x.jsonl", "caption": "c"}]}, ["p.yaml", "detail.surfaces[1].caption"]),
])
def test_bad_section_refused_in_one_line(section, words):
    with pytest.raises(InputError) as exc:
        DetailParams.from_section(section, "p.yaml")
    msg = str(exc.value)
    assert "\n" not in msg and all(w in msg for w in words), msg


def test_cli_defaults_are_the_params():
    parser = build_parser(["capaudit.detail.cli"])
    args = parser.parse_args(["detail", "score", "--input", "c.jsonl", "--out", "o.jsonl"])
    p = DetailParams.from_args(args)
    assert p.grounding == SCORE_GROUNDING and p.itm == SCORE_ITM and p.parser == DetailParams.parser
    assert (p.relation_ends, p.length_unit, p.concurrency, p.timeout, p.retries, p.dialect, p.max_tokens) == (
        DetailParams.relation_ends, DetailParams.length_unit, DetailParams.concurrency, DetailParams.timeout,
        DetailParams.retries, DetailParams.dialect, DetailParams.max_tokens)
    assert not p.sharded
    args = parser.parse_args(["detail", "subgraphs", "--scores", "s.jsonl", "--out", "o.jsonl"])
    assert (tuple(args.fractions), args.tolerance, args.seed) == (SubgraphParams.fractions, SubgraphParams.tolerance,
                                                                 SubgraphParams.seed)
    args = parser.parse_args(["detail", "select", "--scores", "s.jsonl", "--out", "o.jsonl"])
    assert args.seed == SelectionParams.seed


def test_result_is_typed_with_dict_access(tmp_path):
    import pandas as pd

    from capaudit.detail.stage import DetailResult

    names = [f.name for f in dataclasses.fields(DetailResult)]
    r = DetailResult(**{n: (pd.DataFrame() if n.endswith("_table") else n) for n in names})
    assert r["manifest"] == "manifest" and "surface_table" in r and set(r.to_dict()) == set(names)
    with pytest.raises(KeyError):
        r["nope"]
