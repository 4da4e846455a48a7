"""A JSON-lines prompt pool counted in byte-range shards: each worker reads its own lines of the
file (whole lines whose first byte lies in its range), so nothing is read or sent by the
process that merges, and the workers scale.

The result is the sequential reading's exactly (:func:`capaudit.prompts.io.iter_prompt_batches`):
the shards' counts are added in file order by a left fold that knows how many prompts came
before each shard. The shard where the ``limit`` is reached is counted again up to it (by the
merging process; later shards are not started, those already running are dropped), and a
shard with a bad row, when reached before the limit, is read again with its true row numbers,
so the error names the row exactly as the sequential reading does.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterator, List, Optional, Tuple, Union

import numpy as np

from capaudit.errors import EmptyInputError
from capaudit.prompts.io import prompt_block_batch

#: bytes of the file per shard
SHARD_BYTES = 1 << 22


def read_line_range(path: Path, start: int, end: int) -> bytes:
    """The whole lines of ``path`` whose first byte lies in ``[start, end)``."""
    with open(path, "rb") as fh:
        if start > 0:
            fh.seek(start - 1)
            if fh.read(1) != b"\n":
                fh.readline()  # the line that began before start belongs to the shard before
        pos = fh.tell()
        if pos >= end:
            return b""
        data = fh.read(end - pos)
        if data and not data.endswith(b"\n"):
            data += fh.readline()
        return data


@dataclass
class PoolPart:
    """One shard's counts, its non-blank prompts (before a bad row), lines, and whether a row failed."""

    counts: np.ndarray
    records: int
    lines: int
    failed: bool
    start: int
    end: int


@dataclass
class PoolTotal:
    """The fold's state: counts and prompts so far, lines so far, and whether the limit is reached."""

    counts: np.ndarray
    records: int = 0
    lines: int = 0
    done: bool = False


#: a chunk counter: ``count(texts, specs, buckets)`` -> one count array per spec (the caller's,
#: :func:`capaudit.prompts.ngrams.count_chunk`; passed in, so this module does not import it back)
Counter = Callable[..., List[np.ndarray]]
Job = Tuple[Path, int, int, Optional[str], int, int, Counter]


def count_part(job: Job) -> PoolPart:
    """Counts of one shard (row numbers are not known here: a failure is only flagged)."""
    path, start, end, field, ngram, buckets, count_chunk = job
    # rows of a later shard are numbered from 2 on, so no line there is taken for the file's first
    batch, lines, failed = prompt_block_batch(read_line_range(path, start, end), path, field, 0 if start == 0 else 1)
    (counts,) = count_chunk(batch, ((ngram, None),), buckets)
    return PoolPart(counts, len(batch), lines, failed is not None, start, end)


class _Fold:
    def __init__(self, path: Path, field: Optional[str], limit: Optional[int], ngram: int, buckets: int,
                 count_chunk: Counter):
        self.path, self.field, self.limit, self.ngram, self.buckets = path, field, limit, ngram, buckets
        self.count_chunk = count_chunk
        self.done = False  # read by the shard stream: no shard is started after the limit

    def merge(self, parts: List[Union[PoolTotal, PoolPart]]) -> PoolTotal:
        """Left fold in file order (the merger hands the total so far first, then the next parts)."""
        total = parts[0] if isinstance(parts[0], PoolTotal) else self.add(PoolTotal(np.zeros(self.buckets, np.int64)), parts[0])
        for part in parts[1:]:
            total = self.add(total, part)
        return total

    def reread(self, part: PoolPart, total: PoolTotal):
        """``(batch, error)`` of a shard read again here, its rows numbered after ``total.lines``."""
        batch, _, failed = prompt_block_batch(read_line_range(self.path, part.start, part.end), self.path,
                                              self.field, total.lines)
        return batch, failed

    def add(self, total: PoolTotal, part: PoolPart) -> PoolTotal:
        if total.done:
            return total
        if self.limit is not None and total.records + part.records >= self.limit:
            left = self.limit - total.records
            counts = part.counts
            if part.records > left:  # the limit falls inside this shard: its first `left` prompts
                batch, _ = self.reread(part, total)
                (counts,) = self.count_chunk(batch.head(left), ((self.ngram, None),), self.buckets)
            total.counts += counts
            total.records, total.done = self.limit, True
            self.done = True
            return total
        if part.failed:  # reached before the limit: read again with the true rows, and raise
            _, failed = self.reread(part, total)
            raise failed if failed is not None else RuntimeError(f"{self.path}: a shard failed once, not twice")
        total.counts += part.counts
        total.records += part.records
        total.lines += part.lines
        return total


def count_pool_shards(path: Path, field: Optional[str], limit: Optional[int], ngram: int, buckets: int,
                      count_chunk: Counter, workers: int = 1) -> Tuple[np.ndarray, int]:
    """``(counts, non-blank prompts counted)`` of a JSON-lines pool (the first ``limit``), counted
    in shards of :data:`SHARD_BYTES` by ``workers`` local processes with ``count_chunk``."""
    from capaudit.engine.executors import map_merge

    path = Path(path)
    fold = _Fold(path, field, limit, ngram, buckets, count_chunk)
    size = path.stat().st_size

    def shards() -> Iterator[Job]:
        for start in range(0, size, SHARD_BYTES):
            if fold.done:
                return
            yield (path, start, min(start + SHARD_BYTES, size), field, ngram, buckets, count_chunk)

    try:
        total = map_merge(shards(), count_part, fold.merge, engine="local", workers=workers)
    except EmptyInputError:
        return np.zeros(buckets, np.int64), 0
    if isinstance(total, PoolPart):  # one shard only: merged by the fold all the same
        total = fold.merge([total])
    return total.counts, total.records
