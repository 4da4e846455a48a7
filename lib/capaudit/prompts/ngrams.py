"""Hashed n-gram counting for prompt-pool support (reference-spec §3.2), vectorised.

Definition (identical to the reference): the lex units of a text (``capaudit.text.lexical.LEX_RE``,
each match lower-cased), optionally the first ``budget`` of them; every contiguous n-gram is
hashed as ``zlib.crc32(" ".join(ngram).encode("utf-8")) % buckets``.

Implementation: texts are tokenised chunk by chunk; each distinct unit of a chunk is CRC'd once
(its bytes, and a space followed by its bytes). The CRC of an n-gram is then assembled from its
units with the CRC-32 combine identity ``crc(A+B) = shift(crc(A), len(B)) ^ crc(B)``, where
``shift`` is linear over GF(2) and tabulated per byte, so hashing is pure numpy; counts are a
``bincount``. A test checks the result against the plain ``zlib.crc32`` definition.
"""

from __future__ import annotations

import json
import zlib
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from itertools import islice
from typing import Iterable, Iterator, List, Optional, Sequence, Tuple, Union

import numpy as np

from capaudit.errors import EmptyInputError
from capaudit.io.atomic import atomic_path, write_text_atomic
from capaudit.text.lexical import LEX_RE
from capaudit.text.lexkernel import PREFIX_CHARS_PER_UNIT, EncodedTexts, factorize_keys, non_ascii_runs, unit_keys, unit_spans

PathLike = Union[str, Path]

HASH_BUCKETS = 262_144  # 2**18 (§3.2)
#: Bumped when the counting definition changes, so stale caches are never reused.
COUNTS_VERSION = 1
_TABLE_MAX = 64  # direct shift tables for byte lengths 0..64; longer ones are composed

_findall = LEX_RE.findall


def _units(text: str) -> List[str]:
    if text.isascii():
        return _findall(text.lower())  # identical for ASCII, and faster
    return [m.lower() for m in _findall(text)]


def support_units(text: str, max_units: Optional[int] = None) -> List[str]:
    """Lex units of ``text``, each match lower-cased (§3.2: the reference lowers per match).

    With ``max_units`` only the first ``max_units`` are returned. They are found in a prefix of
    the text when that prefix holds more than ``max_units`` matches: the first ``max_units`` are
    then complete (a later match starts after each of them ends), so the result is exact.
    """
    if max_units is None:
        return _units(text)
    if max_units <= 0:
        return []
    cut = max_units * PREFIX_CHARS_PER_UNIT
    if len(text) > cut:
        head = _units(text[:cut])
        if len(head) > max_units:
            return head[:max_units]
    return _units(text)[:max_units]


def hash_ngram(units: Sequence[str], buckets: int = HASH_BUCKETS) -> int:
    """Bucket of one n-gram, by the literal definition (used by tests as the oracle)."""
    return zlib.crc32(" ".join(units).encode("utf-8")) % buckets


@lru_cache(maxsize=1)
def _shift_table() -> np.ndarray:
    """``T[L, k, b] = shift(b << 8k, L)``: CRC state advanced over ``L`` zero bytes, linear part."""
    table = np.zeros((_TABLE_MAX + 1, 4, 256), dtype=np.uint32)
    for length in range(_TABLE_MAX + 1):
        zeros = b"\0" * length
        base = zlib.crc32(zeros)
        for k in range(4):
            for b in range(256):
                table[length, k, b] = zlib.crc32(zeros, b << (8 * k)) ^ base
    return table.reshape(-1)


def _shift(crc: np.ndarray, length: np.ndarray) -> np.ndarray:
    """``shift(crc, length)`` element-wise, for uint32 ``crc`` and byte lengths ``length``."""
    tables = _shift_tables()
    if int(length.max(initial=0)) > _TABLE_MAX:
        crc = crc.astype(np.uint32, copy=True)
        length = length.astype(np.int64, copy=True)
        table = _shift_table()
        long = np.flatnonzero(length > _TABLE_MAX)
        while long.size:  # rare: units longer than 63 bytes; advance 64 bytes at a time
            sub = crc[long]
            base = _TABLE_MAX * 1024
            sub = (
                table[base + (sub & 0xFF)]
                ^ table[base + 256 + ((sub >> 8) & 0xFF)]
                ^ table[base + 512 + ((sub >> 16) & 0xFF)]
                ^ table[base + 768 + (sub >> 24)]
            )
            crc[long] = sub
            length[long] -= _TABLE_MAX
            long = long[length[long] > _TABLE_MAX]
    base = length * 256
    byte = np.ascontiguousarray(crc, dtype="<u4").view(np.uint8).reshape(-1, 4)  # byte k = (crc >> 8k) & 0xFF
    out = tables[0][base + byte[:, 0]]
    for k in (1, 2, 3):
        out ^= tables[k][base + byte[:, k]]
    return out


_PAIR_TABLE_MAX = 1 << 20  # distinct units x byte lengths held by the table of _shift_first


def _shift_first(unit_crc: np.ndarray, first: np.ndarray, length: np.ndarray) -> np.ndarray:
    """``_shift(unit_crc[first], length)`` (a new array), shifting each distinct (unit, length)
    once: occurrences repeat few units and few lengths, so the table of the pairs that occur
    is much smaller than the occurrences (the same values, by table look-up)."""
    width = _TABLE_MAX + 1
    cells = unit_crc.size * width
    if cells > _PAIR_TABLE_MAX or cells > 2 * first.size or int(length.max(initial=0)) > _TABLE_MAX:
        return _shift(unit_crc[first], length)
    key = first * width
    key += length
    needed = np.zeros(unit_crc.size * width, bool)
    needed[key] = True
    cells = np.flatnonzero(needed)
    table = np.empty(needed.size, np.uint32)
    table[cells] = _shift(unit_crc[cells // width], cells % width)
    return table.take(key)


@lru_cache(maxsize=1)
def _shift_tables() -> Tuple[np.ndarray, ...]:
    """:func:`_shift_table` as four tables, ``[k][L * 256 + b] = shift(b << 8k, L)``."""
    t = _shift_table().reshape(_TABLE_MAX + 1, 4, 256)
    return tuple(np.ascontiguousarray(t[:, k, :]).reshape(-1) for k in range(4))


@dataclass
class TokenChunk:
    """Tokenised texts: per text its unit count; per unit occurrence (text order, then position)
    its CRC data. With ``ids`` set, the CRC arrays are per distinct unit and ``ids`` maps every
    occurrence to its unit; with ``ids`` None they are per occurrence already."""

    ids: Optional[np.ndarray]  # int64 unit ids per occurrence, or None (arrays per occurrence)
    lengths: np.ndarray  # int64, units per text
    unit_crc: np.ndarray  # uint32, crc32(unit)
    space_crc: np.ndarray  # uint32, crc32(" " + unit)
    space_len: np.ndarray  # int64, len((" " + unit).encode())

    @property
    def texts(self) -> int:
        return int(self.lengths.size)

    def occurrences(self) -> Tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``(unit_crc, space_crc, space_len)`` per unit occurrence."""
        if self.ids is None:
            return self.unit_crc, self.space_crc, self.space_len
        return self.unit_crc[self.ids], self.space_crc[self.ids], self.space_len[self.ids]


def tokenize_chunk(texts: Union[Sequence[str], EncodedTexts], max_units: Optional[int] = None) -> TokenChunk:
    """Tokenise ``texts`` (§3.2 units, each match lower-cased; the first ``max_units`` per text)
    and give every unit its CRC data (``ids`` map occurrences to distinct units).

    Units are found by :func:`capaudit.text.lexkernel.unit_spans` (``LEX_RE.findall``, every code
    point; the ``max_units`` prefix rule is the kernel's) as UTF-8 byte spans of the batch; each
    distinct unit is lower-cased (ASCII bytes in numpy, a unit with another character by
    ``str.lower``) and CRC'd once.
    """
    texts = texts if isinstance(texts, (list, EncodedTexts)) else list(texts)
    lens, ids, tab = _tokenize(texts, max_units)
    return TokenChunk(ids, lens, *tab)


def _tokenize(texts: Union[List[str], EncodedTexts], max_units: Optional[int]):
    """``(units per text (the first max_units), unit ids per kept occurrence, per distinct unit
    (unit_crc, space_crc, space_len))`` of :func:`tokenize_chunk`, from the lexical-unit kernel."""
    sp = unit_spans(texts, max_units)
    if sp.starts.size == 0:
        return sp.counts, np.zeros(0, np.int64), _EMPTY_TAB
    low = np.frombuffer(sp.raw.lower(), np.uint8)  # each unit lower-cased: ASCII bytes here, the others below
    ids, firsts = factorize_keys(unit_keys(low, sp.starts, sp.ends))
    fs, fe = sp.starts[firsts], sp.ends[firsts]
    unit_crc, space_crc, space_len = _byte_run_crcs(low, fs, fe)
    wide = np.flatnonzero(non_ascii_runs(low, fs, fe))
    if wide.size:  # a unit with a non-ASCII character: lower-cased by Python (str.lower), CRC'd by zlib
        units = [low[fs[k]:fe[k]].tobytes().decode("utf-8").lower() for k in wide.tolist()]
        unit_crc[wide], space_crc[wide], space_len[wide] = _unit_crcs(units)
    return sp.counts, ids, (unit_crc, space_crc, space_len)


_EMPTY_TAB = (np.zeros(0, np.uint32), np.zeros(0, np.uint32), np.zeros(0, np.int64))



def _byte_run_crcs(buf: np.ndarray, starts: np.ndarray, ends: np.ndarray) -> Tuple[np.ndarray, np.ndarray, np.ndarray]:
    """:func:`_unit_crcs` of the byte runs ``buf[starts[i]:ends[i]]`` (units, read from the buffer)."""
    lens = ends - starts
    table = _crc_table()
    out = []
    for init in (0, zlib.crc32(b" ")):
        crc = np.full(starts.size, init ^ 0xFFFFFFFF, np.uint32)
        act = np.arange(starts.size)
        for k in range(int(lens.max(initial=0))):
            if k:
                act = act[lens[act] > k]
            c = crc[act]
            crc[act] = table[(c ^ buf[starts[act] + k]) & np.uint32(0xFF)] ^ (c >> np.uint32(8))
        out.append(crc ^ np.uint32(0xFFFFFFFF))
    return out[0], out[1], lens + 1


@lru_cache(maxsize=1)
def _crc_table() -> np.ndarray:
    """The byte table of CRC-32 (reflected polynomial 0xEDB88320, as zlib)."""
    t = np.arange(256, dtype=np.uint32)
    for _ in range(8):
        t = np.where(t & 1, (t >> np.uint32(1)) ^ np.uint32(0xEDB88320), t >> np.uint32(1)).astype(np.uint32)
    return t


def _unit_crcs(vocab: Sequence[str]) -> Tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``crc32(unit)``, ``crc32(" " + unit)`` and ``len(" " + unit)`` in bytes for every unit, in
    numpy (the table-driven zlib algorithm over all units at once; a test checks it against zlib)."""
    n = len(vocab)
    if n == 0:
        return np.zeros(0, np.uint32), np.zeros(0, np.uint32), np.zeros(0, np.int64)
    blob = np.frombuffer("\x00".join(vocab).encode("utf-8"), np.uint8)  # units hold no NUL
    sep = np.flatnonzero(blob == 0)
    starts = np.concatenate([[0], sep + 1])
    lens = np.concatenate([sep, [blob.size]]) - starts
    table = _crc_table()
    out = []
    for init in (0, zlib.crc32(b" ")):
        crc = np.full(n, init ^ 0xFFFFFFFF, np.uint32)
        for k in range(int(lens.max())):
            act = np.flatnonzero(lens > k)
            c = crc[act]
            crc[act] = table[(c ^ blob[starts[act] + k]) & np.uint32(0xFF)] ^ (c >> np.uint32(8))
        out.append(crc ^ np.uint32(0xFFFFFFFF))
    return out[0], out[1], lens.astype(np.int64) + 1


def ngram_buckets(
    chunk: TokenChunk, n: int, budget: Optional[int] = None, buckets: int = HASH_BUCKETS
) -> Tuple[np.ndarray, np.ndarray]:
    """Buckets of every n-gram of the chunk's texts (first ``budget`` units) and their text index.

    Returns ``(bucket, text_index)``, both int64, in text order then position order.
    """
    bucket, per_text = ngram_buckets_per_text(chunk, n, budget, buckets)
    return bucket.astype(np.int64), np.repeat(np.arange(per_text.size, dtype=np.int64), per_text)


def ngram_buckets_per_text(
    chunk: TokenChunk, n: int, budget: Optional[int] = None, buckets: int = HASH_BUCKETS
) -> Tuple[np.ndarray, np.ndarray]:
    """:func:`ngram_buckets` as ``(bucket (uint32), n-grams per text)``."""
    if n < 1:
        raise ValueError(f"ngram must be >= 1, got {n}")
    if budget is not None and budget < 0:
        raise ValueError(f"budget must be >= 0 or None, got {budget}")
    lengths = chunk.lengths
    eff = lengths if budget is None or int(lengths.max(initial=0)) <= budget else np.minimum(lengths, budget)
    per_text = np.maximum(eff - n + 1, 0)
    total = int(per_text.sum())
    if total == 0:
        return np.zeros(0, dtype=np.uint32), per_text
    if eff is lengths:  # every unit counts: n-grams start anywhere but at a text's last n - 1 units
        ends = np.cumsum(lengths)
        valid = np.ones(int(ends[-1]), bool)
        for j in range(1, n):
            valid[ends[lengths >= j] - j] = False
        pos = np.flatnonzero(valid)
    else:
        offsets = np.cumsum(lengths) - lengths
        first = np.cumsum(per_text) - per_text
        pos = np.arange(total, dtype=np.int64) - np.repeat(first - offsets, per_text)
    ids = chunk.ids
    first = pos if ids is None else ids[pos]
    crc = None
    for k in range(1, n):
        unit = pos + k if ids is None else ids[pos + k]
        if k == 1:
            crc = _shift_first(chunk.unit_crc, first, chunk.space_len[unit])
        else:
            crc = _shift(crc, chunk.space_len[unit])
        crc ^= chunk.space_crc[unit]
    if crc is None:
        crc = chunk.unit_crc[first]
    if buckets & (buckets - 1) == 0:
        crc &= np.uint32(buckets - 1)  # = crc % buckets
    else:
        crc %= np.uint32(buckets)
    return crc, per_text


def iter_chunks(texts: Sequence[str], size: int) -> Iterator[Sequence[str]]:
    for start in range(0, len(texts), size):
        yield texts[start : start + size]


def _count_chunk(args: Tuple[Sequence[str], Tuple[Tuple[int, Optional[int]], ...], int]) -> List[Tuple[np.ndarray, int]]:
    texts, specs, buckets = args
    budgets = [b for _, b in specs]
    chunk = tokenize_chunk(texts, None if None in budgets else max(budgets))
    out = []
    for n, budget in specs:
        b, _ = ngram_buckets(chunk, n, budget, buckets)
        out.append((np.bincount(b, minlength=buckets).astype(np.int64), int(b.size)))
    return out


def count_ngrams_multi(
    texts: Iterable[str],
    specs: Sequence[Tuple[int, Optional[int]]],
    buckets: int = HASH_BUCKETS,
    chunk_size: int = 20_000,
    workers: int = 1,
    engine: str = "local",
    address: Optional[str] = None,
    counter: Optional[List[int]] = None,
    runs: bool = False,
) -> List[np.ndarray]:
    """Whole-corpus hashed n-gram counts for several ``(n, budget)`` specs from one tokenisation.

    ``texts`` may be a stream (read chunk by chunk), or with ``runs`` a stream of lists of texts
    or of encoded batches (:class:`capaudit.text.lexkernel.EncodedTexts`, each a chunk).
    Chunks are independent and their counts add, so any engine and number of workers give
    identical results. ``counter[0]`` (if given) is increased by the number of texts read.
    """
    from capaudit.engine.executors import map_merge

    specs_t = tuple((int(n), None if b is None else int(b)) for n, b in specs)

    def jobs():
        for c in (_rechunk(texts, chunk_size) if runs else _stream_chunks(texts, chunk_size)):
            if counter is not None:
                counter[0] += len(c)
            yield (c, specs_t, buckets)

    def merge(parts):  # lists of count arrays add elementwise
        return [sum(p[i] for p in parts) for i in range(len(specs_t))]

    try:
        out = map_merge(jobs(), _count_chunk_sums, merge, engine=engine, workers=workers, address=address)
    except EmptyInputError:
        return [np.zeros(buckets, dtype=np.int64) for _ in specs_t]
    return [np.asarray(x, dtype=np.int64) for x in out]


def _count_chunk_sums(args) -> List[np.ndarray]:
    return [counts for counts, _ in _count_chunk(args)]


def count_chunk(texts: Union[Sequence[str], EncodedTexts], specs: Sequence[Tuple[int, Optional[int]]],
                buckets: int = HASH_BUCKETS) -> List[np.ndarray]:
    """Hashed n-gram counts of one chunk of texts for each ``(n, budget)`` spec (one tokenisation)."""
    return _count_chunk_sums((texts, tuple(specs), buckets))


def _rechunk(runs: Iterable[Union[List[str], EncodedTexts]], size: int) -> Iterator[Union[List[str], EncodedTexts]]:
    """Lists of ``size`` texts (the last one shorter) from a stream of lists of texts; an encoded
    batch is a chunk of its own."""
    buf: List[str] = []
    for run in runs:
        if isinstance(run, EncodedTexts):
            if buf:
                yield buf
                buf = []
            yield run
            continue
        buf.extend(run)
        while len(buf) >= size:
            yield buf[:size]
            del buf[:size]
    if buf:
        yield buf


def _stream_chunks(texts: Iterable[str], size: int) -> Iterator[List[str]]:
    it = iter(texts)
    while True:
        chunk = list(islice(it, size))
        if not chunk:
            return
        yield chunk


def count_ngrams(
    texts: Sequence[str],
    n: int,
    budget: Optional[int] = None,
    buckets: int = HASH_BUCKETS,
    chunk_size: int = 20_000,
    workers: int = 1,
) -> np.ndarray:
    """Hashed n-gram counts (int64, length ``buckets``) of ``texts`` (§3.2)."""
    return count_ngrams_multi(texts, [(n, budget)], buckets, chunk_size, workers)[0]


def _map(func, jobs, workers: int):
    if workers <= 1:
        for job in jobs:
            yield func(job)
        return
    from concurrent.futures import ProcessPoolExecutor

    with ProcessPoolExecutor(max_workers=workers) as pool:
        yield from pool.map(func, jobs)


@dataclass
class PoolCounts:
    """Hashed n-gram counts of one prompt pool (§3.2 ``prompt_pools`` records / total n-grams)."""

    name: str
    counts: np.ndarray
    records: int
    ngram: int
    buckets: int
    source: str = ""
    digest: str = ""
    #: True when the counts were read from the cache (a warm run), False when counted in this run
    cached: bool = False

    @property
    def total_ngrams(self) -> int:
        return int(self.counts.sum())


def pool_counts_from_prompts(
    name: str,
    prompts: Sequence[str],
    ngram: int,
    buckets: int = HASH_BUCKETS,
    workers: int = 1,
    source: str = "",
) -> PoolCounts:
    """Counts of a pool given as a list of prompts (no budget on prompts, §3.2)."""
    counts = count_ngrams(prompts, ngram, None, buckets, workers=workers)
    return PoolCounts(name, counts, len(prompts), ngram, buckets, source)


def pool_cache_key(digest: str, ngram: int, buckets: int, field: Optional[str], limit: Optional[int]) -> str:
    """Cache key of a pool's counts: content digest of the file + n + buckets (+ field, limit)."""
    import hashlib

    payload = json.dumps(
        {"v": COUNTS_VERSION, "digest": digest, "n": ngram, "buckets": buckets, "field": field, "limit": limit},
        sort_keys=True,
    )
    return hashlib.blake2b(payload.encode(), digest_size=12).hexdigest()


def load_pool_counts(
    name: str,
    path: PathLike,
    ngram: int,
    buckets: int = HASH_BUCKETS,
    field: Optional[str] = None,
    fmt: Optional[str] = None,
    limit: Optional[int] = 1_000_000,
    cache_dir: Optional[PathLike] = None,
    workers: int = 1,
    engine: str = "local",
    address: Optional[str] = None,
) -> PoolCounts:
    """Counts of a pool file (streamed; ``engine``/``workers`` count its chunks), cached as ``<cache_dir>/<name>.n<n>.<key>.npy`` (+ ``.json``).

    The key hashes the file's bytes, ``ngram``, ``buckets``, ``field`` and ``limit``, so a cached
    array is reused across comparisons and runs, and never after the file changes. The file's
    digest itself is remembered in ``<cache_dir>/digests`` while the file is unchanged
    (:func:`capaudit.prompts.io.remembered_file_digest`), so a warm run does not read the pool.
    """
    from capaudit.prompts.io import detect_format, file_digest, iter_prompt_batches, remembered_file_digest
    from capaudit.prompts.pools import verify_pool_file

    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"{path}: prompt pool '{name}' not found")
    verify_pool_file(path)  # a truncated pool beside its manifest is refused, never used
    digest = file_digest(path) if cache_dir is None else remembered_file_digest(path, cache_dir)
    npy = meta = None
    if cache_dir is not None:
        key = pool_cache_key(digest, ngram, buckets, field, limit)
        cache = Path(cache_dir)
        npy = cache / f"{name}.n{ngram}.{key}.npy"
        meta = npy.with_suffix(".json")
        if npy.exists() and meta.exists():
            try:
                info = json.loads(meta.read_text(encoding="utf-8"))
                counts = np.load(npy)
            except (OSError, ValueError):  # a damaged cache entry is recomputed, not trusted
                info, counts = {}, np.zeros(0)
            if counts.shape == (buckets,) and counts.dtype == np.int64 and "records" in info:
                return PoolCounts(name, counts, int(info["records"]), ngram, buckets, str(path), digest, cached=True)
    # streamed: a 1M-prompt pool is never held in memory; a JSON-lines file on this machine is
    # counted in byte-range shards that the workers read themselves
    read = [0]
    if engine == "local" and detect_format(path, fmt) == "jsonl" and path.suffix.lower() != ".gz":
        from capaudit.prompts.pool_shards import count_pool_shards

        counts, read[0] = count_pool_shards(path, field, limit, ngram, buckets, count_chunk, workers)
    else:
        (counts,) = count_ngrams_multi(iter_prompt_batches(path, field, fmt, limit), [(ngram, None)], buckets, 50_000,
                                       workers, engine, address, counter=read, runs=True)
    if not read[0]:
        raise ValueError(f"{path}: prompt pool '{name}' has no non-empty prompts")
    pool = PoolCounts(name, counts, read[0], ngram, buckets, str(path), digest)
    if npy is not None and meta is not None:
        with atomic_path(npy) as tmp, open(tmp, "wb") as fh:
            np.save(fh, pool.counts)
        write_text_atomic(
            meta,
            json.dumps(
                {"name": name, "source": str(path), "digest": digest, "ngram": ngram, "buckets": buckets,
                 "field": field, "limit": limit, "records": pool.records, "total_ngrams": pool.total_ngrams,
                 "version": COUNTS_VERSION},
                indent=2,
            )
            + "\n",
        )
    return pool
