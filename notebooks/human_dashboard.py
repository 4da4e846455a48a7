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
# The study lead's dashboard (read-only): per-annotator progress and pace, agreement by claim type
# and phase, hidden-repeat consistency and the adjudication queue. Serve with
# `capaudit human serve --db S.sqlite --dashboard` (voila on 127.0.0.1) or run in JupyterLab; the
# study database is `study`, else $CAPAUDIT_STUDY, else the params file's `human` section.
from capaudit.human.dashboard import dashboard_app

dashboard_app(params_path=params_path, study=study)
