"""Recaptioning (reference-spec §6): policies as data, a streaming, resumable captioning runner
on the model-call layer, surface export with optional PII masking, and an offline captioner.

Submodules: ``policies`` (``load_policy``), ``inputs`` (``open_images``: folders, manifests,
WebDataset shards, Parquet), ``preprocess`` (§6 image preprocessing, run in worker processes),
``runner`` (``recap`` / ``arecap``), ``captions`` (``clean_caption``), ``export``
(``export_surface``), ``pii`` (``mask_pii``), ``offline`` (``capaudit-offline-coco-captioner``,
registered with ``capaudit serve``), ``stage`` (``run(cfg)`` for notebook 06_recap), ``cli``.
"""

from capaudit.recap.policies import Policy, load_policy

__all__ = ["Policy", "load_policy"]
