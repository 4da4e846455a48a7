"""Alt-text filtering (CC3M-style and CC12M-style funnels) and long-tail concept coverage (issue 14).

* :mod:`.funnel`: :func:`build_pipeline`, :class:`Pipeline`, :class:`Funnel`;
* :mod:`.blocks`: the filter/transformation blocks, pluggable image-text taggers;
* :mod:`.coverage`: :class:`CoverageCounter`, :func:`coverage_of_texts`, :func:`at_least_curve`;
* :mod:`.vocab`: vocabularies (nocaps_ood, lvis, objects365, files) and :class:`MentionMatcher`;
* :mod:`.sharded`: both on the engine (``--engine local|ray``, ``--workers``, ``--shards``; issue 15),
  byte-identical to a single-process run;
* :mod:`.file_runs`: :func:`coverage_file`, :func:`filter_file` (the CLI/stage entries, sharded or not);
* :mod:`.person`: person-name filter of the ``<PERSON>`` substitution and its precision/recall on
  the hand-labelled ``person_labels.yaml``; :mod:`.sizematch`: size-matched corpus statistics;
* :mod:`.stage`: :func:`run_filters`, :func:`run_coverage` (notebooks 10 and 10b), orchestration over
  :mod:`.corpora` (the params' corpora) and the row builders of its tables, rendered by the paper
  (:mod:`.funnel_report`, :mod:`.person_report`, :mod:`.coverage_report`, :mod:`.size_report`) and
  :mod:`.quoted_numbers` (its numbers fragments);
* reviewed data files in ``alttext/data/`` (:mod:`.resources`).
"""

from .blocks import BLOCK_TYPES, Tagger, build_block, register_tagger
from .coverage import CoverageCounter, at_least_curve, coverage_numbers, coverage_of_texts
from .file_runs import coverage_file, filter_file
from .funnel import Funnel, Pipeline, build_pipeline
from .rows import RowSource
from .vocab import MentionMatcher, Vocabulary, load_vocabulary, nocaps_ood_accounting

__all__ = ["BLOCK_TYPES", "Tagger", "build_block", "register_tagger", "CoverageCounter", "at_least_curve",
           "coverage_file", "coverage_numbers", "coverage_of_texts", "Funnel", "Pipeline", "build_pipeline",
           "filter_file", "RowSource", "MentionMatcher", "Vocabulary", "load_vocabulary", "nocaps_ood_accounting"]
