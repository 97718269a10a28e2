"""The ``sojourn-engine load --config`` file: one run of the load generator as a typed
document (crates/load/src/cli.rs deserializes it into the mode's options; docs/load.md
"Config file").

Each field is the load option of the same name (``requests_per_conn`` is
``--requests-per-conn``); None leaves the option to the generator's default. The runner
builds one per repetition (and per capacity level) and keeps it as ``load.toml``.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from sojourn.engine import options_toml

MODES = ("open", "closed", "capacity", "sessions")


@dataclass(frozen=True)
class LoadFile:
    mode: str
    target: str
    out: Path
    source_addrs: list[str]
    seed: int
    timeout: float
    requests_per_conn: int
    conns_per_client: int
    quiet: bool = True
    verify_content: bool = False
    abort_after: float | None = None
    retries: int | None = None
    # open
    trace: Path | None = None
    # closed (and each level of a capacity probe, which runs as closed users)
    users: int | None = None
    duration: float | None = None
    paths_file: Path | None = None
    think_time: str | None = None
    # sessions
    model: Path | None = None

    @classmethod
    def of(cls, mode: str, workload: dict, target: str, out: Path, source_addrs: list[str], **options) -> "LoadFile":
        """A run in ``mode`` with the spec workload's connection, timeout and seed settings
        (``workload.persistent``, ``max_connections_per_client``, ``timeout_s``, ``seed``);
        ``options`` add the mode's own and override these."""
        settings = dict(target=target, out=out, source_addrs=source_addrs, seed=workload["seed"],
                        timeout=workload["timeout_s"], requests_per_conn=workload["persistent"],
                        conns_per_client=workload["max_connections_per_client"])
        return cls(mode=mode, **(settings | options))

    def __post_init__(self):
        if self.mode not in MODES:
            raise ValueError(f"load mode {self.mode!r}: expected one of {', '.join(MODES)}")

    def write(self, path: Path) -> Path:
        path.write_text(options_toml(self))
        return path
