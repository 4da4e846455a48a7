"""Prompt-support figures (capaudit.paper.prompt_figures) and the notebook's views of a run."""

from __future__ import annotations

import json

from pathlib import Path

import numpy as np
import pytest

from capaudit.embed.truncation_views import clip_backend_label
from capaudit.paper.prompt_figures import plot_pool_delta_heatmap, plot_pool_means
from capaudit.summaries.prompt_support import JSD, PROMPT_MASS, PoolMeans, PromptSupportRow


def _row(pool: str, comparison: str, metric: str, delta: float) -> PromptSupportRow:
    label = "inconclusive"
    return PromptSupportRow(pool, comparison, "loc", "ref", metric, 4, 20, 80, delta, delta - 0.1, delta + 0.1, label,
                            0.5 + delta, 0.5)


def test_pool_means_plots_each_comparison(tmp_path: Path) -> None:
    means = [PoolMeans("a_vs_b", PROMPT_MASS, 3, 0.40, 0.30), PoolMeans("a_vs_b", JSD, 3, 0.20, 0.25),
             PoolMeans("c_vs_d", PROMPT_MASS, 3, 0.10, 0.15), PoolMeans("c_vs_d", JSD, 3, 0.60, 0.50)]
    fig = plot_pool_means(means, tmp_path)
    ax_mass, ax_jsd = fig.axes
    reference, local = ax_mass.lines  # grey reference points, then blue local points
    assert list(reference.get_xdata()) == [0.30, 0.15] and list(local.get_xdata()) == [0.40, 0.10]
    assert list(ax_jsd.lines[1].get_xdata()) == [0.20, 0.60]
    assert fig.get_suptitle() == "Prompt-pool support, mean over 3 pools"
    for suffix in ("pdf", "png"):
        assert (tmp_path / f"prompt_support_pool_means.{suffix}").stat().st_size > 1000


def test_delta_heatmap_shows_each_pool_and_comparison(tmp_path: Path) -> None:
    rows = [_row("p1", "a_vs_b", PROMPT_MASS, 0.2), _row("p1", "a_vs_b", JSD, -0.1),
            _row("p2", "a_vs_b", PROMPT_MASS, -0.4), _row("p2", "a_vs_b", JSD, 0.3)]
    fig = plot_pool_delta_heatmap(rows, tmp_path)
    mass = fig.axes[0].images[0]
    assert np.allclose(np.asarray(mass.get_array()).ravel(), [0.2, -0.4])
    assert mass.get_clim() == (-0.4, 0.4)  # symmetric around zero
    assert [t.get_text() for t in fig.axes[0].get_yticklabels()] == ["p1", "p2"]
    for suffix in ("pdf", "png"):
        assert (tmp_path / f"prompt_support_pool_heatmap.{suffix}").stat().st_size > 1000
    model = json.loads((tmp_path / "prompt_support_pool_heatmap.table.json").read_text())
    assert model["axis"] == "prompts" and sorted(r["delta_mean_local_minus_reference"] for r in model["rows"]
                                                  if r["metric"] == PROMPT_MASS) == [-0.4, 0.2]


def test_figures_refuse_an_empty_run(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="no pool means"):
        plot_pool_means([], tmp_path)
    with pytest.raises(ValueError, match="no bootstrap rows"):
        plot_pool_delta_heatmap([], tmp_path)
    assert list(tmp_path.iterdir()) == []


def test_clip_backend_label_names_the_first_clean_encoder() -> None:
    results = {"s1": {"encoder_details": {"t5": {"tokenizer": "t5"}, "clip77": {"clean": "hf"},
                                          "longclip248": {"clean": "open_clip"}}},
               "s2": {"encoder_details": {"clip77": {"clean": "other"}}}}
    assert clip_backend_label(results) == "CLIP BPE: instant-clip-tokenizer, clean=hf"
    assert clip_backend_label({"s1": {"encoder_details": {"t5": {}}}}) is None
    assert clip_backend_label({}) is None
