# ---
# jupyter:
#   jupytext:
#     text_representation:
#       extension: .py
#       format_name: percent
# ---

# %% [markdown]
# # Claimed content units (claimed CBU)
# Claim-extraction requests on the first B whitespace words of each caption (reference-spec §4.2),
# answered through the model-call layer, summarized as CBU/cap and CBU/100 lex (§4.4), with a
# budget sweep (frontier, §14 G6) and the lexical-window sensitivity (§14 G7).
# In the demo run the extractor is `capaudit-heuristic-extractor`, a rule-based **heuristic
# baseline** (spaCy + lexicons), not a language model; every artifact names it.

# %% tags=["parameters"]
params_path = "params/demo.yaml"

# %%
from capaudit.config import load_config
from capaudit.claims import stage

cfg = load_config(params_path)
dirs = cfg.dirs()
out = stage.run(cfg)
print("extractor:", out["extractor"])
out["table"]

# %% [markdown]
# Budget sweep: CBU/cap and CBU/100 lex per surface and budget; `pareto_efficiency_yield` = 1 when no
# other surface at that budget is at least as good on both and better on one.

# %%
out["frontier_table"]

# %% [markdown]
# Whitespace window vs lexical window (raw text cut after the B-th lex unit) at the main budget.

# %%
out["table"][["surface", "cbu_per_cap", "lexical_cbu_per_cap", "cbu_per_100_lex", "lexical_cbu_per_100_lex"]]
