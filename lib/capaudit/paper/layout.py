"""Names that tie summaries together: slices ↔ comparisons ↔ surfaces ↔ printed labels.

The reference's summaries name the same corpus differently (cell slice ``DataComp``, comparison
``datacomp_recap_llava15_paired_url``, surface ``ours_datacomp_forward``); this table is the one
place that joins them (reference-spec §5.4, §11.3).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Dict, Tuple


@dataclass(frozen=True)
class Pairing:
    """One paired comparison of ours against a reference surface."""

    key: str  # short id used in macros and figure data
    label: str  # printed name
    comparison: str  # prompt-support / text-stats comparison id
    slice: str  # cell slice
    ref_surface_cell: str  # cell surface of the reference side
    ours_surface: str  # surface id (rollup / text stats)
    ref_surface: str


PAIRINGS: Tuple[Pairing, ...] = (
    Pairing("DataComp", "DataComp", "datacomp_recap_llava15_paired_url", "DataComp", "Ref",
            "ours_datacomp_forward", "ref_datacomp_recap_llava15_llama3_8b"),
    Pairing("LAIONpop", "LAION-pop", "laion_pop_llama32_paired", "LAION-pop", "Ref",
            "ours_laion_pop", "ref_laion_pop_llama32_11b"),
    Pairing("PDtwelveM", "PD12M", "pd12m_full_paired", "PD12M", "Ref",
            "ours_pd12m_img2dataset", "ref_pd12m_full"),
    Pairing("Danbooru", "Danbooru", "danbooru2023_florence2_paired", "Danbooru", "Ref",
            "ours_danbooru2023", "ref_danbooru_florence2"),
    Pairing("CCLLaVA", "CC12M-LLaVA-NeXT", "cc12m_llavanext_paired", "CC12M", "LLaVA-NeXT",
            "ours_cc12m", "ref_cc12m_llavanext"),
    Pairing("CCPixelProse", "CC12M-PixelProse", "cc12m_pixelprose_paired", "CC12M", "PixelProse",
            "ours_cc12m", "ref_pixelprose_cc12m"),
    Pairing("CCQwenVL", "CC12M-Qwen3-VL", "cc12m_qwen3vl8b_paired", "CC12M", "Qwen3-VL-8B",
            "ours_cc12m", "ref_cc12m_qwen3vl8b"),
)
CROSS_CORPUS: Tuple[Pairing, ...] = PAIRINGS[:4]
CC12M_PAIRINGS: Tuple[Pairing, ...] = PAIRINGS[4:]
BY_COMPARISON: Dict[str, Pairing] = {p.comparison: p for p in PAIRINGS}

#: CC12M frontier surfaces → printed label (frontier CSV ``surface`` → ``label``).
CC12M_FRONTIER: Tuple[Tuple[str, str], ...] = (
    ("ours_cc12m", "Ours"),
    ("ref_cc12m_llavanext", "LLaVA-NeXT"),
    ("ref_cc12m_qwen3vl8b", "Qwen3-VL-8B"),
    ("ref_pixelprose_cc12m", "PixelProse"),
)


def rollup_key(comparison: str, surface: str) -> str:
    """Key of a row in ``all_cbu_b64_summary.csv``."""
    return f"{comparison}__{surface}"
