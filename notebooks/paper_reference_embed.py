# ---
# jupyter:
#   jupytext:
#     formats: py:percent
#     text_representation:
#       extension: .py
#       format_name: percent
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
# ---

# %% [markdown]
# # Paper: Encoder probes (reference run)
#
# Encoder-token truncation, naive-control truncation, embedding probes and LongCLIP retrieval margins, from the published summaries.
# Logic: `capaudit.paper.run_reference.run_reference_embed`; inputs: the `paper.inputs` of the params file.

# %% tags=["parameters"]
params_path = "params/reference.yaml"

# %%
from capaudit.config import load_config
from capaudit.paper.run import run_reference_embed

cfg = load_config(params_path)
dirs = cfg.dirs()

# %%
result = run_reference_embed(cfg)
result
