"""Exact keyed counts that do not have to fit in memory: sorted, hash-partitioned runs on disk.

A keyed count table maps 64-bit keys to a row of int64 counts. When a stage's in-memory table
grows past its budget it calls :meth:`SpilledCounts.spill`: the rows are split into
``partitions`` by the top bits of a mixed key, each part is sorted by key and written as one run
(``<name>.p<part>.r<run>.keys.npy`` + ``.counts.npy``). :meth:`SpilledCounts.partitions` then
yields, one partition at a time, the exact aggregate (sorted unique keys, summed counts) of
every run, so peak memory is about one partition (total / ``partitions``), whatever the corpus
size. Counts are exact; the order in which a caller sums floats over the partitions is fixed
(partition 0, 1, ...; keys ascending inside each), so results do not depend on when spills
happened.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path
from typing import Iterator, List, Optional, Tuple

import numpy as np

_MIX = np.uint64(0x9E3779B97F4A7C15)


def mix64(keys: np.ndarray) -> np.ndarray:
    """splitmix64 finaliser: well-spread bits for partitioning / sketches."""
    z = keys.astype(np.uint64, copy=True)
    z += _MIX
    z ^= z >> np.uint64(30)
    z *= np.uint64(0xBF58476D1CE4E5B9)
    z ^= z >> np.uint64(27)
    z *= np.uint64(0x94D049BB133111EB)
    z ^= z >> np.uint64(31)
    return z


def aggregate(keys: np.ndarray, counts: np.ndarray) -> Tuple[np.ndarray, np.ndarray]:
    """Sorted unique keys and the summed count rows of each."""
    if keys.size == 0:
        return keys.astype(np.uint64), counts.reshape(0, counts.shape[1] if counts.ndim == 2 else 1)
    order = np.argsort(keys, kind="stable")
    k = keys[order]
    c = counts[order]
    starts = np.flatnonzero(np.r_[True, k[1:] != k[:-1]])
    return k[starts], np.add.reduceat(c, starts, axis=0)


class SpillDir:
    """A temporary folder for spilled runs (removed by :meth:`close` or on exit of ``with``)."""

    def __init__(self, parent: Optional[str] = None):
        if parent is not None:
            Path(parent).mkdir(parents=True, exist_ok=True)
        self.path = Path(tempfile.mkdtemp(prefix="capaudit-spill-", dir=parent))

    def close(self) -> None:
        shutil.rmtree(self.path, ignore_errors=True)

    def __enter__(self) -> "SpillDir":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


class SpilledCounts:
    """Runs of one keyed count table under ``directory`` (module docstring)."""

    def __init__(self, directory: os.PathLike | str, name: str, ncols: int, partitions: int = 16):
        if partitions < 1 or partitions & (partitions - 1):
            raise ValueError(f"partitions must be a power of two, got {partitions}")
        self.dir = Path(directory)
        self.dir.mkdir(parents=True, exist_ok=True)
        self.name = name
        self.ncols = ncols
        self.partitions = partitions
        self.bits = partitions.bit_length() - 1
        self.runs = 0
        self.rows_spilled = 0

    def _part_of(self, keys: np.ndarray) -> np.ndarray:
        if self.bits == 0:
            return np.zeros(keys.size, np.int64)
        return (mix64(keys) >> np.uint64(64 - self.bits)).astype(np.int64)

    def _file(self, part: int, run: int, what: str) -> Path:
        return self.dir / f"{self.name}.p{part:03d}.r{run:05d}.{what}.npy"

    def spill(self, keys: np.ndarray, counts: np.ndarray) -> None:
        """Write one run: the rows of ``keys``/``counts`` split by partition, each sorted by key."""
        counts = counts.reshape(keys.size, self.ncols)
        part = self._part_of(keys)
        order = np.lexsort((keys, part))
        k, c, p = keys[order], counts[order], part[order]
        bounds = np.searchsorted(p, np.arange(self.partitions + 1))
        for i in range(self.partitions):
            a, b = bounds[i], bounds[i + 1]
            np.save(self._file(i, self.runs, "keys"), k[a:b])
            np.save(self._file(i, self.runs, "counts"), c[a:b])
        self.runs += 1
        self.rows_spilled += int(keys.size)

    def partition(self, i: int) -> Tuple[np.ndarray, np.ndarray]:
        """Exact aggregate of partition ``i`` over every run: (sorted unique keys, counts)."""
        ks: List[np.ndarray] = []
        cs: List[np.ndarray] = []
        for r in range(self.runs):
            ks.append(np.load(self._file(i, r, "keys")))
            cs.append(np.load(self._file(i, r, "counts")))
        if not ks:
            return np.zeros(0, np.uint64), np.zeros((0, self.ncols), np.int64)
        return aggregate(np.concatenate(ks), np.concatenate(cs))

    def partitions_iter(self) -> Iterator[Tuple[np.ndarray, np.ndarray]]:
        for i in range(self.partitions):
            yield self.partition(i)


__all__ = ["SpillDir", "SpilledCounts", "aggregate", "mix64"]
