"""Coverage counters of one corpus, in this process or on the configured engine (issue 15)."""

from __future__ import annotations

from typing import Any, Dict, Mapping, Optional, Sequence, Tuple

from .corpora import RowsTexts
from .coverage import CoverageCounter, HypernymCounts, coverage_of_texts


def engine_for(src: Any, eng: Mapping[str, Any]) -> Dict[str, Any]:
    """The engine settings for one source: inputs that do not shard (TSV, WebDataset, COCO-MINI, a row
    limit, ...) run in this process, whatever the configured engine."""
    from .sharded import shard_files

    if shard_files(src) is None:
        return {"engine": "local", "workers": 1, "address": None, "shards": None}
    return {k: eng[k] for k in ("engine", "workers", "address", "shards")}


def count_corpus(texts: Any, vocabs: Sequence[Any], lemmatiser: str, eng: Mapping[str, Any],
                 hypernym_tokens: Optional[Sequence[str]] = None
                 ) -> Tuple[Dict[str, CoverageCounter], Optional[Dict[str, Any]]]:
    """``(counter per vocabulary, hypernym-check row or None)`` of one corpus's ``(text, url)``; a rows
    corpus that shards runs on the engine (the same counts)."""
    hyp = HypernymCounts(tuple(hypernym_tokens)) if hypernym_tokens is not None else None
    run_on = engine_for(texts.source, eng) if isinstance(texts, RowsTexts) else None
    if run_on is not None and (run_on["engine"] != "local" or run_on["workers"] > 1 or run_on["shards"]):
        from .sharded import coverage_sharded, shard_files

        part = coverage_sharded(texts.source, shard_files(texts.source), texts.text_field, vocabs,
                                url_field=texts.url_field, lemmatiser=lemmatiser, lists=False,
                                hypernyms=None if hyp is None else hyp.hypernyms, **run_on)
        counters = part.counters(vocabs, lemmatiser)
        hyp = part.hypernyms if hyp is not None else None
    else:
        counters = coverage_of_texts(hyp.feed(texts) if hyp is not None else texts, vocabs, lemmatiser)
    return counters, (hyp.row() if hyp is not None else None)


__all__ = ["count_corpus", "engine_for"]
