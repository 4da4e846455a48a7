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
# # Paper: Stage tables
#
# Every table a stage of this run computed (rows under `artifacts/tables/`), rendered as CSV, LaTeX
# and the table model the HTML report reads. Logic: `capaudit.paper.run.run_stage_tables`.

# %% tags=["parameters"]
params_path = "params/demo.yaml"

# %%
from capaudit.config import load_config
from capaudit.paper.run import run_stage_tables

cfg = load_config(params_path)
dirs = cfg.dirs()

# %%
result = run_stage_tables(cfg)
result
