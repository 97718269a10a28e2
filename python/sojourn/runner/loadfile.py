"""The ``sojourn-engine load --config`` file: one run of the load generator as a typed
document (crates/load/src/cli.rs deserializes it into the mode's options; docs/load.md
"Config file").

Each field is the load option of the same name (``requests_per_conn`` is
``--requests-per-conn``); None leaves the option to the generator's default. The run's
plan (sojourn.runner.plan) holds the document as the spec's workload makes it; the runner
adds only where it runs (:meth:`LoadFile.placed`: target, output directory, source
addresses, input files) and keeps it as ``load.toml`` per repetition and capacity level.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path

from sojourn.engine import options_toml

MODES = ("open", "closed", "capacity", "sessions")


@dataclass(frozen=True)
class LoadFile:
    mode: str
    seed: int
    timeout: float
    requests_per_conn: int
    conns_per_client: int
    quiet: bool = True
    verify_content: bool = False
    abort_after: float | None = None
    retries: int | None = None
    # closed (and each level of a capacity probe, which runs as closed users)
    users: int | None = None
    duration: float | None = None
    think_time: str | None = None
    start_spread: float | None = None  # users start evenly over this many seconds (None: all at once)
    # Where it runs, added by the runner (placed): None in the plan.
    target: str | None = None
    out: Path | None = None
    source_addrs: list[str] | None = None
    trace: Path | None = None  # open
    drain: float | None = None  # open: after the last request, answers awaited this long (collect.drain_s)
    paths_file: Path | None = None  # closed
    model: Path | None = None  # sessions
    process_part: str | None = None  # "I/K": this process's share of the clients (sojourn.runner.load_parts)

    def __post_init__(self):
        if self.mode not in MODES:
            raise ValueError(f"load mode {self.mode!r}: expected one of {', '.join(MODES)}")

    def placed(self, target: str, out: Path, source_addrs: list[str], trace: Path, model: Path | None = None,
               **options) -> "LoadFile":
        """This document for one repetition: the server at ``target``, files in ``out``,
        requests from ``source_addrs``; an open run replays ``trace``, closed users draw
        from the paths.txt beside it, sessions follow ``model``. ``options`` replace the
        plan's (a capacity level's ``users``)."""
        if self.mode == "open":
            files = {"trace": trace}
        elif self.mode == "closed":
            files = {"paths_file": trace.with_name("paths.txt")}
        else:
            files = {"model": model}
        return replace(self, target=target, out=out, source_addrs=list(source_addrs), **files, **options)

    def write(self, path: Path) -> Path:
        unplaced = [name for name in ("target", "out", "source_addrs") if getattr(self, name) is None]
        if unplaced:
            raise ValueError(f"load file {path}: {', '.join(unplaced)} not set (LoadFile.placed adds them)")
        path.write_text(options_toml(self))
        return path
