"""Issue 32: adaptive admission (``serve --admission``) beside SRPT and DWFS on the papers'
overloads, and docs/overload-control.md built from its published results.

Three stages, as the reproductions (sojourn.reproduce) have, each rerunnable alone:

1. ``sojourn run experiments/overload-control/<spec>.toml`` (long: see each spec's note);
2. ``python -m sojourn.overload publish results/<name>``: the per-repetition numbers the doc
   needs (:mod:`sojourn.overload.derive`) into docs/overload-control/<experiment>/, small
   JSON only, the per-request records staying under results/;
3. ``python -m sojourn.overload doc``: docs/overload-control.md and its figures from
   docs/overload-control/ alone (:mod:`sojourn.overload.doc`); an experiment with nothing
   published is named as having no result.

``python -m sojourn.overload run <name>`` does all three, after putting back under results/
what is already published (:mod:`sojourn.overload.campaign`), so a campaign longer than one
checkout goes on where the last one stopped.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[3]
PUBLISHED = REPO / "docs" / "overload-control"
DOC = REPO / "docs" / "overload-control.md"


@dataclass(frozen=True)
class Experiment:
    """One spec of the set: its result name (the spec's ``name``), path and what it shows."""

    name: str
    spec: str
    title: str
    # A set that changes one factor of another set's runs: that set's name, and what its run
    # names add to their twins' (the doc sets each run beside its twin; nothing for a set
    # that runs them again unchanged, to measure what the first run did not).
    twin_set: str = ""
    twin_suffix: str = ""


EXPERIMENTS = (
    Experiment("overload-control-persistent", "experiments/overload-control/persistent.toml",
               "Persistent overload (000 §4): rho 1.2 and 1.4 for 10 minutes"),
    Experiment("overload-control-transient", "experiments/overload-control/transient.toml",
               "Transient overload (000 Table 1): W4 and W7 at the paper's time scale"),
    Experiment("overload-control-uncapped", "experiments/overload-control/uncapped.toml",
               "Persistent overload at rho 1.4 without the server's connection cap (one factor of the set above)",
               twin_set="overload-control-persistent", twin_suffix="-uncapped"),
    Experiment("overload-control-uncapped-codel", "experiments/overload-control/uncapped-codel.toml",
               "Persistent overload at rho 1.4 with CoDel, without the server's connection cap",
               twin_set="overload-control-persistent", twin_suffix="-uncapped"),
    Experiment("overload-control-first-write", "experiments/overload-control/first-write.toml",
               "Persistent overload at rho 1.2, run again: the server's share of the wait for the first byte",
               twin_set="overload-control-persistent"),
    Experiment("overload-control-write-slots", "experiments/overload-control/write-slots.toml",
               "Persistent overload at rho 1.2, run again, and SRPT without kernel bands: how long the write slots were held",
               twin_set="overload-control-persistent"),
    Experiment("overload-control-dwfs", "experiments/overload-control/dwfs.toml",
               "Session overload (003 §5): DWFS at 1.2 and 1.4 times its CPU"),
    Experiment("overload-control-dwfs-transient", "experiments/overload-control/dwfs-transient.toml",
               "Transient session overload: DWFS under W4 and W7 session arrivals (000 Table 1's periods at "
               "multiples of its CPU's session rate)"),
    Experiment("overload-control-dwfs-delay", "experiments/overload-control/dwfs-delay.toml",
               "Session overload at rho 1.4: DWFS with the delay policy's threshold at 20, 50 and 100 ms"),
)


def experiment_named(name: str) -> Experiment:
    for experiment in EXPERIMENTS:
        if experiment.name == name:
            return experiment
    raise ValueError(f"{name!r} is not an overload-control experiment; expected one of "
                     f"{', '.join(e.name for e in EXPERIMENTS)}")
