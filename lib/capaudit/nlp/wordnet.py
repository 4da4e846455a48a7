"""WordNet 3.0 through NLTK, from Debian's ``wordnet-base`` + ``wordnet-sense-index`` files.

NLTK refuses data directories outside its search path and Debian ships no ``lexnames`` file, so
:func:`ensure_wordnet` copies ``/usr/share/wordnet`` once into ``<cache>/nltk_data/corpora/wordnet``
(``CAPAUDIT_CACHE``, default ``~/.cache/capaudit``), writes ``lexnames`` from the ``lexnames(5WN)``
man page, and puts that ``nltk_data`` first on NLTK's path. ``CAPAUDIT_WORDNET_DIR`` points at
another WNDB directory. A missing source gives one clear error with the install command.
"""

from __future__ import annotations

import functools
import gzip
import os
import re
import shutil
from pathlib import Path
from typing import Any, Optional

from capaudit.resources import ResourceMissing, cache_dir

DEBIAN_WORDNET = Path("/usr/share/wordnet")
LEXNAMES_MAN = Path("/usr/share/man/man5/lexnames.5WN.gz")
REQUIRED = ("data.noun", "index.noun", "index.sense", "noun.exc")
_POS_OF_LEXFILE = {"adj": 3, "adv": 4, "noun": 1, "verb": 2}
INSTALL_HINT = "apt-get install wordnet-base wordnet-sense-index (Debian/Ubuntu), or set CAPAUDIT_WORDNET_DIR"


class WordNetUnavailable(ResourceMissing):
    """WordNet files are not installed (a missing resource: servers answer 503, never retried)."""


def _lexnames_text() -> str:
    lines = []
    if LEXNAMES_MAN.exists():
        for line in gzip.open(LEXNAMES_MAN, "rt", encoding="utf-8", errors="replace"):
            if re.match(r"^\d\d\t", line):
                num, name = line.split("\t")[:2]
                name = name.strip()
                lines.append(f"{num}\t{name}\t{_POS_OF_LEXFILE[name.split('.')[0]]}\n")
    if len(lines) != 45:
        raise WordNetUnavailable(f"{LEXNAMES_MAN}: expected 45 lexicographer files, found {len(lines)}; {INSTALL_HINT}")
    return "".join(lines)


def prepare_nltk_data(source: Optional[Path] = None, root: Optional[Path] = None) -> Path:
    """Copy the WNDB files under ``root/corpora/wordnet`` (once); returns the ``nltk_data`` root."""
    src = Path(source or os.environ.get("CAPAUDIT_WORDNET_DIR", DEBIAN_WORDNET))
    root = Path(root or cache_dir() / "nltk_data")
    dst = root / "corpora" / "wordnet"
    if all((dst / f).exists() for f in REQUIRED + ("lexnames",)):
        return root
    missing = [f for f in REQUIRED if not (src / f).exists()]
    if missing:
        raise WordNetUnavailable(f"{src}: WordNet files missing ({', '.join(missing)}); {INSTALL_HINT}")
    tmp = dst.with_name(f".wordnet.{os.getpid()}.tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    for p in src.iterdir():
        if p.is_file():
            shutil.copy2(p, tmp / p.name)
    if not (tmp / "lexnames").exists():
        (tmp / "lexnames").write_text(_lexnames_text(), encoding="utf-8")
    if dst.exists():
        shutil.rmtree(tmp, ignore_errors=True)  # another process finished first
    else:
        os.replace(tmp, dst)
    return root


@functools.lru_cache(maxsize=1)
def wordnet() -> Any:
    """The loaded ``nltk.corpus.wordnet`` reader (WordNet 3.0)."""
    root = prepare_nltk_data()
    import nltk

    if str(root) not in nltk.data.path:
        nltk.data.path.insert(0, str(root))
    from nltk.corpus import wordnet as wn

    wn.ensure_loaded()
    return wn


__all__ = ["wordnet", "prepare_nltk_data", "WordNetUnavailable"]
