"""The fast survey is the same survey: vectorised tokenisation equals ``LEX_RE.findall`` on every
text of the data registry (multilingual included), the pre-filtered violation catalog equals
brute force, and text-stats gives byte-identical sorted-key JSON whatever the engine, the number
of workers or shards (spill mode: exact integers, same JSON for any sharding; HLL: documented
error)."""

from __future__ import annotations

import csv
import json
import random
import re
from itertools import chain
from pathlib import Path

import numpy as np
import pytest

from capaudit.engine import list_shards, summary_json
from capaudit.text.lexical import LEX_RE
from capaudit.text.lexkernel import tokenize_batch
from capaudit.text.survey import SurveyConfig, survey_captions, survey_files
from capaudit.text.violations import ALL_CODES, CATALOG, REPETITION_CODE, ViolationChecker, _has_repetition, opener_patterns


def _strings(obj, out):
    if isinstance(obj, str):
        if obj.strip():
            out.append(obj)
    elif isinstance(obj, dict):
        for v in obj.values():
            _strings(v, out)
    elif isinstance(obj, list):
        for v in obj:
            _strings(v, out)


@pytest.fixture(scope="module")
def registry_texts(data_dir):
    """Every string of every text file in the data registry (JSON, JSONL, CSV/TSV, txt, Parquet)."""
    from capaudit.data import registry

    out: list = []
    for e in registry.entries(kind="file"):
        p = data_dir / e.dataset / e.path
        if not p.exists():
            continue
        suf = p.suffix.lower()
        if suf == ".jsonl":
            for line in p.read_text(encoding="utf-8").splitlines():
                if line.strip():
                    _strings(json.loads(line), out)
        elif suf == ".json":
            _strings(json.loads(p.read_text(encoding="utf-8")), out)
        elif suf in (".csv", ".tsv"):
            with open(p, encoding="utf-8", newline="") as fh:
                for row in csv.reader(fh, delimiter="\t" if suf == ".tsv" else ","):
                    out += [c for c in row if c.strip()]
        elif suf == ".txt":
            out += [x for x in p.read_text(encoding="utf-8").splitlines() if x.strip()]
        elif suf == ".parquet":
            import pyarrow.parquet as pq

            t = pq.read_table(p)
            for name in t.column_names:
                col = t.column(name)
                if str(col.type) == "string":
                    out += [x for x in col.to_pylist() if isinstance(x, str) and x.strip()]
    out = list(dict.fromkeys(out))
    assert len(out) > 100_000 and sum(not s.isascii() for s in out) > 1_000
    return out


def test_tokenize_batch_equals_python_regex_on_the_registry(registry_texts):
    extra = ["a'b'c d''e 'x y' z'", "", "!!!", "ÀÉ dog's", "x_y", "don't", "a\nb", "abcdefgh" * 9,
             "café’s naïve ²³ ١٢٣ 日本語テキスト x’y a'é", "İstanbul ΣΊΣΥΦΟΣ ǅ ﬁ", "\u0130'\u0131"]
    texts = registry_texts + extra
    for lower_units, prepared in ((False, [t.lower() for t in texts]), (True, texts)):
        for start in range(0, len(prepared), 60_000):
            batch = prepared[start:start + 60_000]
            lens, codes, vocab = tokenize_batch(batch, lower_units=lower_units)
            want = [LEX_RE.findall(t) for t in batch]
            if lower_units:
                want = [[m.lower() for m in w] for w in want]
            assert lens.tolist() == [len(w) for w in want]
            words = [vocab[c] for c in codes.tolist()]
            assert words == list(chain.from_iterable(want))
            first = {}
            for w in words:  # codes number units by first appearance
                first.setdefault(w, len(first))
            assert codes.tolist() == [first[w] for w in words]


def _brute(text: str) -> np.ndarray:
    row = np.zeros(len(ALL_CODES), bool)
    for code, (_, pats) in CATALOG.items():
        comp = opener_patterns() if code == "J_meta_statement" else [re.compile(p, re.M) for p in pats]
        row[ALL_CODES.index(code)] = any(p.search(text) for p in comp)
    row[ALL_CODES.index(REPETITION_CODE)] = _has_repetition(text)
    return row


def test_violation_matrix_equals_brute_force(registry_texts):
    rng = random.Random(0)
    sample = rng.sample(registry_texts, 6000)
    # prefix windows cut at lexical-unit ends, as the survey makes them
    windows = []
    for t in sample[:1500]:
        ends = [m.end() for m in LEX_RE.finditer(t)]
        windows += [t[:e] for e in ends[3::7]]
    pieces = ["The image shows", "this photo captures", "In this picture", "we can see ", "\n", "**", "- ", "# ",
              "[12, 34, 56, 78]", "TEXT: ", "<bbox>", "</ref>", "<think>", "the user wants", "let me ", "as requested",
              "per the instructions", "bounding box", "confidence: 0.9", "overlay", "bbox_2d", '"type": "bbox"',
              "foo_bar_baz", "_", "1. ", "stage 3", "resolution: 1024", "caption style:", "\u0130", "\u0131",
              "\u017ftage 2", "\u212a", "é", " ", "a b c d e ", "[x](y)", "detection box", "\u00a0", "١. "]
    fuzz = ["".join(rng.choice(pieces) for _ in range(rng.randint(1, 10))) for _ in range(3000)]
    fuzz += [" ".join(["a b c d e"] * k) + tail for k in (9, 10) for tail in ("", " a", "\nx")]
    texts = sample + windows + fuzz
    got = ViolationChecker().matrix(texts)
    want = np.array([_brute(t) for t in texts])
    bad = np.flatnonzero((got != want).any(axis=1))
    assert bad.size == 0, [texts[i][:80] for i in bad[:5]]
    assert want[:, ALL_CODES.index("J_meta_statement")].sum() > 20


# ---- one survey whatever the engine -----------------------------------------------------------------

@pytest.fixture(scope="module")
def corpus_file(tmp_path_factory, registry_texts):
    rng = random.Random(1)
    pool = [t for t in registry_texts if 3 <= len(t) <= 3000]
    path = tmp_path_factory.mktemp("survey") / "captions.jsonl"
    with open(path, "w", encoding="utf-8") as fh:
        for _ in range(6000):
            fh.write(json.dumps({"caption": rng.choice(pool)}, ensure_ascii=False) + "\n")
        fh.write(json.dumps({"caption": " ".join(["a b c d e"] * 11) + " x_y_z"}) + "\n")
        fh.write(json.dumps({"caption": "The image shows " + "word " * 300}) + "\n")
    return path


CFG = SurveyConfig()


def test_survey_files_local_engine_identical_to_streaming(corpus_file):
    caps = [json.loads(line)["caption"].strip() for line in open(corpus_file, encoding="utf-8")]
    base = summary_json(survey_captions(caps, CFG).finalize())
    assert summary_json(survey_captions(caps, CFG, workers=2, chunk_size=777).finalize()) == base
    for shards, workers in ((1, 1), (2, 2), (64, 2)):
        got = survey_files(corpus_file, CFG, engine="local", workers=workers, shards=shards, caption_field="caption")
        assert summary_json(got.finalize()) == base, (shards, workers)


def test_spill_mode_exact_and_shard_independent(corpus_file, tmp_path):
    mem = survey_files(corpus_file, CFG, shards=4, caption_field="caption").finalize()
    spilled = [survey_files(corpus_file, CFG, shards=k, caption_field="caption", spill_dir=str(tmp_path),
                            max_keys=5_000).finalize() for k in (3, 16)]
    assert summary_json(spilled[0]) == summary_json(spilled[1])
    s = spilled[0]
    for name, blk in mem["budgets"].items():
        b = s["budgets"][name]
        for key in ("eligibility", "truncation_rate", "opener_rate", "violation_rate", "distinct", "rep",
                    "ngram_top_k_mass", "prefix_top_mass", "violation_code_rate"):
            assert b.get(key) == blk.get(key), (name, key)
        assert b["prefix_content"]["entropy"] == pytest.approx(blk["prefix_content"]["entropy"], rel=1e-12)
        assert sorted(c for _, c in b["prefix_content_top_10"]) == sorted(c for _, c in blk["prefix_content_top_10"])
    assert s["dedup"] == mem["dedup"]
    assert not any(Path(tmp_path).iterdir())  # spill folders are removed


def test_hll_mode_distinct_within_documented_error(corpus_file):
    from capaudit.engine.hll import HyperLogLog

    exact = survey_files(corpus_file, CFG, shards=2, caption_field="caption").finalize()
    approx_cfg = SurveyConfig(distinct="hll")
    approx = survey_files(corpus_file, approx_cfg, shards=2, caption_field="caption").finalize()
    again = survey_files(corpus_file, approx_cfg, shards=7, workers=2, caption_field="caption").finalize()
    assert summary_json(approx) == summary_json(again)  # sketches merge exactly
    se = HyperLogLog.relative_error(approx_cfg.hll_precision)
    for name, blk in exact["budgets"].items():
        for n, d in blk["distinct"].items():
            assert approx["budgets"][name]["distinct"][n] == pytest.approx(d, rel=4 * se), (name, n)
        assert approx["budgets"][name]["ngram_top_k_mass"] == {"1": None, "2": None, "3": None}
        assert approx["budgets"][name]["rep"] == blk["rep"] and approx["budgets"][name]["prefix_top_mass"] == blk["prefix_top_mass"]


def test_survey_files_reads_parquet_shards(tmp_path, corpus_file):
    pa = pytest.importorskip("pyarrow")
    import pyarrow.parquet as pq

    caps = [json.loads(line)["caption"] for line in open(corpus_file, encoding="utf-8")]
    pq.write_table(pa.table({"caption": caps}), tmp_path / "c.parquet", row_group_size=500)
    a = survey_files(tmp_path / "c.parquet", CFG, shards=5, caption_field="caption").finalize()
    b = survey_files(corpus_file, CFG, shards=1, caption_field="caption").finalize()
    assert summary_json(a) == summary_json(b)
    assert len(list_shards(tmp_path / "c.parquet", num_shards=5)) == 5


def test_prompt_support_streamed_equals_in_memory(tmp_path, registry_texts):
    """compare_pairs_file (streamed, engine map over block runs) gives the rows compare_surfaces
    gives on the loaded pairs, for 1 and 2 workers; pool counts streamed = counted in memory."""
    from capaudit.prompts.io import load_pairs
    from capaudit.prompts.ngrams import count_ngrams, load_pool_counts
    from capaudit.prompts.support import compare_pairs_file, compare_surfaces

    rng = random.Random(2)
    texts = [t for t in registry_texts if len(t) > 20]
    pairs = tmp_path / "pairs.jsonl"
    with open(pairs, "w", encoding="utf-8") as fh:
        for _ in range(2300):
            fh.write(json.dumps({"local_caption": rng.choice(texts), "reference_caption": rng.choice(texts)},
                                ensure_ascii=False) + "\n")
    pool_file = tmp_path / "pool.jsonl"
    prompts = [rng.choice(texts) for _ in range(3000)]
    with open(pool_file, "w", encoding="utf-8") as fh:
        for p in prompts:
            fh.write(json.dumps({"prompt": p}, ensure_ascii=False) + "\n")
    pool = load_pool_counts("p", pool_file, 2, 4096, workers=2)
    assert pool.records == 3000
    assert np.array_equal(pool.counts, count_ngrams([p for p in prompts if p.strip()], 2, None, 4096))
    loaded = load_pairs(pairs)
    want = compare_surfaces(loaded.local, loaded.reference, [pool], "c", ngram=2, budget=64, block_size=500,
                            reps=200, buckets=4096)
    for workers in (1, 2):
        got, st = compare_pairs_file(pairs, [pool], "c", local_surface="local", reference_surface="reference",
                                     block_size=500, reps=200, buckets=4096, workers=workers)
        assert st.pairs == 2300 and got == want


def test_vectorised_unit_crcs_equal_zlib(registry_texts):
    import zlib

    from capaudit.prompts.ngrams import _unit_crcs

    units = sorted({u for t in registry_texts[:20000] for u in LEX_RE.findall(t)})
    crc, space_crc, space_len = _unit_crcs(units)
    sp = zlib.crc32(b" ")
    for i, u in enumerate(units):
        b = u.encode("utf-8")
        assert (int(crc[i]), int(space_crc[i]), int(space_len[i])) == (zlib.crc32(b), zlib.crc32(b, sp), len(b) + 1)
