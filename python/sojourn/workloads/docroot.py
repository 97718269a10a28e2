"""Document roots: every object of a trace as a file of exactly its size.

Content rule (docs/formats.md, shared with crates/load): with ``h = FNV-1a-64`` of the
trace path's bytes (as written in the trace, percent-encoded), byte ``i`` of the object
is ``((h mod 251) + (i mod 251)) mod 251``. The pattern has period 251, so a file is
written by repeating one buffer whose length is a multiple of 251.

Guarantees of :func:`materialize`:

- each distinct path of the trace becomes ``root/<percent-decoded path>`` (a path that
  ends in ``/`` becomes ``.../index.html``, as servers map directory requests) holding
  exactly ``size`` bytes of the rule's content; if the trace names one path with several
  sizes, the largest wins and the conflict is counted;
- a file already present with the right size and the right first and last bytes
  (up to 64 KiB of each) is reused, not rewritten; files are written to a temporary name
  and renamed, so an interrupted run leaves no wrong file under a final name;
- paths that would leave ``root`` (``..`` segments) are refused with an error naming them.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Callable
from urllib.parse import unquote

import numpy as np
import pandas as pd

FNV_OFFSET_BASIS = 0xCBF29CE484222325
FNV_PRIME = 0x100000001B3
PERIOD = 251
CHECK_BYTES = 64 * 1024
# 4096 periods of 251 bytes: about 1 MB per write call.
BUFFER_PERIODS = 4096


def fnv1a64(data: bytes) -> int:
    """FNV-1a, 64 bits (the hash the content rule names)."""
    h = FNV_OFFSET_BASIS
    for byte in data:
        h = ((h ^ byte) * FNV_PRIME) & 0xFFFFFFFFFFFFFFFF
    return h


def phase(path: str) -> int:
    """``FNV-1a-64(path) mod 251``: the first byte of the object at ``path``."""
    return fnv1a64(path.encode("utf-8")) % PERIOD


def content(path: str, offset: int = 0, length: int | None = None, size: int | None = None) -> bytes:
    """Bytes ``offset .. offset+length`` of the object at ``path`` (vectorized).

    Give ``length``, or ``size`` (the object size) to read to the end.
    """
    if length is None:
        if size is None:
            raise ValueError("content() needs length or size")
        length = size - offset
    if offset < 0 or length < 0:
        raise ValueError(f"content(): offset and length must be >= 0, got {offset}, {length}")
    start = (phase(path) + offset) % PERIOD
    return ((start + np.arange(length, dtype=np.int64)) % PERIOD).astype(np.uint8).tobytes()


def file_for(root: Path, path: str) -> Path:
    """Where ``path`` (a trace URL path) lives under ``root``."""
    decoded = unquote(path)
    if not decoded.startswith("/"):
        raise ValueError(f"object path {path!r} does not start with '/'")
    parts = decoded.split("/")[1:]
    if any(part in ("..", ".") for part in parts):
        raise ValueError(f"object path {path!r} has a '.' or '..' segment; refused (it would leave the docroot)")
    if decoded.endswith("/"):
        parts[-1] = "index.html"
    return root.joinpath(*parts)


@dataclass
class DocrootStats:
    objects: int = 0
    written: int = 0
    reused: int = 0
    bytes: int = 0
    disk_bytes: int = 0
    size_conflicts: int = 0
    path_conflicts: int = 0

    def summary(self) -> str:
        return (
            f"{self.objects} objects ({self.written} written, {self.reused} reused), "
            f"{self.bytes} bytes of content, {self.disk_bytes} bytes on disk"
            + (f", {self.size_conflicts} paths with several sizes (largest kept)" if self.size_conflicts else "")
            + (f", {self.path_conflicts} paths skipped (file/directory clash)" if self.path_conflicts else "")
        )


def _is_correct(file: Path, path: str, size: int) -> bool:
    try:
        if file.stat().st_size != size:
            return False
        with open(file, "rb") as handle:
            head = handle.read(min(size, CHECK_BYTES))
            if head != content(path, 0, len(head)):
                return False
            tail_start = max(size - CHECK_BYTES, len(head))
            handle.seek(tail_start)
            return handle.read() == content(path, tail_start, size - tail_start)
    except OSError:
        return False


# One more period than a write buffer, so every phase's buffer is a slice of it.
_PATTERN = (np.arange(PERIOD * (BUFFER_PERIODS + 1)) % PERIOD).astype(np.uint8).tobytes()


def _write(file: Path, path: str, size: int) -> None:
    first = phase(path)
    buffer = memoryview(_PATTERN)[first : first + min(size, PERIOD * BUFFER_PERIODS)]
    tmp = file.with_name(file.name + ".partial")
    with open(tmp, "wb") as handle:
        remaining = size
        while remaining >= len(buffer) and buffer:
            handle.write(buffer)  # buffer length is a multiple of 251, so the phase repeats
            remaining -= len(buffer)
        if remaining:
            handle.write(buffer[:remaining])
    os.replace(tmp, file)


def objects_of(trace: pd.DataFrame) -> tuple[pd.DataFrame, int]:
    """Distinct (path, size) objects of ``trace`` (largest size per path) and the number
    of paths that appeared with more than one size."""
    grouped = trace.groupby("path", sort=True, observed=True)["size"].agg(["max", "nunique"])
    objects = pd.DataFrame({"path": grouped.index.astype(str), "size": grouped["max"].to_numpy(np.uint64)})
    return objects, int((grouped["nunique"] > 1).sum())


def materialize(
    trace: pd.DataFrame,
    root: str | os.PathLike,
    seed: int | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> DocrootStats:
    """Create every object of ``trace`` under ``root``; return what was done.

    ``seed`` is accepted for symmetry with the other workload calls; the content depends
    only on the path (the rule is shared with the load generator). ``progress(done,
    total)`` is called as objects are finished.
    """
    del seed
    root = Path(root)
    root.mkdir(parents=True, exist_ok=True)
    objects, conflicts = objects_of(trace)
    stats = DocrootStats(objects=len(objects), size_conflicts=conflicts)
    made_dirs: set[Path] = set()
    total = len(objects)
    for done, (path, size) in enumerate(zip(objects["path"], objects["size"].tolist()), start=1):
        file = file_for(root, path)
        try:
            if file.parent not in made_dirs:
                file.parent.mkdir(parents=True, exist_ok=True)
                made_dirs.add(file.parent)
            if file.is_dir():
                raise NotADirectoryError(file)
        except (NotADirectoryError, FileExistsError):
            stats.path_conflicts += 1
            continue
        if _is_correct(file, path, size):
            stats.reused += 1
        else:
            _write(file, path, size)
            stats.written += 1
        stats.bytes += size
        stats.disk_bytes += file.stat().st_blocks * 512
        if progress is not None and (done % 256 == 0 or done == total):
            progress(done, total)
    return stats
