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
import re
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

PathLike = Union[str, Path]

HASH_BUCKETS = 262_144  # 2**18 (§3.2)
#: Bumped when the counting definition changes, so stale caches are never reused.
COUNTS_VERSION = 1
_TABLE_MAX = 64  # direct shift tables for byte lengths 0..64; longer ones are composed

_findall = LEX_RE.findall
_PREFIX_CHARS_PER_UNIT = 7  # a budget of B units is looked for in the first 7·B characters first


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
    cut = max_units * _PREFIX_CHARS_PER_UNIT
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


def tokenize_chunk(texts: Sequence[str], max_units: Optional[int] = None) -> TokenChunk:
    """Tokenise ``texts`` (§3.2 units, each match lower-cased; the first ``max_units`` per text)
    and give every unit its CRC data (``ids`` map occurrences to distinct units).

    ASCII texts are tokenised as bytes here (units keyed like
    :func:`capaudit.text.survey.tokenize_batch`, each distinct unit CRC'd once from its bytes);
    the others (with non-ASCII letters or digits) one by one when few, else through
    ``tokenize_batch`` (UTF-32, lower-cased per match). All are identical to ``LEX_RE.findall``
    (tests check it). With ``max_units`` a text longer than ``max_units * 7`` characters is
    tokenised from that prefix when the prefix holds more than ``max_units`` units (the first
    ``max_units`` are then complete), else again from a prefix twice as long, and so on.
    """
    texts = texts if isinstance(texts, list) else list(texts)
    if max_units is not None and max_units <= 0:
        return TokenChunk(np.zeros(0, np.int64), np.zeros(len(texts), np.int64), *_EMPTY_TAB)
    lens, ids, tab = _tokenize(texts, max_units, None if max_units is None else max_units * _PREFIX_CHARS_PER_UNIT)
    return TokenChunk(ids, lens, *tab)


def _tokenize(texts: List[str], max_units: Optional[int], cut: Optional[int]):
    """``(units per text, ids per kept occurrence, per distinct unit (unit_crc, space_crc,
    space_len))`` of :func:`tokenize_chunk`; ``cut``: the prefix (characters) tried first."""
    n = len(texts)
    parts: List[tuple] = []  # (text indices, units per text, ids), each in text order
    tables: List[tuple] = []
    heads = texts if cut is None else [t[:cut] for t in texts]  # a slice of a short text is the text
    ascii_ = np.fromiter(map(str.isascii, heads), bool, n)
    swap = {}
    if not ascii_.all():
        # a text whose non-ASCII characters are none of them alphanumeric has only ASCII units: each
        # such character is a unit boundary, as '?' is (the ASCII path then applies, unchanged)
        for i in np.flatnonzero(~ascii_).tolist():
            if _NON_ASCII_ALNUM(heads[i]) is None:
                swap[i] = heads[i].encode("ascii", "replace").decode("ascii")
                ascii_[i] = True
    for is_ascii in (True, False):
        idx = np.flatnonzero(ascii_) if is_ascii else np.flatnonzero(~ascii_)
        if idx.size == 0:
            continue
        sub = heads if idx.size == n and not swap else [swap.get(i, heads[i]) for i in idx.tolist()] if is_ascii \
            else [heads[i] for i in idx.tolist()]
        counts, ids, tab = (_ascii_units if is_ascii else _other_units)(sub, max_units)
        lens_g = counts if max_units is None else np.minimum(counts, max_units)
        if cut is not None:  # the prefix held too few units: those texts again, from a prefix twice as long
            redo = [k for k in np.flatnonzero(counts <= max_units).tolist() if len(texts[idx[k]]) > cut]
            if redo:
                keep = np.ones(idx.size, bool)
                keep[redo] = False
                parts.append((idx[keep], lens_g[keep], ids[np.repeat(keep, lens_g)]))
                tables.append(tab)
                idx = idx[redo]
                lens_g, ids, tab = _tokenize([texts[i] for i in idx.tolist()], max_units, 2 * cut)
        parts.append((idx, lens_g, ids))
        tables.append(tab)
    base = 0
    for k, tab in enumerate(tables):  # ids of every part into the concatenated tables
        if base:
            parts[k] = parts[k][:2] + (parts[k][2] + base,)
        base += tab[0].size
    lens = np.zeros(n, np.int64)
    for idx, lens_g, _ in parts:
        lens[idx] = lens_g
    if len(parts) == 1 and parts[0][0].size == n:
        ids = parts[0][2]
    else:  # place each part's occurrences in text order
        ids = np.empty(int(lens.sum()), np.int64)
        offsets = np.cumsum(lens) - lens
        for idx, lens_g, g_ids in parts:
            g_first = np.cumsum(lens_g) - lens_g
            ids[np.arange(g_ids.size) - np.repeat(g_first - offsets[idx], lens_g)] = g_ids
    if not tables:
        return lens, ids, _EMPTY_TAB
    if len(tables) == 1:
        return lens, ids, tables[0]
    return lens, ids, tuple(np.concatenate(t) for t in zip(*tables))


#: bytes.translate tables: 1 for an ASCII alphanumeric byte (``[^\W_]``), else 0
_ALNUM01 = bytes(1 if chr(c).isalnum() and c < 128 else 0 for c in range(256))
#: a non-ASCII character that ``[^\W_]`` matches (search: None when a text has none)
_NON_ASCII_ALNUM = re.compile(r"(?![\x00-\x7f])[^\W_]").search
_EMPTY_TAB = (np.zeros(0, np.uint32), np.zeros(0, np.uint32), np.zeros(0, np.int64))


def _keep_first(counts: np.ndarray, max_units: Optional[int]) -> Optional[np.ndarray]:
    """Positions (text order, ascending) of the unit occurrences that are among their text's first
    ``max_units``, or None when all are."""
    if max_units is None or int(counts.max(initial=0)) <= max_units:
        return None
    kept = np.minimum(counts, max_units)
    shift = np.cumsum(counts - kept)  # occurrences dropped up to and including each text
    shift -= counts - kept  # ... before each text
    return np.arange(int(kept.sum())) + np.repeat(shift, kept)


def _ascii_units(texts: List[str], max_units: Optional[int]):
    """ASCII texts: ``(units per text before the budget, ids of the kept occurrences, (unit_crc,
    space_crc, space_len) per distinct unit)``; units found as bytes (``[^\\W_]+(?:'[^\\W_]+)*``)."""
    n = len(texts)
    raw = ("\n" + "\n".join(texts) + "\n").encode("ascii")  # sentinels: no unit at either end
    m = np.frombuffer(bytearray(raw.translate(_ALNUM01)), np.int8)
    if b"'" in raw:  # an apostrophe between two alphanumerics joins them
        ap = np.flatnonzero(np.frombuffer(raw, np.uint8) == 39)
        ap = ap[(m[ap - 1] == 1) & (m[ap + 1] == 1)]
        m[ap] = 1
    mb = m.view(bool)
    edges = np.flatnonzero(mb[1:] ^ mb[:-1]) + 1
    starts, ends = edges[0::2], edges[1::2]
    tstart = np.empty(n + 1, np.int64)
    tstart[0] = 0
    np.cumsum(np.fromiter(map(len, texts), np.int64, n) + 1, out=tstart[1:])
    counts = np.diff(np.searchsorted(starts, tstart))
    if starts.size == 0:
        return counts, np.zeros(0, np.int64), _EMPTY_TAB
    keep = _keep_first(counts, max_units)
    if keep is not None:
        starts, ends = starts[keep], ends[keep]
    low = np.frombuffer((raw + _PAD8).lower(), np.uint8)  # 8 zero bytes after the text: whole words
    ids, firsts = _factorize(_unit_keys(low, starts, ends))
    return counts, ids, _byte_run_crcs(low, starts[firsts], ends[firsts])


_PAD8 = bytes(8)
_SHORT = 7  # units of up to 7 bytes are keyed exactly: their bytes and their length
_LOW_MASK = np.array([(1 << (8 * i)) - 1 for i in range(9)], np.uint64)  # [i]: the low i bytes


def _unit_keys(buf: np.ndarray, starts: np.ndarray, ends: np.ndarray) -> np.ndarray:
    """A 64-bit key per byte run ``buf[starts[i]:ends[i]]`` (``buf`` ends with 8 bytes after the
    last run): exact for runs of <= 7 bytes (the bytes, the length in the top byte), a hash of the
    run's 8-byte words and its length, top byte 0xFF (no short key has it), for longer runs.
    Only which keys are equal matters (:func:`_factorize`), never their values."""
    ln = ends - starts
    # word[i] = the 8 bytes from position i (little-endian): an unaligned strided view
    word = np.ndarray((buf.size - 7,), dtype="<u8", buffer=buf, strides=(1,))
    key = word[starts]
    key &= _LOW_MASK[np.minimum(ln, _SHORT)]
    key |= ln.astype(np.uint64) << np.uint64(56)
    long_ = np.flatnonzero(ln > _SHORT)
    if long_.size:
        st, ll = starts[long_], ln[long_]
        # a run of 8 bytes or more: its first and its last 8 bytes (whole words, overlapping when
        # it is shorter than 16), then any middle words, mixed with its length
        h = ll.astype(np.uint64) * np.uint64(0xD6E8FEB86659FD93)
        for w in (word[st], word[st + ll - 8]):
            h ^= w
            h *= np.uint64(0xBF58476D1CE4E5B9)
            h ^= h >> np.uint64(31)
        for k in range(8, int(ll.max()) - 8, 8):  # rare: runs longer than 16 bytes
            act = np.flatnonzero(ll - 8 > k)
            x = h[act] ^ word[st[act] + k]
            x *= np.uint64(0xBF58476D1CE4E5B9)
            h[act] = x ^ (x >> np.uint64(31))
        h ^= h >> np.uint64(30)
        h *= np.uint64(0x94D049BB133111EB)
        h ^= h >> np.uint64(29)
        key[long_] = h | np.uint64(0xFF << 56)
    return key


_FIB = np.uint64(0x9E3779B97F4A7C15)


def _factorize(key: np.ndarray) -> Tuple[np.ndarray, np.ndarray]:
    """``(ids, firsts)``: equal keys get equal ids ``0..u-1`` (int64) and distinct keys distinct
    ones; ``firsts[i]`` is the position of one occurrence of id ``i``.

    Numpy only (an exact, vectorised hash table): each round scatters the positions of the
    pending keys into a table by a multiplicative hash of the key; a slot keeps one of the
    positions written to it, and the occurrences whose key equals that position's key take the
    slot's id; the others go to the next round (another multiplier). Every used slot settles its
    own key, so it ends; keys are compared in full, so it is exact (a test checks it against
    ``pandas.factorize``).
    """
    n = key.size
    if n == 0:
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    firsts_parts = []
    pending = None  # positions still to settle (None: all)
    keys = key
    base = 0
    mult = 0x9E3779B97F4A7C15
    while keys.size:
        bits = min(max(int(keys.size).bit_length() - 1, 10), 16)
        slot = keys * np.uint64(mult)
        slot >>= np.uint64(64 - bits)
        slot = slot.view(np.intp)  # < 2**bits: the same values
        win = np.full(1 << bits, -1, np.intp)
        win[slot] = np.arange(keys.size)  # one position per used slot
        hit = keys.take(win.take(slot)) == keys
        used = win >= 0
        rank = np.cumsum(used)
        rank += base - 1
        got = rank.take(slot)
        first = win[used]
        if pending is None:
            ids = got.astype(np.int64, copy=False)
            firsts_parts.append(first)
            pending = np.flatnonzero(~hit)
        else:
            ids[pending[hit]] = got[hit]
            firsts_parts.append(pending[first])
            pending = pending[~hit]
        base += int(first.size)
        keys = key[pending]
        mult = (mult * 0x2545F4914F6CDD1D | 1) & 0xFFFFFFFFFFFFFFFF  # another odd multiplier
    return ids, firsts_parts[0] if len(firsts_parts) == 1 else np.concatenate(firsts_parts)


#: up to this many texts with non-ASCII letters or digits are tokenised one by one (a chunk of
#: mostly-ASCII captions has a few dozen); more go through the vectorised ``tokenize_batch``
_FEW_OTHER = 512


def _other_units(texts: List[str], max_units: Optional[int]):
    """:func:`_ascii_units` of any texts, lower-cased per match: one by one (``LEX_RE.findall``)
    when they are few, else via ``tokenize_batch``."""
    if len(texts) <= _FEW_OTHER:
        return _few_units(texts, max_units)
    from capaudit.text.survey import tokenize_batch

    try:
        counts, codes, vocab = tokenize_batch(texts, lower_units=True)
    except UnicodeEncodeError:  # a lone surrogate (UTF-32 refuses it) is no unit: the same units, one by one
        return _few_units(texts, max_units)
    if codes.size == 0:
        return counts, np.zeros(0, np.int64), _EMPTY_TAB
    keep = _keep_first(counts, max_units)
    if keep is not None:
        codes = codes[keep]
    return counts, codes.astype(np.int64, copy=False), _unit_crcs(vocab)


def _few_units(texts: List[str], max_units: Optional[int]) -> Tuple[np.ndarray, np.ndarray, Tuple[np.ndarray, ...]]:
    """:func:`_other_units` text by text: ``(units per text, ids of the kept occurrences, per
    distinct unit (unit_crc, space_crc, space_len))``, each unit CRC'd once by ``zlib``."""
    counts = np.empty(len(texts), np.int64)
    vocab: dict = {}
    ids: List[int] = []
    for i, text in enumerate(texts):
        units = _units(text)
        counts[i] = len(units)
        ids += [vocab.setdefault(u, len(vocab)) for u in (units if max_units is None else units[:max_units])]
    if not vocab:
        return counts, np.zeros(0, np.int64), _EMPTY_TAB
    raw = [u.encode("utf-8") for u in vocab]
    space = zlib.crc32(b" ")
    return counts, np.array(ids, np.int64), (np.fromiter(map(zlib.crc32, raw), np.uint32, len(raw)),
                                             np.fromiter((zlib.crc32(b, space) for b in raw), np.uint32, len(raw)),
                                             np.fromiter(map(len, raw), np.int64, len(raw)) + 1)


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
) -> List[np.ndarray]:
    """Whole-corpus hashed n-gram counts for several ``(n, budget)`` specs from one tokenisation.

    ``texts`` may be a stream (read chunk by chunk). Chunks are independent and their counts add,
    so any engine and number of workers give identical results. ``counter[0]`` (if given) is
    increased by the number of texts read.
    """
    from capaudit.engine.executors import map_merge

    specs_t = tuple((int(n), None if b is None else int(b)) for n, b in specs)

    def jobs():
        for c in _stream_chunks(texts, chunk_size):
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
    from capaudit.prompts.io import file_digest, iter_prompts, remembered_file_digest
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
                return PoolCounts(name, counts, int(info["records"]), ngram, buckets, str(path), digest)
    # streamed: a 1M-prompt pool is never held in memory
    read = [0]
    (counts,) = count_ngrams_multi(iter_prompts(path, field, fmt, limit), [(ngram, None)], buckets, 50_000,
                                   workers, engine, address, counter=read)
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
