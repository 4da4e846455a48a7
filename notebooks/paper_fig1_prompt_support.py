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
# # Paper: Figure 1 (right): prompt-pool support
#
# Seven-pool mean prompt-mass support and n-gram JSD per comparison, and the per-pool heatmap.
# Logic: `capaudit.paper.run.run_fig1_prompt_support`; inputs: the `paper.inputs` of the params file.

# %% tags=["parameters"]
params_path = "params/demo.yaml"

# %%
from capaudit.config import load_config
from capaudit.paper.run import run_fig1_prompt_support

cfg = load_config(params_path)
dirs = cfg.dirs()

# %%
result = run_fig1_prompt_support(cfg)
result

# %%
result.show()
