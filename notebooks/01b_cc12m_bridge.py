# ---
# jupyter:
#   jupytext:
#     text_representation:
#       extension: .py
#       format_name: percent
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
# ---

# %% [markdown]

# %% [markdown]
# # 01b — The CC12M case study's data path (four captions of the same images)
# The CC12M surfaces carry keys that do not line up: the released recaptions and Qwen3-VL keep the old numeric
# CC12M keys, LLaVA-NeXT keeps those keys and the image URLs, PixelProse only URLs. The bridge joins the key
# surfaces on the key zero-padded to 9 characters and PixelProse on LLaVA-NeXT's normalised URL (scheme and host
# lower-cased, fragment dropped), shuffles the common keys with the seed and keeps the first `max_rows` (the
# reference: 5,000). The images come out of the CC12M WebDataset shards by normalised sidecar URL, each decoded
# and checked; images the shards do not hold are counted out (the reference judged the 4,494 it found). Every
# dropped row is counted per surface. Logic: `capaudit.cc12m.stage.run`.

# %% tags=["parameters"]
params_path = "params/paper.yaml"

# %%
from IPython.display import display
from capaudit.config import load_config
from capaudit.cc12m.stage import count_tables, run

cfg = load_config(params_path)
result = run(cfg)

# %% [markdown]
# Per surface: rows seen, loaded, duplicates, skipped, matched; then what the shards gave.

# %%
bridge, images = count_tables(result)
display(bridge, images.attrs["images"], images)
