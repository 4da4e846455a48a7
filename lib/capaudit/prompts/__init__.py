"""Prompt-pool support (reference-spec §3): pool preparation, hashed n-gram support, block bootstrap.

Modules:

* :mod:`capaudit.prompts.io` — reading prompt files (txt/jsonl/json/csv/tsv/parquet/folder) and
  caption pairs; resolving registry paths.
* :mod:`capaudit.prompts.pools` — §3.1 pool preparation (normalise, de-duplicate, length and
  safety filters, manifest, cross-pool overlap).
* :mod:`capaudit.prompts.ngrams` — §3.2 hashed n-gram counting (vectorised CRC-32), cached pool
  counts.
* :mod:`capaudit.prompts.support` — §3.2 smoothed distributions, JSD, prompt-mass support, blocks,
  block-delta bootstrap, and the whole-surface sensitivity variants.
* :mod:`capaudit.prompts.stage` — ``run(cfg)`` for the ``prompt_support:`` params section
  (:mod:`~capaudit.prompts.params`), the sensitivity rows (:mod:`~capaudit.prompts.sensitivity`)
  and the pool-wins table rows (:mod:`~capaudit.prompts.tables`).
* :mod:`capaudit.prompts.cli` — ``capaudit prompt-support`` and ``capaudit prompt-pools prepare``.
"""
