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
# # Paper: Figure 2: supported yield vs risk; budget sweep
#
# Left: supported CBU/cap vs risk per cell. Right: CC12M budget sweep B ∈ {16, 32, 48, 64} with Pareto flags.
# Logic: `capaudit.paper.run.run_fig2`; inputs: the `paper.inputs` of the params file.

# %% tags=["parameters"]
params_path = "params/demo.yaml"

# %%
from capaudit.config import load_config
from capaudit.paper.run import run_fig2

cfg = load_config(params_path)
dirs = cfg.dirs()

# %%
result = run_fig2(cfg)
result

# %%
result.show()
