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
#
# Do the captions of a surface use the n-grams that text-to-image users actually write?
# For each comparison (paired local / reference captions of the same images) and each prompt pool:
#
# * captions keep their first **B** lex units; captions and prompts are cut into the same **n**-grams,
#   hashed with `zlib.crc32(" ".join(ngram)) % 262144`; every bucket gets α = 1e-12;
# * per contiguous block of pairs: **JSD** (natural log) between caption-block and pool
#   distributions, and **prompt-mass support** = pool probability on the buckets the block uses;
# * the block deltas (local − reference) are bootstrapped (means of resampled blocks, 95 % quantile
#   interval) and labelled `local_higher` / `reference_higher` / `local_lower` / `reference_lower`
#   / `inconclusive`; **pool-wins** counts pools with a positive prompt-mass delta.
#
# **Seed (differs from the reference):** the reference seeded each bootstrap with
# `abs(hash((seed, comparison, pool, metric))) % 2**32`, Python's *salted* string hash, so its
# intervals change from one process to the next. Here the seed is
# `blake2b("seed␟comparison␟pool␟metric", digest_size=8)` as a little-endian uint64 →
# `np.random.default_rng`: every run gives the same intervals. Point estimates are unaffected.
#
# The demo pools are public benchmark sets (PartiPrompts, DrawBench, DPG-Bench, GenEval,
# T2I-CompBench, Gecko) and real DiffusionDB / Midjourney user prompts (ImageReward, DSG), prepared
# with the §3.1 filters; the demo comparisons are IIW-400 (human IIW vs PaLI-5B IIW-P5B, the
# 100 images that have both) and DOCCI_Test (DOCCI vs IIW human descriptions), with small blocks
# because there are only 100 pairs each.

# %% tags=["parameters"]
params_path = "params/demo.yaml"

# %%
import matplotlib.pyplot as plt
import pandas as pd

from capaudit.config import load_config
from capaudit.prompts.stage import run
from capaudit.summaries.prompt_support import rows_to_records

cfg = load_config(params_path)
dirs = cfg.dirs()
result = run(cfg)

# %% [markdown]
# ## Pools: preparation counts (§3.1) and cross-pool overlap
# Benchmark collections reuse each other's prompts; the overlap table counts shared prompts
# (same blake2b key of the lower-cased, normalised prompt) pair by pair.

# %%
manifest = result.prepared.manifest
pd.DataFrame({name: entry["stats"] for name, entry in manifest["sources"].items()}).T

# %%
pd.DataFrame(manifest["overlap"]["pools"]).T.assign(
    distinct_over_all_pools=manifest["overlap"]["distinct_prompts"]
)

# %%
overlap = pd.DataFrame(result.prepared.overlap)
overlap[overlap["shared"] > 0].sort_values("shared", ascending=False)

# %% [markdown]
# ## Block bootstrap (§3.2): the TSV

# %%
rows = pd.DataFrame(rows_to_records(result.rows))
rows

# %% [markdown]
# ## Direction summary and pool-wins

# %%
pd.DataFrame(rows_to_records(result.direction))

# %%
pd.DataFrame({"pools_won": result.wins, "pools_lost": result.losses})

# %% [markdown]
# ## Figure 1 (right) style: mean over pools of the block means, per surface
# (`capaudit.paper` does not provide this plot yet, so it is drawn here from the stage's table.)

# %%
means = pd.DataFrame(rows_to_records(result.means))
mass = means[means["metric"] == "prompt_mass_on_caption_support"].set_index("comparison")
jsd = means[means["metric"] == "jsd"].set_index("comparison")
fig, (ax_mass, ax_jsd) = plt.subplots(1, 2, figsize=(9, 0.6 * len(mass) + 1.8), sharey=True)
ax_mass.hlines(mass.index, mass["reference_mean"], mass["local_mean"], color="0.7")
ax_mass.plot(mass["reference_mean"], mass.index, "o", color="tab:gray", label="reference")
ax_mass.plot(mass["local_mean"], mass.index, "o", color="tab:blue", label="local")
ax_mass.set_xlabel("prompt-mass support (higher = better)")
ax_jsd.hlines(jsd.index, jsd["reference_mean"], jsd["local_mean"], color="0.7")
ax_jsd.plot(jsd["reference_mean"], jsd.index, "o", color="tab:gray", label="reference")
ax_jsd.plot(jsd["local_mean"], jsd.index, "o", color="tab:blue", label="local")
ax_jsd.set_xlabel("n-gram JSD (lower = closer)")
ax_mass.legend(loc="best", fontsize=8)
fig.suptitle(f"Prompt-pool support, mean over {int(mass['pools'].iloc[0])} pools")
fig.tight_layout()
fig.savefig(dirs["figures"] / "prompt_support_pool_means.pdf")
fig.savefig(dirs["figures"] / "prompt_support_pool_means.png", dpi=150)

# %% [markdown]
# ## Per-pool deltas (local − reference)

# %%
delta = rows.pivot_table(index="prompt_pool", columns=["metric", "comparison"], values="delta_mean_local_minus_reference")
fig, (ax_m, ax_j) = plt.subplots(1, 2, figsize=(10, 0.35 * len(delta) + 2.5))
mass_delta = delta["prompt_mass_on_caption_support"]
jsd_delta = delta["jsd"]
lim_m = float(mass_delta.abs().max().max())
lim_j = float(jsd_delta.abs().max().max())
im_m = ax_m.imshow(mass_delta.values, cmap="RdBu", vmin=-lim_m, vmax=lim_m, aspect="auto")
im_j = ax_j.imshow(jsd_delta.values, cmap="RdBu_r", vmin=-lim_j, vmax=lim_j, aspect="auto")
ax_m.set_yticks(range(len(mass_delta.index)), mass_delta.index)
ax_j.set_yticks(range(len(jsd_delta.index)), [""] * len(jsd_delta.index))
ax_m.set_xticks(range(len(mass_delta.columns)), mass_delta.columns, rotation=30, ha="right")
ax_j.set_xticks(range(len(jsd_delta.columns)), jsd_delta.columns, rotation=30, ha="right")
ax_m.set_title("Δ prompt-mass support (blue: local higher)")
ax_j.set_title("Δ JSD (blue: local lower)")
fig.colorbar(im_m, ax=ax_m, shrink=0.8)
fig.colorbar(im_j, ax=ax_j, shrink=0.8)
fig.tight_layout()
fig.savefig(dirs["figures"] / "prompt_support_pool_heatmap.pdf")
fig.savefig(dirs["figures"] / "prompt_support_pool_heatmap.png", dpi=150)

# %% [markdown]
# ## Sensitivity: whole-surface support at budgets 64 / 128 / full and n = 1, 2, 3
# Also caption mass on prompt support (the reverse direction), mean over pools.

# %%
sens = pd.DataFrame(result.sensitivity)
sens.groupby(["comparison", "role", "budget", "ngram"], sort=False)[
    ["prompt_mass_on_caption_support", "caption_mass_on_prompt_support", "jsd"]
].mean().unstack("role")

# %% [markdown]
# Written files:

# %%
pd.Series({k: str(v) for k, v in result.paths.items()})
