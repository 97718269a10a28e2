"""Document roots: every object of a trace as a file of exactly its size.

Content rule (docs/formats.md, shared with crates/load): with ``h = FNV-1a-64`` of the
trace path's bytes (as written in the trace, percent-encoded), byte ``i`` of the object
is ``((h mod 251) + (i mod 251)) mod 251``. The pattern has period 251, so a file is
written by repeating one buffer whose length is a multiple of 251.

Guarantees of :func:`materialize`:

- each distinct path of the trace becomes ``root/<percent-decoded path>`` (a path that
  ends in ``/`` becomes ``.../index.html``, as servers map directory requests; ``//`` is
  one separator) holding exactly ``size`` bytes of the rule's content; if the trace
  names one path with several sizes, the largest wins and the conflict is counted;
- the docroot is built under a temporary name beside ``root`` and renamed when whole:
  an error or an interruption leaves ``root`` as it was (absent, or the previous one)
  and nothing else behind; an existing ``root`` is replaced only if it is empty or was
  made here (it holds :data:`MARKER`), else that is an error;
- a file of the previous ``root`` with the right size and the right first and last
  bytes (up to 64 KiB of each) is reused (hard-linked), not rewritten;
- a path that cannot be a file (a ``.``/``..`` segment that would leave ``root``, a NUL
  byte, a name too long, a file where a directory is needed, two paths naming one file)
  is skipped and counted by reason, never an error.
"""

from __future__ import annotations

import errno
import os
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable
from urllib.parse import unquote_to_bytes

import numpy as np
import pandas as pd

FNV_OFFSET_BASIS = 0xCBF29CE484222325
FNV_PRIME = 0x100000001B3
PERIOD = 251
CHECK_BYTES = 64 * 1024
# 4096 periods of 251 bytes: about 1 MB per write call.
BUFFER_PERIODS = 4096
NAME_MAX = 255  # bytes in one file name (Linux file systems)
# In every docroot made here: a directory without it is not replaced (it may hold other files).
MARKER = ".sojourn-docroot"
EXAMPLES = 5


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


class Unmappable(ValueError):
    """A trace path that cannot be a file under the docroot; the message says why."""


def file_for(root: Path, path: str) -> Path:
    """Where ``path`` (a trace URL path) lives under ``root``: its percent-decoded bytes
    (as a server decodes them), ``index.html`` for a path ending in ``/``."""
    decoded = os.fsdecode(unquote_to_bytes(path))
    if not decoded.startswith("/"):
        raise Unmappable("does not start with '/'")
    if "\0" in decoded:
        raise Unmappable("holds a NUL byte (%00)")
    parts = decoded.split("/")[1:]
    if any(part in ("..", ".") for part in parts):
        raise Unmappable("has a '.' or '..' segment (it would leave the docroot)")
    if decoded.endswith("/"):
        parts[-1] = "index.html"
    parts = [part for part in parts if part]  # '//' is one separator, as servers merge slashes
    too_long = [part for part in parts if len(os.fsencode(part)) > NAME_MAX]
    if too_long:
        raise Unmappable(f"has a segment longer than {NAME_MAX} bytes")
    return root.joinpath(*parts)


@dataclass
class DocrootStats:
    objects: int = 0
    written: int = 0
    reused: int = 0
    bytes: int = 0
    disk_bytes: int = 0
    size_conflicts: int = 0
    # Paths that cannot be a file, by reason, and the first few of them.
    skipped: dict[str, int] = field(default_factory=dict)
    examples: list[str] = field(default_factory=list)

    def skip(self, path: str, reason: str) -> None:
        self.skipped[reason] = self.skipped.get(reason, 0) + 1
        if len(self.examples) < EXAMPLES:
            self.examples.append(f"{path!r}: {reason}")

    def summary(self) -> str:
        skipped = sum(self.skipped.values())
        return (
            f"{self.objects} objects ({self.written} written, {self.reused} reused, {skipped} skipped), "
            f"{self.bytes} bytes of content, {self.disk_bytes} bytes on disk"
            + (f", {self.size_conflicts} paths with several sizes (largest kept)" if self.size_conflicts else "")
            + "".join(f"\n  skipped {count}: {reason}" for reason, count in self.skipped.items())
            + "".join(f"\n  e.g. {example}" for example in self.examples)
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
    with open(file, "wb") as handle:
        remaining = size
        while remaining >= len(buffer) and buffer:
            handle.write(buffer)  # buffer length is a multiple of 251, so the phase repeats
            remaining -= len(buffer)
        if remaining:
            handle.write(buffer[:remaining])


def objects_of(trace: pd.DataFrame) -> tuple[pd.DataFrame, int]:
    """Distinct (path, size) objects of ``trace`` (largest size per path) and the number
    of paths that appeared with more than one size."""
    grouped = trace.groupby("path", sort=True, observed=True)["size"].agg(["max", "nunique"])
    objects = pd.DataFrame({"path": grouped.index.astype(str), "size": grouped["max"].to_numpy(np.uint64)})
    return objects, int((grouped["nunique"] > 1).sum())


# errno of a path the file system cannot hold (a name or path too long, a file where a
# directory is needed or the other way round, a name the file system refuses): skipped.
UNHOLDABLE = {errno.ENAMETOOLONG: "name too long for the file system", errno.ENOTDIR: "a file where a directory is needed",
              errno.EISDIR: "a directory where a file is needed", errno.EEXIST: "a file where a directory is needed",
              errno.EINVAL: "a name the file system refuses", errno.EILSEQ: "a name the file system refuses"}


def materialize(
    trace: pd.DataFrame,
    root: str | os.PathLike,
    seed: int | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> DocrootStats:
    """Create every object of ``trace`` under ``root``; return what was done.

    The docroot is built beside ``root`` under a temporary name and renamed to ``root``
    when whole; on any error or interruption the temporary one is removed and ``root``
    is as it was. Files of a previous ``root`` that are already correct are reused
    (hard-linked, not rewritten). A path that cannot be a file is skipped and counted
    (:class:`DocrootStats`), never an error. ``seed`` is accepted for symmetry with
    the other workload calls; the content depends only on the path (the rule is shared
    with the load generator). ``progress(done, total)`` is called as objects are finished.
    """
    del seed
    root = Path(root)
    if root.is_dir() and any(root.iterdir()) and not (root / MARKER).is_file():
        raise ValueError(f"{root} holds files and was not made by `sojourn trace docroot` (it has no {MARKER}); "
                         f"it would be replaced whole: give a new or empty directory")
    building = root.with_name(f".{root.name}.partial")
    # A build that was killed (no chance to clean up) left this behind.
    shutil.rmtree(building, ignore_errors=True)
    building.mkdir(parents=True)
    try:
        stats = _build(trace, building, root, progress)
        (building / MARKER).write_text("made by sojourn trace docroot; replaced whole by the next one\n")
        if root.exists():
            # Two renames: `root` is the old docroot or the new one, never a mix.
            retired = root.with_name(f".{root.name}.old")
            shutil.rmtree(retired, ignore_errors=True)
            os.replace(root, retired)
            os.replace(building, root)
            shutil.rmtree(retired)
        else:
            os.replace(building, root)
    except BaseException:
        shutil.rmtree(building, ignore_errors=True)
        raise
    return stats


def _build(trace: pd.DataFrame, building: Path, previous: Path, progress: Callable[[int, int], None] | None) -> DocrootStats:
    objects, conflicts = objects_of(trace)
    stats = DocrootStats(objects=len(objects), size_conflicts=conflicts)
    claimed: dict[Path, str] = {}
    total = len(objects)
    for done, (path, size) in enumerate(zip(objects["path"], objects["size"].tolist()), start=1):
        if progress is not None and (done % 256 == 0 or done == total):
            progress(done, total)
        try:
            file = file_for(building, path)
        except Unmappable as error:
            stats.skip(path, str(error))
            continue
        if file in claimed:
            stats.skip(path, f"the same file as {claimed[file]!r}")
            continue
        claimed[file] = path
        try:
            file.parent.mkdir(parents=True, exist_ok=True)
            if file.is_dir():
                raise IsADirectoryError(errno.EISDIR, "directory", str(file))
            old = previous / file.relative_to(building)
            if previous.is_dir() and _is_correct(old, path, size):
                os.link(old, file)
                stats.reused += 1
            else:
                _write(file, path, size)
                stats.written += 1
        except OSError as error:
            if error.errno not in UNHOLDABLE:
                raise
            stats.skip(path, UNHOLDABLE[error.errno])
            continue
        stats.bytes += size
        stats.disk_bytes += file.stat().st_blocks * 512
    return stats
