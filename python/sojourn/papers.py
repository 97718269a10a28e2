"""The papers' tables (``papers.toml`` beside this module), written once for Python and
Rust (crates/papers reads the same file): the SURGE size model (004 Table 1), the
transient workloads W1-W10 (000 Table 1), and 003's stages, Fig. 5 transitions, §4.1
processing times, §5.2 classes and Table 2.
"""

from __future__ import annotations

import tomllib
from functools import cache
from pathlib import Path

PATH = Path(__file__).with_name("papers.toml")


@cache
def tables() -> dict:
    """The whole file, parsed once."""
    return tomllib.loads(PATH.read_text())


def surge() -> dict:
    return tables()["surge"]


def transient() -> list[dict]:
    return tables()["transient"]


def sessions() -> dict:
    return tables()["sessions"]
