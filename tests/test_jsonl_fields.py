"""The JSON-lines string-field scanner (capaudit.io.jsonl_fields) and the prompt batches built
on it: a plain line's value is exactly what a JSON parser gives, the common writers' lines are
plain, and a pool read as batches has the same prompts, units and errors as one read as strings."""

from __future__ import annotations

import json
import random
from pathlib import Path

import numpy as np
import orjson
import pytest

from capaudit.io.jsonl_fields import plain_string_fields, read_line_blocks, valid_utf8
from capaudit.prompts.io import iter_prompt_batches, iter_prompt_runs
from capaudit.prompts.ngrams import count_ngrams, load_pool_counts
from capaudit.text.lexical import LEX_RE
from capaudit.text.lexkernel import unit_spans

PIECES = ["a cat", "don't", "Ünïcödé", "日本語", "\U0001F600", '"', "\\", "\n", "\t", "\u2028", "\x00", "\x7f", " ",
          "\u3000", "\u00a0", "'", "{", "}", ",", ":", "\ud800", "é\u0301", "x" * 40, ""]


def _value(rng: random.Random) -> str:
    return "".join(rng.choice(PIECES) for _ in range(rng.randrange(0, 6)))


def _line(rng: random.Random, field: str, invalid: bool = True) -> bytes:
    """One JSON line as some writer would put it, or a line that is not plain at all (with
    ``invalid``, now and then one that is not UTF-8: its whole block is then not plain)."""
    kind = rng.randrange(12)
    if kind == 9 and not invalid:
        kind = 0
    obj: dict = {field: _value(rng)}
    if kind in (1, 2):
        obj = {"id": rng.randrange(99), **obj} if kind == 1 else {**obj, "source": _value(rng)}
    elif kind == 3:
        obj = {"a": "b", field: _value(rng), "c": "d"}
    seps = rng.choice([(", ", ": "), (",", ":"), (" ,", " : "), (",  ", ":  ")])
    ascii_ = rng.random() < 0.3
    text = json.dumps(obj, ensure_ascii=ascii_ or not invalid, separators=seps)  # a raw lone surrogate is not UTF-8
    if kind == 4:
        text = text[:-1] + f', "{field}": "dup"}}'  # the field twice
    elif kind == 5:
        text = " " + text
    elif kind == 6:
        text = json.dumps(obj[field])  # a bare string
    elif kind == 7:
        return b""
    elif kind == 8:
        return text.encode("utf-8", "surrogatepass") + b"\r"
    elif kind == 9:
        return text.encode("utf-8", "surrogatepass")[:-1] + b"\xff}"  # not UTF-8
    elif kind == 10:
        return json.dumps({"other": obj[field]}).encode()
    return text.encode("utf-8", "surrogatepass")


def _parse(line: bytes):
    try:
        return orjson.loads(line)
    except orjson.JSONDecodeError:
        return None


@pytest.mark.parametrize("seed", range(6))
def test_a_plain_lines_value_is_what_a_json_parser_reads(seed: int) -> None:
    rng = random.Random(seed)
    lines = [_line(rng, "prompt", invalid=seed >= 3) for _ in range(3000)]
    block = b"\n".join(lines) + (b"\n" if seed % 2 else b"")
    # the scanner is asked about the block as a whole, and the block may be invalid UTF-8 somewhere
    for part in ([block] if seed < 3 else [b"\n".join(lines[i:i + 50]) + b"\n" for i in range(0, len(lines), 50)]):
        sp = plain_string_fields(part, ["prompt"])
        got_lines = part.split(b"\n")[:sp.lines]
        assert sp.lines == len(got_lines)
        for i in np.flatnonzero(sp.plain).tolist():
            obj = _parse(got_lines[i])
            assert isinstance(obj, dict), got_lines[i]
            assert part[sp.starts[i, 0]:sp.ends[i, 0]].decode("utf-8") == obj["prompt"], got_lines[i]
            assert part[sp.line_starts[i]:sp.line_ends[i]] == got_lines[i]
        assert seed >= 3 or sp.plain.sum() > 100  # the common writers' lines are plain: the fast path runs


def test_the_common_writers_lines_are_plain_and_others_are_not() -> None:
    lines = [json.dumps({"prompt": "a red cat"}), json.dumps({"prompt": "日本語"}, ensure_ascii=False),
             json.dumps({"prompt": "x", "n": "y"}, separators=(",", ":")), '{"n": "1", "prompt": ""}',
             json.dumps({"prompt": "a \"quoted\" cat"}), json.dumps({"prompt": "日本語"}), '{"prompt": null}',
             '{"prompt": "a", "prompt": "b"}', '{"prompt": "a"} ', '{ "prompt": "a"}', '{"n": 1, "prompt": "a"}', '',
             '["prompt", "a"]', '"a bare string"', '{"prompts": "a"}', '{"prompt": "a\tb"}', '{"prompt": "a"}\r']
    sp = plain_string_fields("\n".join(lines).encode(), ["prompt"])
    assert sp.plain.tolist() == [True] * 4 + [False] * 13
    assert plain_string_fields(b"", ["prompt"]).lines == 0 and plain_string_fields(b"\n", ["prompt"]).lines == 1
    two = plain_string_fields(b'{"a": "1", "b": "2"}\n', ["b", "a"])  # fields in any order
    assert two.plain.tolist() == [True] and two.starts.tolist() == [[17, 7]] and two.ends.tolist() == [[18, 8]]


def test_utf8_validity_is_pythons() -> None:
    rng = random.Random(1)
    edge = [0x00, 0x41, 0x7F, 0x80, 0xBF, 0xC0, 0xC1, 0xC2, 0xDF, 0xE0, 0xED, 0xEF, 0xF0, 0xF4, 0xF5, 0xFF, 0x9F, 0xA0, 0x8F, 0x90]
    for _ in range(20000):
        b = bytes(rng.choice(edge) if rng.random() < 0.7 else rng.randrange(256) for _ in range(rng.randrange(1, 8)))
        try:
            b.decode("utf-8")
            want = True
        except UnicodeDecodeError:
            want = False
        assert valid_utf8(b) is want, b
    assert not valid_utf8("\ud800".encode("utf-8", "surrogatepass")) and valid_utf8("\U0010FFFF".encode())


def test_blocks_are_whole_lines(tmp_path: Path) -> None:
    p = tmp_path / "x.jsonl"
    data = b"".join(b'{"prompt": "%d"}\n' % i for i in range(5000)) + b'{"prompt": "last"}'
    p.write_bytes(data)
    with p.open("rb") as fh:
        blocks = list(read_line_blocks(fh, size=1000))
    assert b"".join(blocks) == data and all(b.endswith(b"\n") for b in blocks[:-1]) and len(blocks) > 50


def _pool(tmp_path: Path, seed: int, n: int = 4000) -> Path:
    rng = random.Random(seed)
    lines = [_line(rng, "prompt", invalid=False) for _ in range(n)]
    good = [ln for ln in lines if _parse(ln) is not None and (isinstance(_parse(ln), str) or "prompt" in _parse(ln))]
    p = tmp_path / f"pool{seed}.jsonl"
    p.write_bytes(b"\n".join(good + [b"", b"   "]) + b"\n")
    return p


def _batch_units(path: Path, **kw) -> list:
    out = []
    for batch in iter_prompt_batches(path, **kw):
        sp = unit_spans(batch)
        k = 0
        for c in sp.counts.tolist():
            out.append([sp.unit(j).lower() for j in range(k, k + c)])
            k += c
    return out


@pytest.mark.parametrize("seed", range(4))
def test_batches_hold_the_same_prompts_and_units_as_the_strings(tmp_path: Path, seed: int) -> None:
    p = _pool(tmp_path, seed)
    for limit in (None, 1, 777, 10 ** 6):
        texts = [t for run in iter_prompt_runs(p, limit=limit) for t in run]
        want = [[u.lower() for u in LEX_RE.findall(t)] for t in texts]
        assert _batch_units(p, limit=limit) == want
    texts = [t for run in iter_prompt_runs(p, limit=None) for t in run]
    pool = load_pool_counts("t", p, 2, 4096, limit=None)
    assert pool.records == len(texts)
    assert np.array_equal(pool.counts, count_ngrams(texts, 2, None, 4096))


def test_a_bad_row_is_named_and_one_after_the_limit_is_never_read(tmp_path: Path) -> None:
    p = tmp_path / "bad.jsonl"
    p.write_bytes(b'{"prompt": "one"}\n{"prompt": "two"}\n{"prompt": 3}\n{"prompt": "four"}\n')
    assert _batch_units(p, limit=2) == [["one"], ["two"]]
    with pytest.raises(ValueError) as batch_err:
        _batch_units(p, limit=3)
    with pytest.raises(ValueError) as str_err:
        list(iter_prompt_runs(p, limit=3))
    assert str(batch_err.value) == str(str_err.value) and "row 3" in str(batch_err.value)
    p.write_bytes(b'{"prompt": "one"}\n{"prompt": "tw\xffo"}\n')
    with pytest.raises(ValueError, match="row 2: not UTF-8"):
        _batch_units(p)
