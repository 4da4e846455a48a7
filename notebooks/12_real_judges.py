# ---
# jupyter:
#   jupytext:
#     text_representation:
#       extension: .py
#       format_name: percent
# ---

# %% [markdown]
# # Real judges, real people: the DSG release
# Published answers of three real VQA models (mPLUG-large, InstructBLIP, PaLI-17B) to DSG, TIFA and
# VQ² questions on images of five text-to-image models, and five human 1–5 Likert ratings per
# TIFA160 image. Imported into judge stores (`capaudit judges import`), scored
# (`judges item-scores`), compared with people (`judges correlate`): DSG's published tables come out
# exactly. Then a judge's per-model estimate is corrected with a few human ratings
# (`judges calibrate`, PPI++), with coverage checked over 1,000 random labelled subsets per size.
# Logic: `capaudit.judges.real_judges`.

# %% tags=["parameters"]
params_path = "params/demo.yaml"

# %%
import pandas as pd

from capaudit.config import load_config
from capaudit.judges import real_judges

cfg = load_config(params_path)
summary = real_judges.run(cfg)
pd.DataFrame(summary["reproduction"]["correlation"])[
    ["vqa", "question_set", "spearman", "published_spearman", "kendall", "published_kendall", "equal"]]

# %%
pd.DataFrame(summary["reproduction"]["dsg1k"])

# %% [markdown]
# Calibration: coverage of the all-ratings mean and mean interval width, PPI++ vs human only.

# %%
pd.DataFrame(summary["calibration"]["coverage"])
