"""Locating (and if need be building) the ``sojourn-engine`` binary, and writing the
``--config`` files its subcommands read."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from dataclasses import asdict
from pathlib import Path

import tomli_w

REPO = Path(__file__).resolve().parents[2]


def engine_path(build: bool = True) -> Path:
    """The ``sojourn-engine`` to run: ``$SOJOURN_ENGINE`` if set, else the
    workspace's release build, built with cargo first when missing or older than a source
    of the workspace and ``build`` (without ``build`` either is an error: a result must
    come from the checkout it records); outside a checkout, the one ``pip install`` put
    beside the interpreter."""
    override = os.environ.get("SOJOURN_ENGINE")
    if override:
        path = Path(override)
        if not path.is_file():
            raise FileNotFoundError(f"SOJOURN_ENGINE={override} is not a file")
        return path
    path = REPO / "target" / "release" / "sojourn-engine"
    # Installed by `pip install` (the wheel ships it beside the interpreter) and not in a checkout.
    installed = Path(sys.executable).parent / "sojourn-engine"
    if not path.is_file() and not (REPO / "Cargo.toml").is_file() and installed.is_file():
        return installed
    newer = not path.is_file() or newer_source(path.stat().st_mtime, path)
    if newer:
        if not build:
            why = "is missing" if newer is True else f"is older than {newer.relative_to(REPO)}"
            raise FileNotFoundError(f"{path} {why}: run `make build`")
        cargo = shutil.which("cargo") or str(Path.home() / ".cargo" / "bin" / "cargo")
        subprocess.run([cargo, "build", "--release", "-p", "sojourn-engine"], cwd=REPO, check=True)
    return path


def newer_source(built: float, binary: Path | None = None) -> Path | None:
    """A source the binary is built from changed after ``built`` (a modification time), or
    None. The sources are those cargo lists in the binary's dep-info file (``<binary>.d``:
    what it compiled, not the crates' tests); without one, every crate's src/."""
    binary = binary or REPO / "target" / "release" / "sojourn-engine"
    try:
        listed = binary.with_name(binary.name + ".d").read_text().split(": ", 1)[1]
        # Make's syntax: a backslash-newline continues the line, a backslash-space is a space.
        parts = re.split(r"(?<!\\)\s+", listed.replace("\\\n", " ").strip())
        sources = [Path(part.replace("\\ ", " ")) for part in parts if part]
    except (OSError, IndexError):
        sources = [path for path in (REPO / "crates").glob("*/src/**/*") if path.is_file()]
    return next((source for source in sources if source.is_file() and source.stat().st_mtime > built), None)


def options_toml(options) -> str:
    """A ``sojourn-engine`` document (a dataclass or a dict: a subcommand's options, the stage
    pool's tables) as the TOML it reads: kebab-case keys at every depth, paths as text, None
    left out."""
    return tomli_w.dumps(_engine_value(options if isinstance(options, dict) else asdict(options)))


def _engine_value(value):
    if isinstance(value, dict):
        return {key.replace("_", "-"): _engine_value(item) for key, item in value.items() if item is not None}
    if isinstance(value, list):
        return [_engine_value(item) for item in value]
    return str(value) if isinstance(value, Path) else value
