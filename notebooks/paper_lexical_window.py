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
# # Paper: Lexical-window sensitivity (G7)
#
# Whitespace claim window (B=64 frontier rows) vs lexical window: CBU/cap, CBU/100 lex, ranking.
# Logic: `capaudit.paper.run.run_lexical_window`; inputs: the `paper.inputs` of the params file.

# %% tags=["parameters"]
params_path = "params/demo.yaml"

# %%
from capaudit.config import load_config
from capaudit.paper.run import run_lexical_window

cfg = load_config(params_path)
dirs = cfg.dirs()

# %%
result = run_lexical_window(cfg)
result
