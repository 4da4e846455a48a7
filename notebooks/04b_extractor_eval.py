# ---
# jupyter:
#   jupytext:
#     text_representation:
#       extension: .py
#       format_name: percent
# ---

# %% [markdown]
# # Extractor evaluation on DSG-1k
# Precision / recall / F1 of the offline heuristic extractor (`capaudit-heuristic-extractor`)
# against the DSG-1k gold propositions (Cho et al., ICLR 2024), per claim type after mapping DSG's
# categories onto ours (style, camera and lighting pooled as DSG's "global"), with lemma-based
# one-to-one matching per prompt (see `capaudit.claims.dsg_eval`).

# %% tags=["parameters"]
params_path = "params/demo.yaml"

# %%
from capaudit.config import load_config
from capaudit.claims import stage

cfg = load_config(params_path)
dirs = cfg.dirs()
ev = stage.run_dsg_eval(cfg)
print("mapping:", ev["mapping"])
ev["table"]
