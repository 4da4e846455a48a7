"""Funnels: counts add up, first-rule attribution, two passes, outputs, shipped pipelines, the CLI,
streaming without holding rows (issue 14)."""

from __future__ import annotations

import csv
import json

import pytest
import yaml

from capaudit.alttext.file_runs import filter_file
from capaudit.alttext.funnel import EMPTY_RULE, build_pipeline
from capaudit.alttext.resources import DATA_DIR, check_block_docs, shipped_pipelines
from capaudit.alttext.rows import RowSource
from capaudit.cli import main
from capaudit.errors import InputError

CHEAP = [
    {"block": "image_min_side", "min_side": 400},
    {"block": "word_count", "min_words": 3, "max_words": 8},
    {"block": "rare_words", "min_count": 2},
    {"block": "digit_substitution"},
]

ROWS = [
    {"t": "a red dog on grass", "width": 640, "height": 480},   # kept
    {"t": "a red dog", "width": 300, "height": 480},            # image_min_side
    {"t": "dog", "width": 640, "height": 480},                  # word_count
    {"t": "a red zebra 42 times"},                              # rare_words (zebra, times once)
    {"t": None},                                                # empty_text
    {"t": "a red dog on grass 2015"},                           # kept (no dims: unchecked), digits -> #
    {"t": "   "},                                               # empty_text
]


def source(rows):
    return RowSource.from_spec({"rows": lambda: iter(rows), "name": "hand"})


def test_funnel_counts_add_up_and_first_rule_wins(tmp_path):
    kept, dropped = [], []
    f = build_pipeline(CHEAP, name="cheap").run(source(ROWS), "t", batch_size=2,
                                                on_kept=lambda it: kept.append((it.index, it.text)),
                                                on_dropped=lambda it, r: dropped.append((it.index, r)))
    f.check()
    by_rule = {r.rule: r for r in f.rows}
    assert [r.rule for r in f.rows] == [EMPTY_RULE, "image_min_side", "word_count", "rare_words", "digit_substitution"]
    assert (f.input_rows, by_rule[EMPTY_RULE].dropped, by_rule["image_min_side"].dropped,
            by_rule["word_count"].dropped, by_rule["rare_words"].dropped, f.kept) == (7, 2, 1, 1, 1, 2)
    assert by_rule["image_min_side"].unchecked == 2          # rows 3 and 5 have no width/height
    assert by_rule["digit_substitution"].changed == 1
    assert kept == [(0, "a red dog on grass"), (5, "a red dog on grass ####")]
    assert dropped == [(1, "image_min_side"), (2, "word_count"), (3, "rare_words"), (4, EMPTY_RULE), (6, EMPTY_RULE)]
    assert sum(r.dropped for r in f.rows) + f.kept == f.input_rows


def test_filter_file_writes_kept_dropped_funnel_atomically(tmp_path):
    src = tmp_path / "in.jsonl"
    src.write_text("".join(json.dumps(r) + "\n" for r in ROWS), encoding="utf-8")
    out, fun, drop, man = (tmp_path / n for n in ("kept.jsonl", "funnel.csv", "dropped.jsonl", "m.json"))
    f = filter_file({"file": str(src)}, "t", CHEAP, out, fun, drop, manifest_path=man)
    kept = [json.loads(l) for l in out.read_text().splitlines()]
    assert [k["t"] for k in kept] == ["a red dog on grass", "a red dog on grass ####"]
    assert kept[1]["alttext_original"] == "a red dog on grass 2015" and kept[1]["alttext_row"] == 5
    dropped = [json.loads(l) for l in drop.read_text().splitlines()]
    assert [d["dropped_by"] for d in dropped] == ["image_min_side", "word_count", "rare_words", EMPTY_RULE, EMPTY_RULE]
    rows = list(csv.DictReader(fun.open()))
    assert [int(r["kept"]) for r in rows] == [5, 4, 3, 2, 2] and rows[0]["rows_in"] == "7"
    assert json.loads(man.read_text())["funnel"]["kept"] == f.kept == 2
    # a bad field is an error naming file, line and field; nothing is written
    with pytest.raises(InputError, match=r"in\.jsonl: line 1.*'caption'"):
        filter_file({"file": str(src)}, "caption", CHEAP, tmp_path / "k2.jsonl", tmp_path / "f2.csv")
    assert not (tmp_path / "k2.jsonl").exists() and not (tmp_path / "f2.csv").exists()


def test_shipped_pipelines_are_exactly_the_issue_lists_and_documented():
    p = shipped_pipelines()
    cc3m = {b["block"]: b for b in p["cc3m"]}
    cc12m = {b["block"]: b for b in p["cc12m"]}
    assert cc3m["image_format"]["allowed"] == ["jpeg"] and cc3m["image_min_side"]["min_side"] == 400
    assert cc3m["image_aspect_ratio"]["max_ratio"] == 2.0 and cc12m["image_aspect_ratio"]["max_ratio"] == 2.5
    assert cc3m["rare_words"]["min_count"] == 5 and cc12m["rare_words"]["min_count"] == 20
    # CC3M Sec. 3: no determiner, no noun or no preposition -> dropped; CC12M Sec. 3 keeps noun + determiner
    assert cc3m["pos_required"]["require"] == ["determiner", "noun", "preposition"]
    assert cc12m["pos_required"]["require"] == ["determiner", "noun"]
    assert (cc12m["word_count"]["min_words"], cc12m["word_count"]["max_words"]) == (3, 256)
    assert cc12m["word_repetition"]["max_fraction"] == 0.2 and cc12m["word_repetition"]["ignore_stop_words"] is False
    for gone in ("capitalisation", "unique_word_ratio", "hypernymise", "digit_substitution", "time_span_deletion"):
        assert gone in cc3m and gone not in cc12m
    assert cc12m["person_substitution"]["token"] == "<PERSON>" and "person_substitution" not in cc3m
    assert {"english", "sentiment", "adult_words", "image_text_overlap"} <= set(cc3m)
    assert check_block_docs(p) == []
    for name in ("cc3m", "cc12m"):
        pipe = build_pipeline(name)
        assert pipe.needs == {"pos", "ner"}
        kinds = [b.kind for b in pipe.blocks]
        assert kinds == sorted(kinds, key=lambda k: k == "transform")   # filters first, then transforms


def test_data_files_hold_only_strings_in_lists():
    # YAML 1.1 reads bare on/off/yes/no as booleans; every list item of the data files must be text or a number
    for path in DATA_DIR.glob("*.yaml"):
        def walk(x, where):
            if isinstance(x, dict):
                for k, v in x.items():
                    walk(v, f"{where}.{k}")
            elif isinstance(x, list):
                for v in x:
                    assert not isinstance(v, bool), f"{path.name}{where}: boolean list item {v!r}"
                    walk(v, where)
        walk(yaml.safe_load(path.read_text(encoding="utf-8")), "")


def test_overrides_and_bad_pipelines(tmp_path):
    pipe = build_pipeline("cc12m", overrides={"rare_words": {"min_count": 3}})
    assert next(b for b in pipe.blocks if b.name == "rare_words").min_count == 3
    with pytest.raises(InputError, match="unknown block"):
        build_pipeline("cc12m", overrides={"nope": {"x": 1}})
    with pytest.raises(InputError, match="not a shipped pipeline"):
        build_pipeline("cc99")
    with pytest.raises(InputError, match="unique"):
        build_pipeline([{"block": "word_count"}, {"block": "word_count"}])
    y = tmp_path / "mine.yaml"
    y.write_text(yaml.safe_dump([{"block": "word_count", "min_words": 1, "max_words": 3}]))
    assert build_pipeline(str(y)).name == "mine"


def test_cli_alttext_filter_contract(tmp_path, capsys):
    src = tmp_path / "in.tsv"
    src.write_text("caption\turl\nA dog runs on the beach with a ball\thttp://x.com/a.jpg\n"
                   "A dog runs on the beach with a ball\thttp://x.com/b.png\n", encoding="utf-8")
    out, fun = tmp_path / "KEPT.jsonl", tmp_path / "FUNNEL.csv"
    rc = main(["alttext", "filter", "--input", str(src), "--text-field", "caption", "--pipeline", "cc12m",
               "--out", str(out), "--funnel", str(fun), "--set", "rare_words.min_count=1"])
    assert rc == 0
    rows = list(csv.DictReader(fun.open()))
    assert rows[0]["rule"] == EMPTY_RULE and rows[1]["rule"] == "image_format" and rows[1]["dropped"] == "1"
    assert len(out.read_text().splitlines()) == 1
    assert (tmp_path / "KEPT.dropped.jsonl").exists()
    rc = main(["alttext", "filter", "--input", str(src), "--text-field", "nope", "--pipeline", "cc3m",
               "--out", str(out), "--funnel", str(fun)])
    assert rc == 1 and "nope" in capsys.readouterr().err


class _Row(dict):
    """A row that counts how many of its kind are alive."""

    live = 0
    peak = 0

    def __init__(self, *a, **k):
        super().__init__(*a, **k)
        _Row.live += 1
        _Row.peak = max(_Row.peak, _Row.live)

    def __del__(self):
        _Row.live -= 1


def test_streaming_does_not_hold_rows():
    """100,000 generated rows, two passes: at most about one batch of rows is alive at any time
    (the benchmark runs 10M rows and reports the peak RSS)."""
    vocab = ["w" + "".join(chr(97 + int(d)) for d in str(i)) for i in range(500)]   # letters only

    def gen(n):
        for i in range(n):
            yield _Row(t=f"a {vocab[i % 500]} and {vocab[(i * 7) % 500]} number {i}")

    pipe = build_pipeline(CHEAP, name="cheap")
    kept = [0]
    _Row.live = _Row.peak = 0
    f = pipe.run(RowSource.from_spec({"rows": lambda: gen(100_000)}), "t", batch_size=256,
                 on_kept=lambda it: kept.__setitem__(0, kept[0] + 1))
    assert f.input_rows == 100_000 and f.kept == kept[0] == 100_000
    assert _Row.peak <= 256 + 4, f"{_Row.peak} rows alive at once"
    rare = next(b for b in pipe.blocks if b.name == "rare_words")
    assert rare.table_size() == 503          # a, and, number + 500 words: the only state kept across rows


def test_max_rows_must_be_positive():
    from capaudit.alttext.rows import RowSource

    rows = lambda: iter([{"t": "a"}, {"t": "b"}, {"t": "c"}])  # noqa: E731
    assert [r["t"] for r, _ in RowSource.from_spec({"rows": rows, "max_rows": 2})] == ["a", "b"]
    for bad in (0, -1, 1.5, True, "2"):
        with pytest.raises(InputError, match="max_rows"):
            RowSource.from_spec({"rows": rows, "max_rows": bad})
