# ---
# jupyter:
#   jupytext:
#     text_representation:
#       extension: .py
#       format_name: percent
# ---

# %% [markdown]
# # Surfaces and fair slices
# Loads every surface of the run from the checksummed data registry, counts records, and
# joins paired surfaces on their shared image key into reproducible fair slices
# (`artifacts/slices/<name>/n<N>_seed<S>/pairs.parquet` + `manifest.json`).

# %% tags=["parameters"]
params_path = "params/demo.yaml"

# %%
from capaudit.config import load_config
from capaudit.surfaces.stage import run

cfg = load_config(params_path)
res = run(cfg)
res["table"]

# %%
res["slices_table"]
