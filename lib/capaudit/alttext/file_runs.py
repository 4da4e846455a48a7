"""File-level entry points of the alt-text stage: ``capaudit coverage`` and ``capaudit alttext filter``.

:func:`coverage_file` and :func:`filter_file` read a source in this process or, with ``--engine``,
``--workers`` or ``--shards`` on JSONL / Parquet inputs, through :mod:`.sharded` (byte-identical
outputs). They sit above :mod:`.coverage`, :mod:`.funnel` and :mod:`.sharded`, so none of those
imports another's caller.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable, Dict, Iterator, Mapping, Optional, Tuple, Union

from capaudit.errors import EmptyInputError, InputError
from capaudit.io.atomic import atomic_write, write_json_atomic

from .blocks import Item
from .coverage import coverage_of_texts, texts_of_rows
from .funnel import Funnel, Pipeline, PipelineSpec, build_pipeline, dropped_line, kept_line
from .rows import RowSource
from .sharded import coverage_sharded, filter_sharded, use_engine
from .vocab import load_vocabulary


def coverage_file(source: Any, text_field: Optional[str], vocabulary: str, out: Union[str, Path], *, url_field: Optional[str] = None,
                  detail: bool = False, lemmatiser: str = "wordnet", max_records: Optional[int] = None,
                  engine: str = "local", workers: int = 1, address: Optional[str] = None,
                  shards: Optional[int] = None) -> Dict[str, Any]:
    """``capaudit coverage``: count one vocabulary over a file's text field (``None``: the captions of
    a JSON ``{key: [captions]}`` file, :data:`.coverage.COVERAGE_LAYOUTS`); write ``COVERAGE.json``.

    ``engine``/``workers``/``address``/``shards`` (issue 15): JSONL / Parquet inputs are counted per
    shard on a process pool or Ray and merged before the summary (byte-identical JSON);
    ``engine="ray"`` on another format (or with ``max_records``) is an :class:`InputError`.
    """
    src = source if isinstance(source, RowSource) else RowSource.from_spec(source)
    vocab = load_vocabulary(vocabulary)
    files = use_engine(src, engine, workers, shards, limited=max_records is not None)
    if files is not None:
        part = coverage_sharded(src, files, text_field, [vocab], url_field=url_field, lemmatiser=lemmatiser,
                                engine=engine, workers=workers, address=address, shards=shards)
        counter = part.counters([vocab], lemmatiser)[vocab.name]
    else:
        def texts() -> Iterator[Tuple[str, Optional[str]]]:
            for n, t in enumerate(texts_of_rows(src, text_field, url_field), start=1):
                yield t
                if max_records is not None and n >= max_records:
                    return

        counter = coverage_of_texts(texts(), [vocab], lemmatiser)[vocab.name]
    if counter.records == 0:
        raise EmptyInputError("no non-empty text in the input", path=src.label, field=text_field)
    result = counter.summary(detail=detail)
    write_json_atomic(out, result)
    return result


def filter_file(source: Union[RowSource, str, Path, Mapping[str, Any]], text_field: str, pipeline: PipelineSpec,
                out: Union[str, Path], funnel_path: Union[str, Path], dropped_path: Optional[Union[str, Path]] = None,
                *, batch_size: int = 256, manifest_path: Optional[Union[str, Path]] = None,
                overrides: Optional[Mapping[str, Mapping[str, Any]]] = None,
                progress: Optional[Callable[[int], None]] = None, engine: str = "local", workers: int = 1,
                address: Optional[str] = None, shards: Optional[int] = None) -> Funnel:
    """Run a pipeline over a source; kept rows → ``out`` (JSONL; the text field holds the final text,
    ``alttext_original`` the input text, ``alttext_row`` the 0-based input row), dropped rows →
    ``dropped_path`` (with ``dropped_by``), funnel → ``funnel_path`` (CSV).  All writes are atomic.

    ``engine``/``workers``/``address``/``shards`` (issue 15): JSONL / Parquet inputs run as shards on
    a process pool or Ray (:func:`capaudit.alttext.sharded.filter_sharded`) with byte-identical
    outputs; ``engine="ray"`` on another format is an :class:`InputError`.
    """
    src = source if isinstance(source, RowSource) else RowSource.from_spec(source)
    pipe = pipeline if isinstance(pipeline, Pipeline) else build_pipeline(pipeline, overrides=overrides)
    if batch_size < 1:
        raise InputError("batch_size must be >= 1")
    files = use_engine(src, engine, workers, shards)
    if files is not None:
        funnel = filter_sharded(src, files, text_field, pipe, out, funnel_path, dropped_path, batch_size=batch_size,
                                engine=engine, workers=workers, address=address, shards=shards)
    else:
        with atomic_write(out) as kept_fh:
            dropped_cm = atomic_write(dropped_path) if dropped_path else None
            dropped_fh = dropped_cm.__enter__() if dropped_cm else None
            try:
                def on_kept(it: Item) -> None:
                    kept_fh.write(kept_line(it, text_field))

                def on_dropped(it: Item, rule: str) -> None:
                    if dropped_fh is not None:
                        dropped_fh.write(dropped_line(it, rule))

                funnel = pipe.run(src, text_field, batch_size=batch_size, on_kept=on_kept, on_dropped=on_dropped,
                                  progress=progress)
                if funnel.input_rows == 0:
                    raise EmptyInputError("input has no rows", path=src.label)
                with atomic_write(funnel_path, newline="") as fh:
                    fh.write(funnel.to_csv_text())
            except BaseException as exc:
                if dropped_cm:
                    dropped_cm.__exit__(type(exc), exc, exc.__traceback__)
                raise
            if dropped_cm:
                dropped_cm.__exit__(None, None, None)
    if manifest_path:
        write_json_atomic(manifest_path, {"input": src.label, "text_field": text_field, "pipeline": pipe.name,
                                          "blocks": pipe.describe(), "outputs": {"kept": str(out), "funnel": str(funnel_path),
                                                                                 "dropped": str(dropped_path) if dropped_path else None},
                                          "funnel": funnel.to_dict()})
    return funnel


__all__ = ["coverage_file", "filter_file"]
