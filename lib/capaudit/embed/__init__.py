"""Encoder probes (reference-spec §8): embedding-space diversity and prompt coverage of caption surfaces
(:mod:`~capaudit.embed.probe`, :mod:`~capaudit.embed.metrics`), cached sentence embeddings
(:mod:`~capaudit.embed.cache`, :mod:`~capaudit.embed.encoders`), CLIP/LongCLIP retrieval margins
(:mod:`~capaudit.embed.retrieval`) and the stage functions (:mod:`~capaudit.embed.stage`).

torch, transformers and sentence-transformers are imported only when a model is loaded.
"""

from capaudit.embed.metrics import (COVERAGE_NOTE, coverage_density, knn_max_cosine, spectrum, vendi_blocks,
                                    vendi_score)
from capaudit.embed.sampling import reservoir_sample, subsample_rows

__all__ = ["COVERAGE_NOTE", "coverage_density", "knn_max_cosine", "reservoir_sample", "spectrum", "subsample_rows",
           "vendi_blocks", "vendi_score"]
