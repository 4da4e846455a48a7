"""The CC12M bridge: the data path of the reference study's CC12M four-caption case study.

Caption surfaces of CC12M made by different captioners carry different keys (old numeric keys,
URLs). :mod:`.bridge` joins them the reference's way (keyed surfaces on the zero-padded key,
URL-keyed surfaces on the anchor surface's normalised URL, :mod:`.urls`); :mod:`.manifest` turns
the joined table into one row per image; :mod:`.materialize` pulls those images out of WebDataset
tar shards (:mod:`.shards`), verifies them and writes per-surface caption files whose ``image``
field ``capaudit judges build --image-field image`` reads. Everything dropped is counted.
"""
