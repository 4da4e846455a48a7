"""Paper builders of the text, prompt-support and encoder-probe tables: the rows a stage writes become
the ``.tex`` the manuscript reads (columns, notes, formats) and a missing value prints "--"."""

from __future__ import annotations

import pytest

from capaudit.paper.render import to_csv, to_latex
from capaudit.paper.stage_tables import stage_table
from capaudit.summaries.table_rows import write_table_rows


def _render(tmp_path, table, rows, meta=None, function="m.f"):
    t = stage_table(write_table_rows(tmp_path, table, "s", rows, function=function, meta=meta or {}), run_dir=tmp_path)
    return t, to_latex(t).splitlines()


def _cells(line):
    assert line.endswith(r" \\")
    return line[: -len(r" \\")].split(" & ")


def test_text_paired_deltas(tmp_path):
    from capaudit.text.paired_deltas import paired_deltas

    d = paired_deltas(["a b c d e", "x y"], ["a b", "x y z"], budget=64)
    d.insert(0, "comparison", "a_vs_b")
    one = paired_deltas(["a b"], ["a"], budget=64)  # one pair: no interval
    one.insert(0, "comparison", "one")
    rows = d.to_dict("records") + one.to_dict("records")
    t, lines = _render(tmp_path, "text_paired_deltas", rows)
    assert r"Comparison & Metric & Pairs & Delta & CI low & CI high \\" in lines
    first = _cells(lines[lines.index(r"\midrule") + 1])
    assert first[:4] == [r"a\_vs\_b", "avg\\_lexical\\_tokens", "$2$", "$+1.0000$"]  # (3 - 1) / 2
    last = _cells(lines[lines.index(r"\bottomrule") - 1])
    assert last[0] == "" and last[2] == "$1$" and last[4:] == ["--", "--"]  # grouped; no interval from one pair
    assert to_csv(t).splitlines()[0] == "comparison,metric,pairs,delta_mean,ci95_low,ci95_high"


def _support_row(pool, metric, delta, local, ref, comparison="a_vs_b"):
    from capaudit.summaries.prompt_support import JSD, PromptSupportRow

    label = ("local_lower" if delta < 0 else "reference_lower") if metric == JSD else \
        ("local_higher" if delta > 0 else "reference_higher")
    return PromptSupportRow(pool, comparison, "a", "b", metric, 2, 10, 20, delta, delta - 0.1, delta + 0.1, label,
                            local, ref)


def test_prompt_pool_wins(tmp_path):
    from capaudit.prompts.tables import pool_wins_rows
    from capaudit.summaries.prompt_support import JSD, PROMPT_MASS

    rows = [_support_row("p_1", PROMPT_MASS, 0.2, 0.5, 0.3), _support_row("p_2", PROMPT_MASS, -0.1, 0.2, 0.3),
            _support_row("p_1", JSD, -0.1, 0.4, 0.5), _support_row("p_2", JSD, 0.1, 0.6, 0.5),
            _support_row("p_1", PROMPT_MASS, 0.1, 0.3, 0.2, "c"), _support_row("p_2", PROMPT_MASS, 0.1, 0.3, 0.2, "c")]
    meta = {"pools": 2, "budget": None, "ngram": 2, "reps": 100, "block_sizes": {"a_vs_b": 10, "c": 10}}
    t, lines = _render(tmp_path, "prompt_pool_wins", pool_wins_rows(rows), meta,
                       function="capaudit.prompts.tables.pool_wins_rows")
    assert lines[0] == ("% Prompt-pool support: pools won by the local surface (prompt-mass delta > 0); L local, "
                        "R reference, means over the pools of the block means")
    assert lines[1] == "% 2 pools; B=full, n=2, 100 bootstrap replicates; block sizes: a_vs_b 10, c 10"
    assert lines[2] == r"\begin{tabular}{lrrrrrl}"
    assert lines[4] == r"Comparison & Wins & Prompt mass (L) & Prompt mass (R) & JSD (L) & JSD (R) & Pools lost \\"
    assert _cells(lines[6]) == [r"a\_vs\_b", "$1/2$", "$0.3500$", "$0.3000$", "$0.5000$", "$0.5000$", r"p\_2"]
    # comparison c: no JSD rows and no pool lost
    assert _cells(lines[7]) == ["c", "$2/2$", "$0.3000$", "$0.2000$", "--", "--", "--"]


def test_prompt_pool_overlap(tmp_path):
    rows = [{"pool_a": "a", "pool_b": "b", "prompts_a": 1200, "prompts_b": 10, "shared": 5, "share_of_a": 0.004167,
             "share_of_b": 0.5},
            {"pool_a": "a", "pool_b": "c", "prompts_a": 1200, "prompts_b": 0, "shared": 0, "share_of_a": 0.0,
             "share_of_b": None}]
    t, lines = _render(tmp_path, "prompt_pool_overlap", rows)
    assert r"Pool A & Pool B & Prompts A & Prompts B & Shared & Share of A & Share of B \\" in lines
    body = [_cells(x) for x in lines if x.endswith(r" \\") and "$" in x]
    assert body[0] == ["a", "b", "$1{,}200$", "$10$", "$5$", "$0.0042$", "$0.5000$"]
    assert body[1][0] == "" and body[1][-1] == "--"


@pytest.fixture()
def truncation_result():
    pytest.importorskip("instant_clip_tokenizer")
    from capaudit.text.truncation import finalize_part, load_counters, resolve_encoder, survey_texts

    counters, unavailable = load_counters([resolve_encoder("clip77"), resolve_encoder("longclip248")])
    caps = ["a dog on the grass", "word " * 100, ""]
    return finalize_part(survey_texts(caps, counters, [None, 8]), counters, unavailable, "count")


def test_encoder_truncation(tmp_path, truncation_result):
    from capaudit.embed.table_rows import encoder_rows

    rows = encoder_rows("s_1", truncation_result)
    meta = {"clip_clean": "hf", "clip_clean_definition": "CLIPTokenizerFast", "empty": "count",
            "empty_definition": "as the empty string", "unavailable": ["gemma3"]}
    t, lines = _render(tmp_path, "encoder_truncation", rows + [dict(rows[0], encoder="x", mean=None)], meta)
    assert lines[0].startswith("% Encoder-token truncation (reference-spec 8.3): untruncated counts")
    assert lines[1] == "% CLIP BPE counts via instant-clip-tokenizer, clean=hf: CLIPTokenizerFast."
    assert lines[2] == "% Empty captions: empty=count: as the empty string."
    assert lines[3].startswith("% not surveyed (tokenizer not available here") and lines[3].endswith(": gemma3")
    assert lines[4] == (r"% columns: Surface & Encoder & Max length & Captions & Truncated & $\geq$ max & "
                        r"Mean tokens & p50 & p95 & Max")
    clip = _cells(lines[5])
    assert clip[:5] == [r"s\_1", "clip77", "$77$", "$3$", "$0.3333$"] and len(clip) == 10
    assert _cells(lines[7])[6] == "--"
    assert set(to_csv(t).splitlines()[0].split(",")) >= {"p99", "mean_slack", "model_id", "tokenizer"}


def test_encoder_truncation_windows(tmp_path, truncation_result):
    from capaudit.embed.table_rows import window_rows

    rows = window_rows("s_1", truncation_result)
    assert [r["window"] for r in rows] == ["full", "full", "lex8", "lex8"]
    t, lines = _render(tmp_path, "encoder_truncation_windows", rows + [dict(rows[0], p95=None)],
                       {"clip_clean": "hf", "empty": "count"})
    assert lines[0] == ("% Truncation of captions cut at B lexical units (lex-cut text, spec 1.2) and of full "
                        "captions; CLIP BPE clean=hf, empty=count.")
    assert lines[1] == "% columns: Surface & Window & Encoder & Captions & Mean lex & Truncated & Mean tokens & p95 tokens"
    lex8 = _cells(lines[4])
    assert lex8[1:3] == ["lex8", "clip77"] and lex8[5] == "$0.0000$"
    assert _cells(lines[-1])[7] == "--"


def test_embedding_probes(tmp_path):
    rows = [{"surface": "s_1", "records": 1000, "vendi_mean": 12.345, "vendi_ci95_low": 11.0, "vendi_ci95_high": 13.5,
             "erank": 40.25, "participation_ratio": 20.0, "top1_mass": 0.1234, "top10_mass": 0.5, "mean_cos_centroid": 0.3},
            {"surface": "small", "records": 12, "vendi_mean": 5.0, "vendi_ci95_low": None, "vendi_ci95_high": None,
             "erank": 3.0, "participation_ratio": 2.0, "top1_mass": 0.4, "top10_mass": 1.0, "mean_cos_centroid": 0.6}]
    meta = {"model": "m (sha256:abc)", "vendi_blocks": 16, "vendi_block_size": 256, "seed": 0, "k": 10}
    t, lines = _render(tmp_path, "embedding_probes", rows, meta)
    assert lines[0] == ("% Embedding probes (reference-spec 8.1), encoder m (sha256:abc); Vendi over 16 blocks of "
                        "256 (seed 0; one block of all rows when fewer), normal 95% CI.")
    assert len(lines[1].split(" & ")) == 10
    assert _cells(lines[2]) == [r"s\_1", "$1{,}000$", "$12.35$", "$11.00$", "$13.50$", "$40.2$", "$20.0$", "$0.123$",
                                "$0.500$", "$0.300$"]
    assert _cells(lines[3])[3:5] == ["--", "--"]


def test_embedding_support(tmp_path):
    rows = [{"surface": "s", "pool": "p_1", "k": 10, "gallery": 2000, "queries": 50, "coverage": 0.42, "density": 1.1,
             "knn_max_cos_p50": 0.61, "knn_share_ge_070": None, "note": "query-in-gallery coverage, not PRDC coverage"}]
    t, lines = _render(tmp_path, "embedding_support", rows, {"model": "m (r)", "k": 10})
    assert lines[:2] == ["% Coverage@10/Density@10 of prompt pools (queries) against caption surfaces (gallery), "
                         "encoder m (r).", "% Coverage is query-in-gallery; it is NOT PRDC coverage."]
    assert lines[2] == (r"% columns: Surface & Pool & Gallery & Queries & Coverage@10 & Density@10 & Max cos (median) & "
                        r"Share $\geq 0.7$")
    assert _cells(lines[3]) == ["s", r"p\_1", "$2{,}000$", "$50$", "$0.420$", "$1.100$", "$0.610$", "--"]


def test_retrieval_margins(tmp_path):
    from capaudit.embed.table_rows import retrieval_rows

    surf = {"rows": 5, "trunc_gt_248": 0.2, "tok_mean": 30.5, "tok_p95": 60.0, "pos_mean": 0.1234567,
            "pos_ci95": [0.1, 0.2], "i2t_margin_mean": -0.01, "i2t_margin_ci95": None, "i2t_r1": 0.2, "i2t_r5": 1.0,
            "t2i_margin_mean": 0.02, "t2i_margin_ci95": None, "t2i_r1": 0.4, "t2i_r5": 1.0}
    no_tokens = {k: v for k, v in surf.items() if not k.startswith(("trunc", "tok"))}
    result = {"model": {"name": "capaudit-random-tiny-clip", "revision": "seed0", "max_length": 248,
                        "random_init": True}, "surfaces": {"coco_a": surf, "coco_b": no_tokens}}
    rows = retrieval_rows(result)
    meta = {"model": "capaudit-random-tiny-clip", "revision": "seed0", "max_length": 248, "images": 5,
            "random_init": True}
    t, lines = _render(tmp_path, "retrieval_margins", rows, meta)
    assert lines[0] == ("% Image-text retrieval margins (reference-spec 8.2), model capaudit-random-tiny-clip "
                        "(seed0), max_length 248, 5 images.")
    assert lines[1].startswith("% RANDOMLY INITIALISED MODEL") and lines[2].startswith("% random-init encoder:")
    assert t.caveats == ("random-init encoder",)
    assert _cells(lines[4]) == [r"coco\_a", "$5$", "$0.2000$", "$30.50$", "$0.123457$", "$-0.010000$", "$0.2000$",
                                "$1.0000$", "$0.020000$", "$0.4000$", "$1.0000$"]
    assert _cells(lines[5])[2:4] == ["--", "--"]  # no token counts: never a number
    header = to_csv(t).splitlines()[0].split(",")
    assert header[:3] == ["surface", "rows", "trunc_gt_248"] and header[-2:] == ["model", "random_init"]
