"""A JSON-lines pool counted in byte-range shards (capaudit.prompts.pool_shards) gives the
sequential reading's counts, prompt count and errors exactly, for any shard size and workers."""

from __future__ import annotations

import json
import random
from pathlib import Path

import numpy as np
import pytest

import capaudit.prompts.pool_shards as pool_shards
from capaudit.prompts.io import iter_prompt_runs
from capaudit.prompts.ngrams import count_ngrams, load_pool_counts
from capaudit.prompts.pool_shards import read_line_range

WORDS = ["a", "red", "cat", "don't", "日本", "ÉTÉ", "x'y", "", " ", "\u3000", "\t", '"q"', "\\", "1920s", "\U0001F600"]


def _pool(path: Path, rng: random.Random, n: int, end_newline: bool = True) -> Path:
    lines = []
    for _ in range(n):
        text = " ".join(rng.choice(WORDS) for _ in range(rng.randrange(0, 7)))
        kind = rng.randrange(10)
        if kind == 0:
            lines.append(b"")
        elif kind == 1:
            lines.append(json.dumps({"id": "7", "prompt": text}, separators=(",", ":")).encode())
        elif kind == 2:
            lines.append(json.dumps({"prompt": text}).encode())  # escaped non-ASCII: parsed as JSON
        elif kind == 3:
            lines.append(b"\xef\xbb\xbf" + json.dumps({"prompt": text}).encode())  # a BOM: only row 1 may have one
        else:
            lines.append(json.dumps({"prompt": text}, ensure_ascii=False).encode())
    path.write_bytes(b"\n".join(lines) + (b"\n" if end_newline else b""))
    return path


def _sequential(path: Path, limit):
    texts = [t for run in iter_prompt_runs(path, limit=limit) for t in run]
    return count_ngrams(texts, 2, None, 2048), len(texts)


def _outcome(fn):
    try:
        return "ok", fn()
    except ValueError as exc:
        return "error", str(exc)


def test_line_ranges_cover_every_line_once(tmp_path: Path) -> None:
    p = tmp_path / "p.jsonl"
    data = b"".join(b"line %d%s\n" % (i, b"x" * (i % 13)) for i in range(300)) + b"no newline"
    p.write_bytes(data)
    for step in (1, 7, 64, 1000, len(data)):
        parts = [read_line_range(p, s, min(s + step, len(data))) for s in range(0, len(data), step)]
        assert b"".join(parts) == data, step


@pytest.mark.parametrize("seed", range(5))
def test_sharded_counts_are_the_sequential_counts(tmp_path: Path, monkeypatch, seed: int) -> None:
    rng = random.Random(seed)
    p = _pool(tmp_path / "pool.jsonl", rng, 600, end_newline=seed % 2 == 0)
    lines = p.read_bytes().split(b"\n")
    if seed >= 3:  # a BOM on row 1 only is read; elsewhere it is an error row, like any bad row
        p.write_bytes(b"\n".join(ln[3:] if ln.startswith(b"\xef\xbb\xbf") and i else ln for i, ln in enumerate(lines)))
        if seed == 4:
            with p.open("ab") as fh:
                fh.write(b'\n{"prompt": 5}\n{"prompt": "after"}\n')
    for shard in (97, 1024, 1 << 22):
        monkeypatch.setattr(pool_shards, "SHARD_BYTES", shard)
        for limit in (None, 1, 50, 333, 10 ** 6):
            want = _outcome(lambda: _sequential(p, limit))
            for workers in (1, 2):
                got = _outcome(lambda: load_pool_counts("t", p, 2, 2048, limit=limit, workers=workers))
                assert got[0] == want[0], (shard, limit, workers, got, want)
                if want[0] == "error":
                    assert got[1] == want[1]
                else:
                    assert got[1].records == want[1][1] and np.array_equal(got[1].counts, want[1][0])


def test_a_bad_row_before_the_limit_names_its_row(tmp_path: Path, monkeypatch) -> None:
    p = tmp_path / "bad.jsonl"
    rows = [json.dumps({"prompt": f"prompt number {i}"}) for i in range(400)]
    rows[250] = '{"prompt": ["not", "text"]}'
    p.write_text("\n".join(rows) + "\n")
    monkeypatch.setattr(pool_shards, "SHARD_BYTES", 512)
    with pytest.raises(ValueError, match=r"row 251, field 'prompt': expected a string"):
        load_pool_counts("t", p, 2, 2048, workers=2)
    assert load_pool_counts("t", p, 2, 2048, limit=250, workers=2).records == 250
