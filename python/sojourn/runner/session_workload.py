"""Session workloads for `sojourn run` (003 §5): the stage pool's configuration file,
the session model, and which client address belongs to which priority class.

Guarantees: :func:`stages_file` writes a ``serve --stages`` file holding the spec's
stage pool table with the series written into the repetition directory and every class
given ``networks`` (its network group's addresses when the spec gave none), so the
server and the analysis agree on the classes; :func:`class_map` returns, for each of
the load generator's ``--source-addrs`` in order, the class the server gives it (first
class whose networks contain it, else the last, as ``sojourn_stages`` does) with each
class's delay bound; :func:`arrival_profile` gives, for a spec with ``workload.profile``,
one cycle of the session rate, each period's rho times ``workload.sessions.rate``. Nothing
here starts a process.
"""

from __future__ import annotations

import ipaddress
import itertools
from pathlib import Path

import tomli_w

from sojourn import papers
from sojourn.engine import options_toml
from sojourn.runner.spec import stage_classes
from sojourn.workloads import shaping

# The stage pool's defaults (docs/dwfs.md), from sojourn/papers.toml: 003 §4.1's stages
# and Fig. 5's transitions (percent); its default classes are the spec's (spec.DEFAULT_CLASSES).
STAGES = papers.sessions()["stages"]
FIG5 = papers.sessions()["fig5_percent"]


def effective_classes(stages: dict, client_addrs: dict[str, list[str]]) -> list[dict]:
    """The classes with ``networks`` filled from the group of the same name."""
    classes = []
    for cls in stage_classes(stages):
        networks = list(cls.get("networks") or client_addrs.get(cls["name"], []))
        if not networks:
            raise ValueError(f"stage class {cls['name']!r} has no networks and the testbed has no group of that name "
                             f"(groups: {', '.join(client_addrs)})")
        classes.append({**cls, "networks": networks})
    return classes


def stages_file(stages: dict, client_addrs: dict[str, list[str]], series_csv: Path, path: Path) -> Path:
    """Writes the ``serve --stages`` file for one repetition; returns ``path``."""
    scalars = {k: v for k, v in stages.items() if k not in ("stage", "class")}
    scalars["series_csv"] = str(series_csv)
    arrays = {"class": effective_classes(stages, client_addrs)}
    if stages.get("stage"):
        arrays["stage"] = stages["stage"]
    path.write_text(options_toml({**scalars, **arrays}))
    return path


def stage_names(stages: dict) -> list[str]:
    return [s["name"] for s in stages.get("stage", [])] or list(STAGES)


def arrival_profile(workload: dict) -> list[dict] | None:
    """With ``workload.profile``: one cycle of the session arrival rate, the model's
    ``arrival-profile``. Each period of the profile (000 Table 1, its length divided by
    ``time_compression``) has its rho times ``workload.sessions.rate``, which is then the
    rate that loads the stages' CPU to rho 1, as 000 §2.3 sets each period's rho of the
    uplink. None for a constant rate."""
    if not workload["profile"]:
        return None
    profile = shaping.profile_by_name(workload["profile"])
    rate, compression = workload["sessions"]["rate"], workload["time_compression"]
    return [{"length-s": length / compression, "rate": rho * rate}
            for _phase, length, rho in itertools.islice(profile.periods(), 2)]


def session_model(stages: dict, sessions: dict, path: Path, classes: dict | None = None,
                  profile: list[dict] | None = None) -> Path:
    """The generated session model (docs/formats.md "Session model"): sessions start at
    the first stage; after each request the next stage follows the stage pool's
    transition matrix (003 Fig. 5 for the default stages, uniform otherwise, as the
    pool's default) scaled by 1 − exit; two paths per stage. Sessions arrive at
    ``rate`` (Poisson), at the rates of ``profile``'s periods (:func:`arrival_profile`)
    or come from ``users`` closed-loop users. ``classes`` (a
    :func:`class_map`) writes one class per stage-pool class with its source addresses,
    so records carry the class; its delay bound is the class's timeout with
    ``class_bounds``, else ``delay_bound_s``."""
    names = stage_names(stages)
    rows = stages.get("transitions") or (FIG5 if names == list(STAGES) else [[1.0] * len(names)] * len(names))
    if len(rows) != len(names) or any(len(row) != len(names) for row in rows):
        raise ValueError(f"server.stages.transitions must be {len(names)}x{len(names)} (one row and column per stage "
                         f"{', '.join(names)}), got {len(rows)} row(s)")
    exit_probability = sessions["exit"]
    think = ({"distribution": "exponential", "mean-s": sessions["think_s"]} if sessions["think_s"] > 0
             else {"distribution": "none"})
    if sessions.get("users"):
        arrivals = {"users": sessions["users"]}
    else:
        arrivals = {"arrival-profile": profile} if profile else {"arrival-rate": sessions["rate"]}
    model = {**arrivals, "delay-bound-s": sessions["delay_bound_s"], "on-failure": sessions["on_failure"],
             "start": {names[0]: 1.0}, "think-time": think, "states": {}}
    if classes:
        model["classes"] = [
            {"name": name, "delay-bound-s": bound if sessions.get("class_bounds") else sessions["delay_bound_s"],
             "sources": [a for a, c in zip(classes["source_addrs"], classes["address_classes"]) if c == index]}
            for index, (name, bound) in enumerate(zip(classes["class_names"], classes["delay_bounds_s"]))]
    for name, row in zip(names, rows):
        total = sum(row)
        if total <= 0:
            raise ValueError(f"server.stages.transitions row of {name} sums to {total}; expected a positive sum")
        following = {to: p / total * (1 - exit_probability) for to, p in zip(names, row)}
        following["exit"] = exit_probability
        model["states"][name] = {"paths": [f"/stage/{name}/0", f"/stage/{name}/1"], "next": following}
    path.write_text(tomli_w.dumps(model))
    return path


def class_map(classes: list[dict], source_addrs: list[str]) -> dict:
    """For ``classes`` with networks: the class index of every source address (first
    match, else the last class) and each class's name and delay bound in seconds."""
    parsed = [[ipaddress.ip_network(n, strict=False) for n in cls["networks"]] for cls in classes]
    indices = []
    for address in source_addrs:
        ip = ipaddress.ip_address(address)
        indices.append(next((i for i, nets in enumerate(parsed) if any(ip in net for net in nets)), len(classes) - 1))
    return {"source_addrs": source_addrs, "address_classes": indices, "class_names": [c["name"] for c in classes],
            "delay_bounds_s": [c["timeout_ms"] / 1000 for c in classes]}
