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
# # Paper: VQA tables (six bodies of reference-spec §5.5)
#
# The six tabular bodies regenerated from the by-category cells; with the reference cells they are
# byte-identical to the published `results/tables/*.tex` (golden check G1).
# Logic: `capaudit.paper.run.run_vqa_tables`; inputs: the `paper.inputs` of the params file.

# %% tags=["parameters"]
params_path = "params/demo.yaml"

# %%
from capaudit.config import load_config
from capaudit.paper.run import run_vqa_tables

cfg = load_config(params_path)
dirs = cfg.dirs()

# %%
result = run_vqa_tables(cfg)
result
