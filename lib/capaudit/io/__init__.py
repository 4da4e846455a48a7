"""File-writing discipline shared by every stage (atomic artifacts, manifests last), checked
text decoding, file manifests, exclusive locks and canonical JSON (``canonical_json``)."""

from capaudit.io.atomic import (StagedFiles, atomic_path, atomic_write, check_output_dir, check_output_path,
                                write_bytes_atomic, write_json_atomic, write_text_atomic)
from capaudit.io.lock import ExclusiveLock, lock_path_for
from capaudit.io.manifest import check_file, file_record, files_block, read_manifest
from capaudit.io.text import checked_lines, iter_text_lines, open_text, read_text_checked

__all__ = ["ExclusiveLock", "lock_path_for", "check_file", "file_record", "files_block", "read_manifest",
           "checked_lines", "iter_text_lines", "open_text", "read_text_checked", "StagedFiles", "atomic_path", "atomic_write", "check_output_dir", "check_output_path",
           "write_bytes_atomic", "write_json_atomic", "write_text_atomic"]
