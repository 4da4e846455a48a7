"""Seed 000 of the alt-text funnels: rules that checked no row read "not run" (never 0), CC3M's
unwanted-phrases filter (a reviewed lexicon), de-duplication against a CC3M URL list, and the
paper's side-by-side table and figure data for them."""

from __future__ import annotations

import json

import pytest

from capaudit.alttext.blocks import Item, build_block
from capaudit.alttext.funnel import build_pipeline, dedup_block, with_dedup
from capaudit.alttext.funnel_report import (NOT_RUN, check_note, check_status, funnel_rows, not_run_steps,
                                            side_by_side, side_by_side_rows)
from capaudit.alttext.params import AlttextParams
from capaudit.alttext.resources import DATA_DIR, data_file, unwanted_phrases
from capaudit.alttext.rows import RowSource
from capaudit.errors import InputError
from capaudit.paper.render import to_csv, to_html, to_latex
from capaudit.paper.stage_tables import build_table
from capaudit.summaries.table_rows import read_table_rows, write_table_rows

RAW = [  # URL + text only, as the img2dataset sample: no size, no format field, no image tags
    {"TEXT": "A dog on a bench in the park", "URL": "http://example.com/a.jpg"},
    {"TEXT": "A cat on a sofa in the room", "URL": "http://example.com/b.png"},
    {"TEXT": "A red car on the road at night", "URL": "http://example.com/c"},
]


def _item(text, **row):
    return Item(0, {"t": text, **row}, "test", text, text)


def _pipe(name):
    """A shipped pipeline with the rare-word rule off (3 rows: every word is rare)."""
    return build_pipeline(name, overrides={"rare_words": {"min_count": 1}})


def _run(pipe, rows):
    return pipe.run(RowSource.from_spec({"rows": lambda: iter(rows), "name": "raw"}), "TEXT")


# --- unwanted phrases ---------------------------------------------------------------------------------

def test_unwanted_phrases_lexicon_is_reviewed_data():
    d = data_file("unwanted_phrases.yaml")
    assert d["chosen"] is True and "ConceptualCaptions/download" in d["source"]   # published description, our list
    phrases, patterns = unwanted_phrases()
    assert len(phrases) == len(set(phrases)) > 20
    descriptive = {"photo", "image", "picture", "free", "wallpaper", "vector", "illustration", "art", "stock"}
    assert not [p for p in phrases if p in descriptive]          # no descriptive word on its own
    assert len(patterns) == 1 and patterns[0].search("sunset #beach") and not patterns[0].search("size # 3")


@pytest.mark.parametrize("text, hit", [
    ("Click to enlarge: a red car on the road", "click to enlarge"),
    ("Stock Photo - a man in a hat", "stock photo"),
    ("sunset over the sea #travel #beach", "#travel"),
    ("a dog on a beach", None),
    ("a photo of a stock exchange building", None),       # whole units only
    ("size # 3 shoes", None),                             # CC3M's digit mask is no hashtag
])
def test_unwanted_phrases_block(text, hit):
    b = build_block({"block": "unwanted_phrases"})
    assert b.match(text) == hit
    assert b.check(_item(text)) == ("drop" if hit else "keep")
    assert b.backend == "lexicon alttext/data/unwanted_phrases.yaml"


def test_unwanted_phrases_params_replace_or_extend():
    b = build_block({"block": "unwanted_phrases", "phrases": ["for sale"]})
    assert b.match("Click to enlarge") is None and b.match("House for sale") == "for sale"
    b = build_block({"block": "unwanted_phrases", "extra_phrases": ["for sale"]})
    assert b.match("Click to enlarge") == "click to enlarge" and b.match("House for sale") == "for sale"


def test_unwanted_phrases_in_the_cc3m_cascade_only():
    cc3m = [b.name for b in build_pipeline("cc3m").blocks]
    assert cc3m.index("unwanted_phrases") == cc3m.index("adult_words") + 1
    assert "unwanted_phrases" not in [b.name for b in build_pipeline("cc12m").blocks]


def test_bad_lexicon_names_the_file(monkeypatch):
    import capaudit.alttext.resources as res

    monkeypatch.setattr(res, "_load", lambda name: {"phrases": ["stock photo", "Stock  Photo"]})
    res.unwanted_phrases.cache_clear()
    try:
        with pytest.raises(InputError, match="repeats 'stock photo'") as e:
            res.unwanted_phrases()
        assert "unwanted_phrases.yaml" in str(e.value)
    finally:
        monkeypatch.undo()
        res.unwanted_phrases.cache_clear()
    assert (DATA_DIR / "unwanted_phrases.yaml").is_file()


# --- de-duplication against a URL list ------------------------------------------------------------------

def _urls(tmp_path, lines=("a caption\tHTTP://EXAMPLE.com/a.jpg#frag", "other\thttp://example.com/z.jpg")):
    p = tmp_path / "urls.tsv"
    p.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return {"label": "cc3m_validation", "url_field": "url", "file": str(p), "format": "tsv", "header": False,
            "columns": ["caption", "url"]}


def test_dedup_step_is_counted_with_the_bridge_normalisation(tmp_path):
    b = dedup_block(_urls(tmp_path))
    assert b.name == "url_dedup_cc3m_validation" and "2 normalised URLs" in b.backend
    rows = RAW + [{"TEXT": "A cat in a box on a table"}]                     # no URL: unchecked
    f = _run(with_dedup(_pipe("cc12m"), b), rows)
    step = f.rows[1]
    assert (step.rule, step.rows_in, step.dropped, step.kept, step.unchecked) == (
        "url_dedup_cc3m_validation", 4, 1, 3, 1)               # HTTP://EXAMPLE.com/a.jpg#frag == http://example.com/a.jpg
    b2 = dedup_block(_urls(tmp_path, ("c\thttp://example.com/A.jpg",)))    # path case still tells URLs apart
    assert _run(with_dedup(_pipe("cc12m"), b2), RAW).rows[1].dropped == 0


def test_dedup_bad_lists(tmp_path):
    spec = _urls(tmp_path)
    with pytest.raises(InputError, match="no URL field 'link'"):
        dedup_block({**spec, "url_field": "link"})
    empty = tmp_path / "empty.jsonl"
    empty.write_text("")
    with pytest.raises(InputError):
        dedup_block({"label": "x", "file": str(empty)})
    with pytest.raises(InputError, match="row source mapping"):
        build_block({"block": "url_dedup"})


@pytest.mark.parametrize("dedup, msg", [
    ("cc3m.tsv", "alttext.filters.dedup: must be a mapping"),
    ({"label": "a b", "file": "x.tsv"}, "label must be a name"),
    ({"label": "cc3m", "url_field": "url"}, "needs a row source"),
    ({"label": "cc3m", "file": "x.tsv", "url_field": 3}, "url_field must be a field name"),
])
def test_dedup_params_refused_in_one_line(dedup, msg):
    with pytest.raises(InputError, match=msg):
        AlttextParams.from_section({"filters": {"dedup": dedup}}, "p.yaml")


def test_demo_params_dedup_against_the_cc3m_validation_split():
    import yaml

    d = yaml.safe_load(open("params/demo.yaml", encoding="utf-8"))["alttext"]["filters"]["dedup"]
    assert d["dataset"] == "cc3m_validation" and d["label"] == "cc3m_validation" and d["url_field"] == "url"
    assert AlttextParams.from_section({"filters": {"dedup": d}}).filters.dedup == d


# --- "not run" ------------------------------------------------------------------------------------------

def test_image_rules_without_images_read_not_run():
    f = _run(_pipe("cc12m"), RAW)
    assert not_run_steps(f) == ["image_min_side", "image_aspect_ratio", "image_text_overlap"]
    fmt = next(r for r in f.rows if r.rule == "image_format")
    assert (fmt.rows_in, fmt.dropped, fmt.unchecked) == (3, 1, 1)                 # .png dropped; no extension
    assert check_status(fmt.rows_in, fmt.unchecked) == "partly" and check_status(0, 0) is None
    by_rule = {r["rule"]: r for r in funnel_rows("raw", f)}
    assert by_rule["image_min_side"]["status"] == NOT_RUN and by_rule["word_count"]["status"] == "all"
    side = {r["rule"]: r for r in side_by_side_rows({"cc12m": f})}
    assert side["image_min_side"] == {"rule": "image_min_side", "cc12m dropped": None, "cc12m kept": None,
                                      "cc12m checked": NOT_RUN}                  # never 0
    assert side["image_format"]["cc12m checked"] == "2 of 3" and side["image_format"]["cc12m dropped"] == 1
    assert side["word_count"]["cc12m checked"] == "all"
    df = side_by_side({"cc12m": f})
    assert str(df["cc12m kept"].dtype) == "Int64" and df["cc12m checked"].tolist()[:3] == ["all", "2 of 3", NOT_RUN]
    note = check_note("raw", {"cc12m": f}, RAW[0])
    assert "image_min_side, image_aspect_ratio did not run (no row had an image width and height)" in note
    assert "image_text_overlap did not run (no row had image tags)" in note
    assert "image_format checked 2 of 3 rows from the URL path extension only" in note
    assert "URL path extension" not in check_note("raw", {"cc12m": f}, {**RAW[0], "format": "jpeg"})


def test_side_by_side_table_prints_not_run(tmp_path):
    f3, f12 = _run(_pipe("cc3m"), RAW), _run(_pipe("cc12m"), RAW)
    rows = side_by_side_rows({"cc3m": f3, "cc12m": f12})
    p = write_table_rows(tmp_path, "alttext_funnel_raw", "alttext_filters", rows, function="x", inputs=["in"],
                         meta={"note": "offline backends", "corpus": "raw", "pipelines": ["cc3m", "cc12m"]})
    t = build_table({**read_table_rows(p), "path": str(p)}, run_dir=tmp_path)
    tex = to_latex(t)
    assert r"rule & cc3m dropped & cc3m kept & cc3m checked & cc12m dropped & cc12m kept & cc12m checked \\" in tex
    assert r"image\_min\_side & -- & -- & not run & -- & -- & not run \\" in tex
    assert r"capitalisation & " in tex and "% --: the rule is not part of that cascade, or it checked no row" in tex
    csv = to_csv(t).splitlines()
    assert "image_min_side,,,not run,,,not run" in csv
    assert "not run" in to_html(t)


def test_figure_data_marks_not_run(tmp_path):
    from capaudit.paper.alttext_figures import plot_funnels

    plot_funnels({"raw": {"cc12m": _run(_pipe("cc12m"), RAW)}}, tmp_path / "fig")
    data = json.loads((tmp_path / "fig.table.json").read_text())
    rows = {r["step"]: r for r in data["rows"]}
    assert rows["image_min_side"]["rows"] is None and rows["image_min_side"]["checked"] == "not run"
    assert rows["word_count"]["checked"] == rows["word_count"]["input_rows"] - 1


# --- coverage table vs the study's --------------------------------------------------------------------

def test_coverage_note_names_vocabulary_and_split_differences():
    from capaudit.alttext.coverage import coverage_of_texts
    from capaudit.alttext.coverage_report import comparison_note
    from capaudit.alttext.vocab import load_vocabulary, nocaps_ood_accounting

    c = coverage_of_texts([("a goldfish in a bowl", None), ("a tiger on grass", None)],
                          [load_vocabulary("nocaps_ood")])["nocaps_ood"]
    acct = nocaps_ood_accounting()
    note = comparison_note(acct, {"cc3m_validation": {"nocaps_ood": c}, "alttext_raw": {"nocaps_ood": c}})
    assert f"nocaps_ood here = the {acct['nocaps_ood']} Open Images V7 boxable classes" in note
    assert "the CC12M study used 394 nocaps out-of-domain classes" in note
    assert "cc3m_validation = the CC3M validation split (2 captions), not the full 3.3M-caption training set" in note
    assert "alttext_raw = 2 raw web alt-texts" in note and "not CC12M" in note
    assert note.endswith("published values not shown beside ours (none found in a citable source: README non-goals)")


def test_dedup_step_sharded_is_byte_identical(tmp_path):
    from capaudit.alttext.file_runs import filter_file

    rows = [{"TEXT": f"A dog number {i} on a bench in the park", "URL": f"http://example.com/{'a' if i % 5 == 0 else i}.jpg"}
            for i in range(40)]
    inp = tmp_path / "in.jsonl"
    inp.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    outs = {}
    for label, kw in (("one", {}), ("sharded", {"workers": 2, "shards": 3})):
        pipe = with_dedup(_pipe("cc12m"), dedup_block(_urls(tmp_path)))
        d = tmp_path / label
        f = filter_file({"file": str(inp)}, "TEXT", pipe, d / "kept.jsonl", d / "funnel.csv", d / "dropped.jsonl",
                        batch_size=8, **kw)
        outs[label] = [(d / n).read_bytes() for n in ("kept.jsonl", "funnel.csv", "dropped.jsonl")]
        assert f.rows[1].rule == "url_dedup_cc3m_validation" and f.rows[1].dropped == 8   # every fifth is a.jpg
    assert outs["one"] == outs["sharded"]
