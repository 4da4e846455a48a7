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
# # Paper: Judges and human agreement (reference run)
#
# The published per-judge VQA summaries and rollups (`judges_summary`) and the judge-human agreement bootstrap (`human_judge_agreement`).
# Logic: `capaudit.paper.run_reference.run_reference_judges`; inputs: the `paper.inputs` of the params file.

# %% tags=["parameters"]
params_path = "params/reference.yaml"

# %%
from capaudit.config import load_config
from capaudit.paper.run import run_reference_judges

cfg = load_config(params_path)
dirs = cfg.dirs()

# %%
result = run_reference_judges(cfg)
result
