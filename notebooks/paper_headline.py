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
# # Paper: Cross-corpus headline table
#
# Claimed CBU/cap, supported CBU/cap and risk under both judges, ref → ours, per paired comparison.
# Logic: `capaudit.paper.run.run_headline`; inputs: the `paper.inputs` of the params file.

# %% tags=["parameters"]
params_path = "params/demo.yaml"

# %%
from capaudit.config import load_config
from capaudit.paper.run import run_headline

cfg = load_config(params_path)
dirs = cfg.dirs()

# %%
result = run_headline(cfg)
result
