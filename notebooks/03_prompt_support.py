# ---
# jupyter:
#   jupytext:
#     text_representation:
#       extension: .py
#       format_name: percent
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
# ---

# %% [markdown]
# # 03 — Prompt-pool support (reference-spec §3)
# Do the captions of a surface use the n-grams that text-to-image users actually write? Per comparison (paired
# local / reference captions of the same images) and prompt pool: captions keep their first **B** lex units and,
# like the prompts, are cut into **n**-grams hashed with `zlib.crc32(" ".join(ngram)) % 262144` (α = 1e-12 per
# bucket). Per contiguous block of pairs: **JSD** (natural log) between caption-block and pool distributions, and
# **prompt-mass support** = pool probability on the buckets the block uses. Block deltas (local − reference) are
# bootstrapped (95 % quantile interval) and labelled `local_higher` / `reference_higher` / `local_lower` /
# `reference_lower` / `inconclusive`; **pool-wins** counts pools with a positive prompt-mass delta.
#
# **Seed (differs from the reference):** the reference used Python's *salted* `abs(hash((seed, comparison,
# pool, metric))) % 2**32`, so its intervals change between processes; here `blake2b("seed␟comparison␟pool␟metric",
# digest_size=8)` as a little-endian uint64 seeds `np.random.default_rng`: every run gives the same intervals.
#
# Demo pools (§3.1 filters): PartiPrompts, DrawBench, DPG-Bench, GenEval, T2I-CompBench, Gecko, DiffusionDB /
# Midjourney user prompts (ImageReward, DSG); comparisons: IIW-400 (human IIW vs PaLI-5B IIW-P5B, 100 images with
# both) and DOCCI_Test (DOCCI vs IIW), small blocks (100 pairs each).

# %% tags=["parameters"]
params_path = "params/demo.yaml"

# %%
from IPython.display import display
from capaudit.config import load_config
from capaudit.paper.prompt_figures import plot_pool_delta_heatmap, plot_pool_means
from capaudit.prompts import views
from capaudit.prompts.stage import run

cfg = load_config(params_path)
result = run(cfg)

# %% [markdown]
# Pools: preparation counts (§3.1), cross-pool overlap and the pool pairs sharing prompts (same blake2b key of the
# normalised prompt). Block bootstrap (§3.2): the TSV, the direction summary and pool-wins.

# %%
display(views.preparation_counts(result.prepared), views.pool_overlap_totals(result.prepared),
        views.shared_prompt_pairs(result.prepared))
display(views.bootstrap_rows(result), views.direction_table(result), views.pool_wins_table(result))

# %% [markdown]
# Figure 1 (right) style: mean over pools of the block means per surface, and the per-pool deltas (local −
# reference); whole-surface support (both directions) per budget and n, mean over pools; the files written.

# %%
figures = cfg.dirs()["figures"]
display(plot_pool_means(result.means, figures), plot_pool_delta_heatmap(result.rows, figures))
display(views.sensitivity_means(result), views.written_files(result))
