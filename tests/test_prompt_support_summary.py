"""Prompt-support summary schema and the §14 G8 golden checks."""

from __future__ import annotations

from pathlib import Path

import pytest

from capaudit.summaries.prompt_support import (
    COLUMNS,
    PROMPT_MASS,
    SEVEN_PAPER_POOLS,
    PromptSupportRow,
    direction_summary,
    format_direction_summary_csv,
    format_prompt_support_tsv,
    pool_losses,
    pool_means_table,
    pool_wins,
    read_prompt_support_tsv,
    seven_pool_means,
    write_prompt_support_tsv,
)

TSV = "results/raw_summaries/prompt_support/prompt_support_bootstrap_b64_n2_250k_2026-04-24.tsv"
CSV = "results/prompt_support_direction_summary.csv"


@pytest.fixture(scope="module")
def ref_rows(reference_dir: Path):
    return read_prompt_support_tsv(reference_dir / TSV)


def test_reference_tsv_round_trip_is_byte_identical(reference_dir: Path, ref_rows, tmp_path: Path):
    assert len(ref_rows) == 112
    assert format_prompt_support_tsv(ref_rows) == (reference_dir / TSV).read_text(encoding="utf-8")
    out = write_prompt_support_tsv(ref_rows, tmp_path / "x.tsv")
    assert read_prompt_support_tsv(out) == ref_rows


def test_direction_summary_reproduces_reference_csv_exactly(reference_dir: Path, ref_rows):
    expected = (reference_dir / CSV).read_text(encoding="utf-8")
    assert format_direction_summary_csv(direction_summary(ref_rows)) == expected


def test_direction_summary_values(ref_rows):
    summary = {(r.comparison, r.metric): r for r in direction_summary(ref_rows)}
    dan = summary[("danbooru2023_florence2_paired", "jsd")]
    # One inconclusive pool (sdxl_refiner) is not counted in any column: 6 + 1 of 8.
    assert (dan.n, dan.local_lower, dan.reference_lower, dan.mixed) == (8, 6, 1, 0)
    qwen = summary[("cc12m_qwen3vl8b_paired", PROMPT_MASS)]
    assert qwen.records == 114621 and qwen.local_higher == 8
    assert qwen.delta_mean_across_pools == 0.3373853208815864


def test_pool_wins_match_paper(ref_rows):
    assert pool_wins(ref_rows) == {
        "datacomp_recap_llava15_paired_url": 6,
        "laion_pop_llama32_paired": 5,
        "pd12m_full_paired": 7,
        "danbooru2023_florence2_paired": 7,
        "cc12m_llavanext_paired": 6,
        "cc12m_pixelprose_paired": 6,
        "cc12m_qwen3vl8b_paired": 7,
    }
    losses = pool_losses(ref_rows)
    for cmp in ("datacomp_recap_llava15_paired_url", "cc12m_llavanext_paired", "cc12m_pixelprose_paired"):
        assert losses[cmp] == ["flux_prompts_regpeter"]
    assert losses["laion_pop_llama32_paired"] == ["flux_prompts_regpeter", "sdxl_refiner_prompts_falah"]
    # With all eight pools the xzuyn pool is counted too.
    assert pool_wins(ref_rows, pools=None)["pd12m_full_paired"] == 8


def test_seven_pool_means_match_g8(ref_rows):
    table = pool_means_table(seven_pool_means(ref_rows))
    expected = {
        "datacomp_recap_llava15_paired_url": ((0.5938, 0.4674), (0.4654, 0.4795)),
        "laion_pop_llama32_paired": ((0.5909, 0.5788), (0.4562, 0.4465)),
        "pd12m_full_paired": ((0.5622, 0.3206), (0.4702, 0.5156)),
        "danbooru2023_florence2_paired": ((0.4899, 0.2736), (0.4964, 0.5477)),
    }
    for cmp, (mass, jsd) in expected.items():
        got_mass = tuple(round(v, 4) for v in table[cmp][PROMPT_MASS])
        got_jsd = tuple(round(v, 4) for v in table[cmp]["jsd"])
        assert (got_mass, got_jsd) == (mass, jsd), cmp
    assert all(m.pools == 7 for m in seven_pool_means(ref_rows))


def test_pool_wins_requires_every_listed_pool(ref_rows):
    subset = [r for r in ref_rows if r.prompt_pool != SEVEN_PAPER_POOLS[0]]
    with pytest.raises(ValueError, match="pools missing"):
        pool_wins(subset)


def _row(**kw):
    base = dict(prompt_pool="p", comparison="c", local_surface="l", reference_surface="r", metric="jsd",
                blocks=2, block_size=5, records=10, delta_mean_local_minus_reference=-0.1, ci95_low=-0.2,
                ci95_high=-0.05, stable_direction="local_lower", local_block_mean=0.3, reference_block_mean=0.4)
    base.update(kw)
    return PromptSupportRow(**base)


def test_row_validation():
    assert _row().metric == "jsd"
    with pytest.raises(ValueError, match="stable_direction"):
        _row(stable_direction="local_higher")
    with pytest.raises(ValueError, match="metric"):
        _row(metric="kl")
    with pytest.raises(ValueError, match="blocks"):
        _row(blocks=0)
    with pytest.raises(ValueError, match="ci95"):
        _row(ci95_low=0.1, ci95_high=0.0)


def test_reader_errors_name_file_row_column(tmp_path: Path):
    good = format_prompt_support_tsv([_row()])
    bad = tmp_path / "bad.tsv"
    bad.write_text(good.replace("\t10\t-0.1", "\tten\t-0.1"), encoding="utf-8")
    with pytest.raises(ValueError, match=r"bad\.tsv: row 2, column 'records': expected an integer"):
        read_prompt_support_tsv(bad)
    bad.write_text(good.replace("local_lower", "higher"), encoding="utf-8")
    with pytest.raises(ValueError, match=r"row 2, column 'stable_direction'"):
        read_prompt_support_tsv(bad)
    bad.write_text(good.replace("records", "rec"), encoding="utf-8")
    with pytest.raises(ValueError, match=r"row 1 \(header\).*missing \['records'\]"):
        read_prompt_support_tsv(bad)
    bad.write_text(good + good.splitlines()[1] + "\n", encoding="utf-8")
    with pytest.raises(ValueError, match="row 3: duplicate"):
        read_prompt_support_tsv(bad)
    bad.write_text(good.replace("\t-0.1\t", "\t-0.1\t\t"), encoding="utf-8")
    with pytest.raises(ValueError, match=f"row 2: expected {len(COLUMNS)} tab-separated cells"):
        read_prompt_support_tsv(bad)


def test_direction_summary_rejects_inconsistent_records():
    rows = [_row(), _row(prompt_pool="q", records=11)]
    with pytest.raises(ValueError, match="disagree on 'records'"):
        direction_summary(rows)
