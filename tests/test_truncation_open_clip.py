"""``encoder-truncation --clean open_clip`` = open_clip's own token counts, checked on held-out captions.

``OpenClipCount`` below is written for this test from open_clip 3.3.0's ``SimpleTokenizer``
(``clean='lower'``) as its source describes the algorithm, sharing no code with capaudit (which counts
through instant-clip-tokenizer): text cleaning = ``ftfy.fix_text``, ``html.unescape`` twice, strip,
whitespace runs to one space (``str.split``), lower-case; pre-tokenizer = the ``regex`` module's
``<start_of_text>|<end_of_text>|'s|'t|'re|'ve|'m|'ll|'d|[\\p{L}]+|[\\p{N}]|[^\\s\\p{L}\\p{N}]+`` with
IGNORECASE (digits one by one; open_clip's special tokens are its own spellings, not OpenAI's
``<|startoftext|>``); each piece's UTF-8 bytes through the GPT-2 byte → symbol table; greedy BPE by
merge rank over the merges of ``bpe_simple_vocab_16e6.txt.gz`` (lines 1..48894), ``</w>`` on the
last symbol; ids = the 256 symbols, the same + ``</w>``, one per merge, then the two special tokens.

The held-out corpus is real captions the ``GOLD`` sample of ``test_truncation.py`` does not use:
img2dataset alt-text rows 200.. (HTML entities, mojibake, odd whitespace), nocaps, CC3M, IIW-400
rows 100.., DCI_Test and LocNar (long human / model descriptions). Compared: every caption's ids and
count, whole and cut at the survey budgets, and the values ``capaudit encoder-truncation --clean
open_clip`` prints (clip77 and longclip248 × the 12 STAT_KEYS = 24 per window). Skips, saying so, only
when the vocabulary file, ftfy, regex or the shared data are missing.
"""

from __future__ import annotations

import gzip
import html
import json
from pathlib import Path

import pytest

from capaudit.budgets import DEFAULT_BUDGETS
from capaudit.cli import main
from capaudit.text import truncation as T

pytest.importorskip("instant_clip_tokenizer")

VOCAB_SHA256 = "924691ac288e54409236115652ad4aa250f48203de50a9e4722a6ecd48d6804a"
N_MERGES = 49152 - 256 - 2


class OpenClipCount:
    """open_clip's SimpleTokenizer (clean='lower') token ids, from the BPE vocabulary file alone."""

    SPECIAL = ("<start_of_text>", "<end_of_text>")

    def __init__(self, vocab: Path):
        import ftfy
        import regex

        self._fix = ftfy.fix_text
        lines = gzip.decompress(vocab.read_bytes()).decode("utf-8").split("\n")
        merges = [tuple(line.split()) for line in lines[1:1 + N_MERGES]]
        assert len(merges) == N_MERGES and all(len(m) == 2 for m in merges)
        printable = [*range(0x21, 0x7F), *range(0xA1, 0xAD), *range(0xAE, 0x100)]
        symbol = {b: chr(b) for b in printable}
        rest = [b for b in range(256) if b not in symbol]
        symbol.update({b: chr(256 + k) for k, b in enumerate(rest)})  # the others, shifted past 255
        self.symbol = symbol
        base = [symbol[b] for b in printable + rest]
        table = base + [s + "</w>" for s in base] + [a + b for a, b in merges] + list(self.SPECIAL)
        self.id = {s: i for i, s in enumerate(table)}
        assert len(self.id) == len(table) == 49408
        self.rank = {m: r for r, m in enumerate(merges)}
        self.split = regex.compile(r"<start_of_text>|<end_of_text>|'s|'t|'re|'ve|'m|'ll|'d|[\p{L}]+|[\p{N}]|"
                                   r"[^\s\p{L}\p{N}]+", regex.IGNORECASE).findall
        self._memo: dict = {}

    def clean(self, text: str) -> str:
        text = html.unescape(html.unescape(self._fix(text))).strip()
        return " ".join(text.split()).lower()

    def _bpe(self, piece: str) -> list:
        done = self._memo.get(piece)
        if done is not None:
            return done
        word = [*piece[:-1], piece[-1] + "</w>"]
        while len(word) > 1:
            ranks = [self.rank.get(p) for p in zip(word, word[1:])]
            known = [r for r in ranks if r is not None]
            if not known:
                break
            best = min(known)
            merged, i = [], 0
            while i < len(word):  # every occurrence of the best pair, left to right
                if i + 1 < len(word) and ranks[i] == best:
                    merged.append(word[i] + word[i + 1])
                    i += 2
                else:
                    merged.append(word[i])
                    i += 1
            word = merged
        self._memo[piece] = word
        return word

    def ids(self, text: str) -> list:
        out: list = []
        for tok in self.split(self.clean(text)):
            if tok in self.SPECIAL:
                out.append(self.id[tok])
            else:
                out += [self.id[s] for s in self._bpe("".join(self.symbol[b] for b in tok.encode("utf-8")))]
        return out

    def count(self, text: str) -> int:
        return len(self.ids(text)) + 2  # + start and end tokens


@pytest.fixture(scope="module")
def ref(data_dir):
    pytest.importorskip("ftfy", reason="open_clip's cleaning needs ftfy (a declared dependency): not installed")
    pytest.importorskip("regex", reason="the independent open_clip-style counter needs the regex module")
    from capaudit.io.manifest import sha256_of
    from capaudit.resources import clip_bpe_vocab_path

    cands = [clip_bpe_vocab_path(), data_dir / "clip_bpe" / "bpe_simple_vocab_16e6.txt.gz"]
    vocab = next((Path(c) for c in cands if c and Path(c).is_file()), None)
    if vocab is None:
        pytest.skip("CLIP BPE vocabulary bpe_simple_vocab_16e6.txt.gz not found: the open_clip equality is not "
                    "checked (setup/clip_bpe_vocab.sh, or CAPAUDIT_CLIP_BPE_VOCAB)")
    assert sha256_of(vocab) == VOCAB_SHA256
    return OpenClipCount(vocab)


@pytest.fixture(scope="module")
def clip_oc():
    return T.load_counter(T.resolve_encoder("clip77", clean="open_clip"))


@pytest.fixture(scope="module")
def heldout(data_dir) -> list:
    from capaudit.surfaces import iter_captions

    iiw = data_dir / "imageinwords"
    if not iiw.is_dir() or not (data_dir / "img2dataset_alttext_sample").is_dir():
        pytest.skip("shared data not found: the held-out open_clip comparison is not run")
    caps = [r.caption for r in iter_captions({"dataset": "img2dataset_alttext_sample", "path": "test_10000.parquet",
                                              "format": "parquet", "caption_field": "TEXT"})][200:]
    caps += [r.caption for r in iter_captions({"dataset": "imageinwords", "path": "IIW-400/data.jsonl",
                                               "format": "jsonl", "caption_field": "IIW"})][100:]
    for sub, fld, n in (("DCI_Test", "IIW", None), ("LocNar_Eval", "IIW-P5B", 300)):
        rows = [json.loads(x) for x in (iiw / sub / "data.jsonl").read_text(encoding="utf-8").splitlines() if x.strip()]
        caps += [r[fld] for r in rows if isinstance(r.get(fld), str)][:n]
    nocaps = data_dir / "nocaps_val" / "nocaps_corpus.json"
    if nocaps.is_file():
        caps += [c for row in json.loads(nocaps.read_text(encoding="utf-8"))[:300] for c in row["caption"]]
    cc3m = data_dir / "cc3m_validation" / "Validation_GCC-1.1.0-Validation.tsv"
    if cc3m.is_file():
        caps += [line.split("\t")[0] for line in cc3m.read_text(encoding="utf-8").splitlines()[:3000]]
    assert len(caps) > 15000
    return caps


def test_independent_counter_hand_checked(ref):
    assert ref.count("A photo of a cat.") == 8
    assert ref.count("person’s hat") == ref.count("person's hat") == 5  # ftfy straightens the quote
    assert ref.count("&amp;amp;") == 3  # unescaped twice: "&"
    assert ref.count("cafÃ© naÃ¯ve") == ref.count("café naïve")  # ftfy undoes the mojibake
    assert ref.count("2,000") == 7  # digits one by one: 2 , 0 0 0
    assert ref.ids("<END_OF_TEXT>") == [49407]  # open_clip's own spelling, after lower-casing
    assert ref.count("<|endoftext|>") > 3  # OpenAI's spelling is plain text to open_clip
    assert ref.count(" \t\n") == 2


def test_open_clip_counts_equal_independent_count_on_heldout(ref, clip_oc, heldout):
    """Token by token, whole captions and the lex-cut windows the survey counts."""
    texts = [c.strip() for c in heldout if isinstance(c, str) and c.strip()]
    budgets = list(DEFAULT_BUDGETS)
    texts += [w for c in texts for w in T.lex_windows(c, budgets)]
    texts = list(dict.fromkeys(texts))
    want = [ref.count(t) for t in texts]
    got = clip_oc.count(texts).tolist()
    diff = [(g, w, t[:80]) for g, w, t in zip(got, want, texts) if g != w]
    assert not diff, f"{len(diff)} of {len(texts)} counts differ from open_clip's (ours, open_clip, text): {diff[:5]}"
    for t in texts[::7]:
        assert clip_oc.ids(t) == ref.ids(t), repr(t[:80])


def test_cli_open_clip_summary_equals_independent_count(ref, heldout, tmp_path, capsys):
    """The values `encoder-truncation --clean open_clip` prints (24 per window) = those of open_clip's counts;
    the default (hf) differs on this corpus, so counting with the wrong cleaning fails here."""
    src = tmp_path / "heldout.jsonl"
    src.write_text("".join(json.dumps({"caption": c}, ensure_ascii=False) + "\n" for c in heldout), encoding="utf-8")
    budgets = list(DEFAULT_BUDGETS)
    args = ["encoder-truncation", str(src), "--caption-field", "caption", "--encoder", "clip77", "--encoder",
            "longclip248", "--budgets", ",".join(map(str, budgets))]
    assert main(args + ["--clean", "open_clip"]) == 0
    oc = json.loads(capsys.readouterr().out)
    assert main(args) == 0
    hf = json.loads(capsys.readouterr().out)
    texts = [c.strip() for c in heldout if isinstance(c, str)]  # --empty count: a blank caption is ""
    assert oc["input"]["captions_counted"] == len(texts)
    windows = {"full": [ref.count(t) for t in texts]}
    for b in budgets:
        windows[f"lex{b}"] = [ref.count(T.lex_windows(t, [b])[0]) for t in texts]
    for label, counts in windows.items():
        block = oc["encoders"] if label == "full" else oc["windows"][label]["encoders"]
        want = {e: T.truncation_stats(counts, ml) for e, ml in (("clip77", 77), ("longclip248", 248))}
        diff = [(e, k, block[e][k], want[e][k]) for e in want for k in T.STAT_KEYS if block[e][k] != want[e][k]]
        assert not diff, f"{label}: {len(diff)} of 24 values differ from open_clip's (encoder, key, ours, open_clip)" \
                         f": {diff}"
    full_hf = [(e, k) for e in ("clip77", "longclip248") for k in T.STAT_KEYS
               if hf["encoders"][e][k] != oc["encoders"][e][k]]
    assert full_hf, "hf and open_clip cleaning gave the same 24 values: the comparison would not see a mix-up"
    assert hf["encoder_details"]["clip77"]["clean"] == "hf" and oc["encoder_details"]["clip77"]["clean"] == "open_clip"
