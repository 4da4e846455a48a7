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
# # Paper: Policy-control claimed density (G3)
#
# CBU/cap and CBU/100 lex of ours vs naive-prompt captions from the claimed summaries.
# Logic: `capaudit.paper.run.run_policy_cbu`; inputs: the `paper.inputs` of the params file.

# %% tags=["parameters"]
params_path = "params/demo.yaml"

# %%
from capaudit.config import load_config
from capaudit.paper.run import run_policy_cbu

cfg = load_config(params_path)
dirs = cfg.dirs()

# %%
result = run_policy_cbu(cfg)
result
