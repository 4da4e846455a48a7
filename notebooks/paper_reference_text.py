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
# # Paper: Text budget (reference run)
#
# The published text statistics as the text stage's tables: text budget and surface concentration (`text_stats`), paired text deltas (`text_paired_deltas`) and the B-eligibility budget curves.
# Logic: `capaudit.paper.run_reference.run_reference_text`; inputs: the `paper.inputs` of the params file.

# %% tags=["parameters"]
params_path = "params/reference.yaml"

# %%
from capaudit.config import load_config
from capaudit.paper.run import run_reference_text

cfg = load_config(params_path)
dirs = cfg.dirs()

# %%
result = run_reference_text(cfg)
result
