# ---
# jupyter:
#   jupytext:
#     text_representation:
#       extension: .py
#       format_name: percent
# ---

# %% tags=["parameters"]
params_path = "params/demo.yaml"
study = None

# %%
# Claim verification (reference-spec §7). Serve with `make annotate STUDY=path/to/study.sqlite`
# (voila on 127.0.0.1) or run in JupyterLab; the study database is `study`, else $CAPAUDIT_STUDY,
# else the params file's `human` section.
from capaudit.human.widgets import annotation_app

annotation_app(params_path=params_path, study=study)
