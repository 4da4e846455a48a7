"""The lexical-unit tokenizer kernel: ``LEX_RE.findall`` over a whole batch of texts at once.

**The definition** (reference-spec §1.1, :mod:`capaudit.text.lexical`): a lexical unit is a
maximal run of characters that ``[^\\W_]`` matches, where an ASCII apostrophe between two such
characters joins them (``[^\\W_]+(?:'[^\\W_]+)*``). Python's ``re`` matches ``[^\\W_]`` exactly
when ``str.isalnum()`` is true of the character, so the character class is a table built from
``str.isalnum`` over every code point (:func:`unit_char_table`; a test walks all 0x110000).

**The engine** (numpy, no Python step per text or per unit): the texts of a batch are joined by
NUL (never a unit character, so no unit crosses a text) and encoded as UTF-8 once
(``surrogatepass``: a lone surrogate is a 3-byte sequence, decoded to its code point, which is
no unit character). Each byte is marked as part of a unit character by decoding the code point at
every lead byte and looking it up in the table (a character's continuation bytes take its lead's
mark); an apostrophe byte between two marked bytes is marked; units are the maximal marked runs.
Their byte spans index the batch's buffer, so a unit's UTF-8 bytes (what prompt support's CRC
reads) are read straight from it. Every code point is handled by the engine: no text falls back.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from typing import List, Optional, Sequence, Tuple, Union

import numpy as np

#: how many characters per wanted unit a text is first read from (``max_units``; see unit_spans)
PREFIX_CHARS_PER_UNIT = 7
PAD_BYTES = 8  # zero bytes after the buffer: an 8-byte word can be read at any unit's start


@lru_cache(maxsize=1)
def unit_char_table() -> np.ndarray:
    """``table[cp]``: whether the code point is a unit character, all 0x110000: the runs that the
    definition's own class ``[^\\W_]`` matches in the string of every code point (one regex pass,
    3x faster than ``str.isalnum`` per code point; a test checks it against ``str.isalnum``)."""
    import re

    every = np.arange(0x110000, dtype="<u4").tobytes().decode("utf-32-le", "surrogatepass")
    table = np.zeros(0x110000, bool)
    for m in re.finditer(r"[^\W_]+", every):
        table[m.start():m.end()] = True
    return table


#: the ASCII part of the table, by byte (bytes >= 0x80 are decoded first), for ``bytes.translate``
_ASCII_UNIT = bytes(1 if c < 128 and chr(c).isalnum() else 0 for c in range(256))
_APOSTROPHE = 39


@dataclass(frozen=True)
class UnitSpans:
    """The lexical units of a batch of texts as byte spans of its UTF-8 buffer.

    ``raw`` (``buf`` as bytes) holds the texts joined by NUL (8 zero bytes after them); unit ``k`` is
    ``buf[starts[k]:ends[k]]``; units are in text order, then position; ``counts[i]`` units
    belong to text ``i`` (with ``max_units``: its first ``max_units``)."""

    raw: bytes
    starts: np.ndarray  # int64
    ends: np.ndarray  # int64
    counts: np.ndarray  # int64, per text

    @property
    def buf(self) -> np.ndarray:
        """``raw`` as a uint8 array (no copy)."""
        return np.frombuffer(self.raw, np.uint8)

    def unit(self, k: int) -> str:
        """Unit ``k`` as text (the inverse of the encoding)."""
        return self.buf[self.starts[k]:self.ends[k]].tobytes().decode("utf-8", "surrogatepass")


def non_ascii_runs(buf: np.ndarray, starts: np.ndarray, ends: np.ndarray) -> np.ndarray:
    """Per byte run ``buf[starts[k]:ends[k]]``: whether it holds a byte >= 0x80."""
    hi = np.flatnonzero(buf >= 0x80)
    if not hi.size:
        return np.zeros(starts.size, bool)
    return np.searchsorted(hi, ends) > np.searchsorted(hi, starts)


def unit_mask(raw: bytes) -> np.ndarray:
    """Per byte of the UTF-8 text ``raw`` (valid UTF-8, surrogates allowed, 4 zero bytes after
    the text): whether it belongs to a unit character, or is a joining apostrophe."""
    m = np.frombuffer(bytearray(raw.translate(_ASCII_UNIT)), bool)
    buf = np.frombuffer(raw, np.uint8)
    lead = np.flatnonzero(buf >= 0xC0)
    if lead.size:
        b0 = buf[lead].astype(np.int64)
        b1, b2, b3 = (buf[lead + k].astype(np.int64) & 0x3F for k in (1, 2, 3))
        two, three = b0 < 0xE0, (b0 >= 0xE0) & (b0 < 0xF0)
        cp = np.where(two, ((b0 & 0x1F) << 6) | b1,
                      np.where(three, ((b0 & 0x0F) << 12) | (b1 << 6) | b2,
                               ((b0 & 0x07) << 18) | (b1 << 12) | (b2 << 6) | b3))
        mark = unit_char_table()[cp]
        m[lead] = mark
        m[lead + 1] = mark  # every lead byte has at least one continuation byte
        m[lead[~two] + 2] = mark[~two]
        four = ~two & ~three
        m[lead[four] + 3] = mark[four]
    ap = np.flatnonzero(buf == _APOSTROPHE) if b"'" in raw else ()
    if len(ap):
        ap = ap[(ap > 0) & (ap + 1 < buf.size)]
        m[ap[m[ap - 1] & m[ap + 1]]] = True
    return m


@dataclass(frozen=True)
class EncodedTexts:
    """A batch of texts in one UTF-8 buffer: text ``i`` starts at byte ``first[i]`` and its units
    are the units that start before ``first[i + 1]`` (``first`` holds n + 1 values). Every byte
    between two texts is NUL, and ``raw`` ends with ``PAD_BYTES`` zero bytes, so no unit crosses a text
    and an 8-byte word can be read at any unit's start. Built by :func:`encode_texts`, or by a
    reader that leaves the texts where they lie in the bytes it read (zeroing the bytes between)."""

    raw: bytes
    first: np.ndarray  # int64, n + 1 values

    def __len__(self) -> int:
        return int(self.first.size) - 1

    def head(self, k: int) -> "EncodedTexts":
        """The first ``k`` texts."""
        end = int(self.first[k]) if k < len(self) else len(self.raw)
        return EncodedTexts(self.raw[:end] + bytes(PAD_BYTES), self.first[:k + 1].copy())


def encode_texts(texts: Sequence[str]) -> EncodedTexts:
    """The texts joined by NUL as UTF-8 (``surrogatepass``) with the zero padding after them. NUL
    is never a unit character, so no unit crosses a text; when no text holds one, the separators
    are the boundaries (found in one pass)."""
    n = len(texts)
    raw = "\0".join(texts).encode("utf-8", "surrogatepass")
    first = np.empty(n + 1, np.int64)
    first[0], first[n] = 0, len(raw) + 1
    if raw.count(0) == n - 1:
        first[1:n] = np.flatnonzero(np.frombuffer(raw, np.uint8) == 0) + 1
    else:  # a text holds a NUL: the texts' lengths in bytes
        lens = np.fromiter(map(len, texts), np.int64, n)
        wide = np.flatnonzero(~np.fromiter(map(str.isascii, texts), bool, n)).tolist()
        lens[wide] = [len(texts[i].encode("utf-8", "surrogatepass")) for i in wide]
        np.cumsum(lens[:-1] + 1, out=first[1:n])
    return EncodedTexts(raw + bytes(PAD_BYTES), first)


def _runs(raw: bytes) -> tuple:
    """Starts and ends of the marked runs of ``raw`` (its last ``PAD_BYTES`` bytes are padding)."""
    m = unit_mask(raw)  # the padding is never marked, so every run ends before it
    edge = np.flatnonzero(m[1:] != m[:-1])
    edge += 1
    if m[0]:
        edge = np.concatenate([[0], edge])
    return edge[0::2], edge[1::2]


def _first_units(counts: np.ndarray, max_units: int) -> Optional[np.ndarray]:
    """Indices (ascending) of the occurrences among their text's first ``max_units``, None when all are."""
    if int(counts.max(initial=0)) <= max_units:
        return None
    kept = np.minimum(counts, max_units)
    dropped_before = np.cumsum(counts - kept) - (counts - kept)
    return np.arange(int(kept.sum())) + np.repeat(dropped_before, kept)


def _spans(texts: Union[Sequence[str], EncodedTexts]) -> UnitSpans:
    enc = texts if isinstance(texts, EncodedTexts) else encode_texts(texts)
    starts, ends = _runs(enc.raw)
    counts = np.diff(np.searchsorted(starts, enc.first))
    return UnitSpans(enc.raw, starts, ends, counts)


def unit_spans(texts: Union[Sequence[str], EncodedTexts], max_units: Optional[int] = None) -> UnitSpans:
    """The lexical units of every text (``LEX_RE.findall(text)``), or with ``max_units`` the first
    ``max_units`` of each (of an :class:`EncodedTexts` batch: all units read, the first kept).

    With ``max_units`` a text longer than ``PREFIX_CHARS_PER_UNIT * max_units`` characters is first
    read from that prefix; when the prefix holds more than ``max_units`` units the first
    ``max_units`` are complete (the next one starts after each of them ends), else the whole text
    is read (those texts only, in a second pass)."""
    if isinstance(texts, EncodedTexts):
        sp = _spans(texts)
        keep = None if max_units is None else _first_units(sp.counts, max(max_units, 0))
        if keep is None:
            return sp
        return UnitSpans(sp.raw, sp.starts[keep], sp.ends[keep], np.minimum(sp.counts, max(max_units, 0)))
    texts = texts if isinstance(texts, list) else list(texts)
    if max_units is None:
        return _spans(texts)
    if max_units <= 0:
        z = np.zeros(0, np.int64)
        return UnitSpans(bytes(PAD_BYTES), z, z, np.zeros(len(texts), np.int64))
    cut = max_units * PREFIX_CHARS_PER_UNIT
    head = _spans([t[:cut] for t in texts])
    redo = np.flatnonzero(head.counts <= max_units)
    if redo.size:
        redo = redo[np.fromiter(map(len, texts), np.int64, len(texts))[redo] > cut]
    if not redo.size:
        keep = _first_units(head.counts, max_units)
        if keep is None:
            return head
        return UnitSpans(head.raw, head.starts[keep], head.ends[keep], np.minimum(head.counts, max_units))
    whole = _spans([texts[i] for i in redo.tolist()])
    # one buffer; each text's units from the pass that read it, first max_units, in text order
    shift = len(head.raw)
    counts = head.counts.copy()
    counts[redo] = whole.counts
    counts = np.minimum(counts, max_units)
    owner_h = np.repeat(np.arange(head.counts.size), head.counts)
    from_head = np.ones(head.counts.size, bool)
    from_head[redo] = False
    take_h = np.flatnonzero(from_head[owner_h])
    keep_w = _first_units(whole.counts, max_units)
    ws, we = (whole.starts, whole.ends) if keep_w is None else (whole.starts[keep_w], whole.ends[keep_w])
    keep_h = _first_units(np.where(from_head, head.counts, 0), max_units)
    hs, he = head.starts[take_h], head.ends[take_h]
    if keep_h is not None:
        hs, he = hs[keep_h], he[keep_h]
    total = int(counts.sum())
    starts = np.empty(total, np.int64)
    ends = np.empty(total, np.int64)
    first = np.cumsum(counts) - counts  # each text's first slot
    hc = np.where(from_head, counts, 0)
    slot_h = np.arange(hs.size) + np.repeat(first - (np.cumsum(hc) - hc), hc)
    wc = counts[redo]
    slot_w = np.arange(ws.size) + np.repeat(first[redo] - (np.cumsum(wc) - wc), wc)
    starts[slot_h], ends[slot_h] = hs, he
    starts[slot_w], ends[slot_w] = ws + shift, we + shift
    return UnitSpans(head.raw + whole.raw, starts, ends, counts)


def tokenize_batch(texts: Sequence[str], lower_units: bool = False) -> Tuple[np.ndarray, np.ndarray, List[str]]:
    """Lexical units of each text as ``(lens, codes, vocab)``: ``lens[i]`` units in text ``i``;
    ``codes`` numbers every unit occurrence (text order, then position) by first appearance;
    ``vocab[code]`` is the unit, exactly as ``LEX_RE.findall`` gives it (with ``lower_units``
    each unit lower-cased, as prompt support lowers per match). Units are keyed by
    :func:`unit_keys` and factorised by ``pandas.factorize`` (first appearance); each distinct unit
    is decoded once."""
    import pandas as pd

    sp = unit_spans(texts)
    if sp.starts.size == 0:
        return sp.counts, np.zeros(0, np.int64), []
    raw = sp.raw.lower() if lower_units else sp.raw  # bytes.lower: ASCII letters only
    buf = np.frombuffer(raw, np.uint8)
    codes, uniq = pd.factorize(unit_keys(buf, sp.starts, sp.ends))
    firsts = np.empty(len(uniq), np.int64)
    firsts[codes[::-1]] = np.arange(codes.size - 1, -1, -1)
    fs, fe = sp.starts[firsts], sp.ends[firsts]
    words = [raw[a:b].decode("utf-8") for a, b in zip(fs.tolist(), fe.tolist())]
    codes = codes.astype(np.int64, copy=False)
    if lower_units:
        wide = np.flatnonzero(non_ascii_runs(buf, fs, fe)).tolist()
        if wide:  # str.lower of the units with another character; units that become equal share a code
            for k in wide:
                words[k] = words[k].lower()
            vocab: dict = {}
            ids = np.fromiter((vocab.setdefault(w, len(vocab)) for w in words), np.int64, len(words))
            codes, words = ids[codes], list(vocab)
    return sp.counts, codes, words


def units_of(texts: Sequence[str], max_units: Optional[int] = None) -> list:
    """Per text, its units as strings (the kernel's answer in the definition's form; for tests)."""
    sp = unit_spans(texts, max_units)
    out, k = [], 0
    for c in sp.counts.tolist():
        out.append([sp.unit(j) for j in range(k, k + c)])
        k += c
    return out


# ---------------------------------------------------------------------------------------------
# units as keys: equal units, equal keys (the callers' vocabularies are built from these)
# ---------------------------------------------------------------------------------------------
_SHORT = 7  # units of up to 7 bytes are keyed exactly: their bytes and their length
_LOW_MASK = np.array([(1 << (8 * i)) - 1 for i in range(9)], np.uint64)  # [i]: the low i bytes


def unit_keys(buf: np.ndarray, starts: np.ndarray, ends: np.ndarray) -> np.ndarray:
    """A 64-bit key per byte run ``buf[starts[i]:ends[i]]`` (``buf`` ends with 8 bytes after the
    last run): exact for runs of <= 7 bytes (the bytes, the length in the top byte), a hash of the
    run's 8-byte words and its length, top byte 0xFF (no short key has it), for longer runs.
    Only which keys are equal matters (:func:`factorize_keys`), never their values."""
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


def factorize_keys(key: np.ndarray) -> Tuple[np.ndarray, np.ndarray]:
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
