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
# # Paper: Prompt-pool support (reference run)
#
# Pool-wins (`prompt_pool_wins`), pool means and the per-pool heatmap of the prompt stage, from the published bootstrap TSV.
# Logic: `capaudit.paper.run_reference.run_reference_prompts`; inputs: the `paper.inputs` of the params file.

# %% tags=["parameters"]
params_path = "params/reference.yaml"

# %%
from capaudit.config import load_config
from capaudit.paper.run import run_reference_prompts

cfg = load_config(params_path)
dirs = cfg.dirs()

# %%
result = run_reference_prompts(cfg)
result
