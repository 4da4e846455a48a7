"""Checksummed registry of external data files and the local cache that mirrors it.

See :mod:`capaudit.data.registry` (``fetch``, ``entry``, ``data_dir``) and
:mod:`capaudit.data.build_registry` (regenerates ``registry.json`` from PROVENANCE.md files).
"""

from .registry import DataError, RegistryEntry, data_dir, entries, entry, fetch, fetch_many, verify  # noqa: F401

__all__ = ["DataError", "RegistryEntry", "data_dir", "entries", "entry", "fetch", "fetch_many", "verify"]
