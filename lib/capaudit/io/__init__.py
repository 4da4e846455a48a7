"""File-writing discipline shared by every stage (atomic artifacts, manifests last)."""

from capaudit.io.atomic import atomic_path, atomic_write, write_bytes_atomic, write_json_atomic, write_text_atomic

__all__ = ["atomic_path", "atomic_write", "write_bytes_atomic", "write_json_atomic", "write_text_atomic"]
