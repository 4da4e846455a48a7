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
# # Paper: Numbers map
#
# Every number quoted by the manuscript, as `numbers.json` and `\newcommand` macros in `tables/numbers.tex`.
# Logic: `capaudit.paper.run.run_numbers`; inputs: the `paper.inputs` of the params file.

# %% tags=["parameters"]
params_path = "params/demo.yaml"

# %%
from capaudit.config import load_config
from capaudit.paper.run import run_numbers

cfg = load_config(params_path)
dirs = cfg.dirs()

# %%
result = run_numbers(cfg)
result
