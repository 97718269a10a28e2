"""docs/overload-control.md and its figures from docs/overload-control/ alone (the numbers
:mod:`sojourn.overload.derive` published per repetition), so this stage reruns offline.

Each experiment of :data:`sojourn.overload.EXPERIMENTS` gets a table per sweep value (mean
over repetitions with the 90% interval of 002 §3.5, Student's t), its refusals by size class
and a figure of mean response time over time; an experiment with nothing published says so
and what running it takes. The closing note is computed from the same tables: per metric,
the best run and how it compares with the same scheduler without admission.
"""

from __future__ import annotations

import json
import math
import os
from collections import defaultdict
from pathlib import Path
from typing import NamedTuple

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

from sojourn import analysis  # noqa: E402
from sojourn.overload import DOC, EXPERIMENTS, PUBLISHED, REPO, Experiment  # noqa: E402
from sojourn.overload.derive import SIZE_CLASSES  # noqa: E402
from sojourn.reproduce.publish import at_once, estimated_seconds  # noqa: E402
from sojourn.runner.spec import load_spec  # noqa: E402

# (key, column title, scale, True when higher is better, False when lower is, None when
# neither: refusals describe a policy, they are not a goal the closing note ranks)
METRICS = (
    ("goodput_bps", "goodput Mbit/s", 1e-6, True),
    ("goodput_rps", "completed/s", 1.0, True),
    ("patient_rps", "within 10 s/s", 1.0, True),
    ("response_mean", "mean response s", 1.0, False),
    ("response_p99", "p99 response s", 1.0, False),
    ("handshake_share", "handshake %", 100.0, None),
    ("uplink_queue_delay", "uplink queue ms", 1e3, None),
    ("refused_share", "refused %", 100.0, None),
    ("http_error_share", "error responses %", 100.0, None),
    ("refused_bytes_share", "refused bytes %", 100.0, None),
    ("refused_swing", "refusal swing %", 100.0, None),
    ("refused_after_steps_share", "refused after the steps %", 100.0, None),
    ("syn_drops", "SYN drops", 1.0, None),
    ("unread_wait_mean", "unread wait s", 1.0, None),
    ("settle", "settle s", 1.0, None),  # settling fast onto a high plateau (FAIR's) is no win
    ("recover", "recover s", 1.0, False),  # back to the underload level after a burst: sooner is better
    ("sessions_per_s", "sessions/s", 1.0, True),
)


# The stage pool's table, for runs with one (003 §4; sojourn.overload.derive's notes): where
# the requests went besides the admission policy's refusals, and what the CPU did.
STAGE_METRICS = (
    ("stage_busy_share", "stage worker busy %", 100.0, None),
    ("stage_dropped_share", "dropped by the stage pool %", 100.0, None),
    ("refused_share", "refused %", 100.0, None),
    ("session_abort_rate", "sessions aborted %", 100.0, False),
    ("sessions_per_s", "sessions/s", 1.0, True),
)


def table_head(keys: list[str], titles) -> list[str]:
    """A markdown table's header and rule: the row's key columns, then one per title."""
    columns = [*keys, *titles]
    return ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]


def read_published(root: Path, experiment: Experiment) -> tuple[list[dict], str]:
    """Every published repetition of ``experiment`` (docs/overload-control/<name>/<run>/<rep>.json)
    and its scale: the full one, else the quick one (``<name>-quick``) if only that ran."""
    for scale, name in (("full", experiment.name), ("quick", f"{experiment.name}-quick")):
        reps = [json.loads(path.read_text()) for path in sorted((root / name).glob("*/[0-9]*.json"))]
        if reps:
            return reps, scale
    return [], "none"


def read_models(root: Path, name: str) -> dict[str, dict]:
    """The simulator's numbers of each run (docs/overload-control/<name>/<run>/model.json)."""
    return {path.parent.name: json.loads(path.read_text()) for path in sorted((root / name).glob("*/model.json"))}


# The columns of the testbed-beside-model table, titled and scaled as in METRICS, and the
# testbed's mean response without its handshakes, which the model, whose requests arrive
# connected, has not
def _columns(*keys: str) -> tuple:
    """The entries of METRICS with these keys, in this order."""
    return tuple(next(m for m in METRICS if m[0] == key) for key in keys)


MODEL_METRICS = _columns("refused_share", "refused_swing", "goodput_bps", "response_mean", "response_p99") + (
    ("response_mean_less_handshakes", "mean response less handshakes s", 1.0, False),
    ("first_byte_wait_mean", "of which sent to first byte s", 1.0, False),
    ("first_write_wait_mean", "of that, before the server's first write s", 1.0, False),
    ("slots_full_share", "write slots all held, % of the run", 100.0, None),
    ("write_blocked_mean", "a blocked write's hold on its slot s", 1.0, None),
    ("transfer_mean", "of which first to last byte s", 1.0, False),
    ("uplink_drops_per_request", "uplink drops per 100 requests", 100.0, None),
    ("rto_timeouts_per_request", "server RTO timeouts per 100 requests", 100.0, None))


def model_table(runs: dict[str, list[dict]], summaries: dict[str, dict], models: dict[str, dict]) -> list[str]:
    """Markdown rows setting each run's testbed mean beside the simulator's replay of its trace."""
    rows = [name for name in runs if name in models]
    if not rows:
        return []
    lines = ["The simulator beside the testbed (`sojourn-engine sim`, the server's scheduler and admission "
             "code replaying the same trace without TCP, packets or a SYN queue; each cell testbed / model; "
             "\"less handshakes\" sets the testbed's mean without the time its requests spent opening connections, which the "
             "model's requests, arriving connected, do not spend, beside the model's mean; the next three split it into "
             "the wait from the request sent to its first byte, of that the server's share (from the request's "
             "arrival in the server's kernel to its response's first byte handed to the kernel, measured with an "
             "admission policy; the rest is the uplink's queue and retransmission timeouts; it counts every admitted "
             "request whose first byte was written before the run stopped, the ones that then went unfinished too, "
             "and so does the model's: under SRPT the starved largest responses raise it above the wait of the "
             "completed ones), the share of the run the server had a response ready and every write slot held by "
             "a blocked response and the mean time a blocked write held its slot (while every slot is held the "
             "queue waits on the kernel's sockets, one slot's turnover at a time; in the model they drain as the "
             "fluid link serves them), and the transfer from first to last byte; the last two "
             "count, per 100 requests, the packets the testbed's uplink queue dropped and the retransmission timeouts "
             "they cost the server, which the model's fluid link never sets off):", "",
             *table_head(["run"], [title for _, title, *_ in MODEL_METRICS])]
    for name in rows:
        cells = []
        for key, _, scale, _ in MODEL_METRICS:
            model = _value(models[name], key)
            cells.append(f"{cell(summaries[name][key], scale)} / " + ("—" if math.isnan(model) else f"{model * scale:.3g}"))
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    return lines + [""]


# The columns of the table setting a run beside its twin in the set it changes one factor of
TWIN_METRICS = _columns("refused_share", "http_error_share", "syn_drops", "unread_wait_mean", "handshake_share",
                        "response_mean", "goodput_bps", "patient_rps")


def twin_table(experiment: Experiment, summaries: dict[str, dict], twins: dict[str, list[dict]]) -> list[str]:
    """Markdown rows setting each run beside its twin in ``experiment.twin_set`` (the run
    without ``experiment.twin_suffix`` in its name), or a line saying the twins are unpublished."""
    rows = [(name, name.replace(experiment.twin_suffix, "")) for name in summaries]
    if not any(twin in twins for _, twin in rows):
        return [f"Their twins in `{experiment.twin_set}` are not published yet.", ""]
    change = ("the same run again, in another sitting: how far a repetition's figures carry" if not experiment.twin_suffix
              else "the same but for this set's one change")
    lines = [f"Each run beside its twin in `{experiment.twin_set}`, {change} (each cell this run / twin):", "",
             *table_head(["run / twin"], [title for _, title, *_ in TWIN_METRICS])]
    for name, twin in rows:
        if twin not in twins:
            continue
        theirs = summarize(twins[twin])
        lines.append(f"| {name} / {twin} | " + " | ".join(
            f"{cell(summaries[name][key], scale)} / {cell(theirs[key], scale)}" for key, _, scale, _ in TWIN_METRICS) + " |")
    return lines + [""]


def _value(rep: dict, key: str) -> float:
    if key == "refused_share":
        return rep["refused"] / rep["requests"] if rep["requests"] else math.nan
    if key in ("settle", "recover"):
        # The typical load step's: the median over the steps, one that did not settle
        # counting as the longest (never, shown as such when it is the median).
        times = rep.get(f"{key}_s")
        if not times:
            return math.nan
        return float(np.median([math.inf if t is None else t for t in times]))
    value = rep.get(key)
    return math.nan if value is None else float(value)


class Figure(NamedTuple):
    """One metric over the repetitions of a run: the mean with its 90% interval, and in how
    many of the repetitions it was measured (a measure added to the server later is missing
    from the repetitions run before it)."""

    mean: float
    low: float
    high: float
    measured: int
    repetitions: int


def summarize(reps: list[dict]) -> dict[str, Figure]:
    """Each metric's :class:`Figure` over the repetitions of one run."""
    out = {}
    for key in dict.fromkeys(key for key, *_ in METRICS + MODEL_METRICS + STAGE_METRICS):
        values = [_value(rep, key) for rep in reps]
        interval = (math.inf,) * 3 if any(math.isinf(v) for v in values) else analysis.confidence_interval(values)
        out[key] = Figure(*interval, sum(not math.isnan(v) for v in values), len(values))
    return out


def cell(figure: Figure, scale: float) -> str:
    if math.isinf(figure.mean):
        return "never"
    if math.isnan(figure.mean):
        return "—"
    text = (f"{figure.mean * scale:.3g}" if math.isclose(figure.low, figure.high)
            else f"{figure.mean * scale:.3g} [{figure.low * scale:.3g}, {figure.high * scale:.3g}]")
    return text if figure.measured == figure.repetitions else f"{text} ({figure.measured} of {figure.repetitions} reps)"


def expected_hours(spec: str) -> tuple[int, int, int, float]:
    """(runs, repetitions in all, testbeds at once, hours) of a spec run whole by
    ``python -m sojourn.overload run``, estimated as ``sojourn reproduce --list`` does."""
    experiment = load_spec(REPO / spec)
    testbeds = at_once(experiment, None)
    return (len(experiment.runs), experiment.repetitions * len(experiment.runs), testbeds,
            estimated_seconds(experiment, testbeds) / 3600)


# (key of over_time, y label, y scale) of the figure's panels
PANELS = (("mean", "mean response time (s)", "log"), ("p99", "p99 response time (s)", "log"),
          ("refused", "share of requests refused", "linear"))


def figure(runs: dict[str, list[dict]], title: str, path: Path) -> None:
    """Mean and p99 response time of completed requests over time, and the share refused, one
    line per run (each bin averaged over the repetitions); dashed: with an admission policy,
    the only runs that can refuse."""
    fig, axes = plt.subplots(1, len(PANELS), figsize=(18, 4), sharex=True)
    for name, reps in runs.items():
        length = min(len(rep["over_time"]["mean"]) for rep in reps)
        admission = bool(reps[0]["admission"])
        for ax, (key, _, _) in zip(axes, PANELS):
            if key == "refused" and not admission or any(key not in rep["over_time"] for rep in reps):
                continue
            values = pd.DataFrame([rep["over_time"][key][:length] for rep in reps], dtype=float).mean(axis=0)
            ax.plot(reps[0]["over_time"]["t"][:length], values, label=name, linestyle="--" if admission else "-")
    for ax, (_, label, scale) in zip(axes, PANELS):
        ax.set(xlabel="time since the first request (s)", ylabel=label, yscale=scale)
    fig.suptitle(title)
    axes[0].legend(fontsize=7, ncol=2)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=100, bbox_inches="tight")
    plt.close(fig)


def _by_sweep(reps: list[dict]) -> dict[str, dict[str, list[dict]]]:
    """Sweep value -> run name -> repetitions, in the order they were published."""
    grouped: dict[str, dict[str, list[dict]]] = defaultdict(lambda: defaultdict(list))
    for rep in sorted(reps, key=lambda r: (str(r["sweep_value"]), r["run"], r["repetition"])):
        grouped["all runs" if rep["sweep_value"] is None else str(rep["sweep_value"])][rep["run"]].append(rep)
    return grouped


def section(experiment: Experiment, reps: list[dict], scale: str, figures: Path, doc: Path,
            models: dict[str, dict], twins: dict[str, dict[str, list[dict]]] | None = None
            ) -> tuple[list[str], list[str]]:
    """Markdown lines of one experiment, and its lines of the closing note; ``twins``: the
    published repetitions of the set whose runs this one's change one factor of, by sweep
    value and run (:func:`_by_sweep`)."""
    lines = [f"## {experiment.title}", "", f"Spec: `{experiment.spec}`.", ""]
    if scale == "quick":
        lines += [f"Only the quick scale (`sojourn run --quick`, results/{experiment.name}-quick) is published: "
                  "shorter and with one repetition, not the experiment the issue asks for.", ""]
    if not reps:
        runs, repetitions, testbeds, hours = expected_hours(experiment.spec)
        lines += [f"**No result yet.** Nothing of `{experiment.name}` is published: {runs} runs, {repetitions} "
                  f"repetitions in all, about {hours:.1f} h at {testbeds} testbed(s) at once. Run it with "
                  f"`python -m sojourn.overload run {experiment.name}` (add `--stop-after MINUTES` to end a sitting "
                  "whole: what is published is kept, and the same command goes on from there).", ""]
        return lines, []
    runs_expected, reps_expected, _, _ = expected_hours(experiment.spec)
    if scale == "full" and len(reps) < reps_expected:
        lines += [f"**Partial:** {len(reps)} of the spec's {reps_expected} repetitions are published "
                  f"({runs_expected} runs); the `reps` column says how many each row has. The rest run with "
                  f"`python -m sojourn.overload run {experiment.name}` (it resumes from the publication).", ""]
    note = []
    for sweep, runs in _by_sweep(reps).items():
        summaries = {name: summarize(run_reps) for name, run_reps in runs.items()}
        lines += [f"### {experiment.name}, {sweep}", "",
                  *table_head(["run", "reps"], [title for _, title, _, _ in METRICS])]
        for name, summary in summaries.items():
            lines.append(f"| {name} | {len(runs[name])} | " +
                         " | ".join(cell(summary[key], scale) for key, _, scale, _ in METRICS) + " |")
        lines.append("")
        lines += unsettled_table(runs)
        if any(summary["stage_busy_share"].measured for summary in summaries.values()):
            lines += stage_table(summaries)
        else:
            lines += size_table(runs)
        lines += [""] + model_table(runs, summaries, models)
        if experiment.twin_set:
            lines += twin_table(experiment, summaries, (twins or {}).get(sweep, {}))
        png = figures / f"{experiment.name}-{sweep}.png".replace(" ", "-")
        figure(runs, f"{experiment.name}, {sweep}", png)
        lines += [f"![mean and p99 response time over time, {sweep}]({os.path.relpath(png, doc.parent)})", ""]
        note += closing(experiment, sweep, runs, summaries)
    return lines, note


def size_table(runs: dict[str, list[dict]]) -> list[str]:
    lines = ["Refused / requests by size class (summed over repetitions):", "",
             *table_head(["run"], SIZE_CLASSES)]
    for name, run_reps in runs.items():
        counts = [[sum(rep["refused_by_size"][c][i] for rep in run_reps) for i in (0, 1)] for c in SIZE_CLASSES]
        lines.append(f"| {name} | " + " | ".join(f"{r} / {n}" for r, n in counts) + " |")
    return lines


def stage_table(summaries: dict[str, dict]) -> list[str]:
    """The stage pool's table (STAGE_METRICS): every response is a small stage reply, so
    refusals by size would say nothing; what the worker's CPU did says where sessions went."""
    lines = ["The stage pool (003 §4): the share of the run its worker spent processing (completed stage requests "
             "times their mean processing), the requests the pool dropped itself (DWFS's deadline and waiting-room "
             "drops) and all refused requests (those drops and the admission policy's refusals, each a 503), per "
             "request offered, and the share of sessions aborted (a failed request ends its session, "
             "`on_failure = restart`):", "",
             *table_head(["run"], [title for _, title, _, _ in STAGE_METRICS])]
    for name, summary in summaries.items():
        lines.append(f"| {name} | " + " | ".join(cell(summary[key], scale) for key, _, scale, _ in STAGE_METRICS) + " |")
    return lines


# Why a load step did not settle (sojourn.overload.derive.Settle), in the doc's words.
MISSES = {"drift": "still climbing or falling", "swing": "never stayed in the band",
          "late": "only in the last quarter", "empty": "nothing completed"}


def unsettled_table(runs: dict[str, list[dict]]) -> list[str]:
    """How many load steps did not settle, and recoveries not made, and why (``settle_miss``
    and ``recover_miss``, summed over the repetitions that record them); nothing when every
    step settled or no repetition records why."""
    rows = []
    for name, run_reps in runs.items():
        cells, any_missed = [], False
        for key in ("settle", "recover"):
            misses = [miss for rep in run_reps for miss in rep.get(f"{key}_miss") or []]
            missed = [miss for miss in misses if miss]
            any_missed = any_missed or bool(missed)
            why = ", ".join(f"{MISSES[m]} {missed.count(m)}" for m in MISSES if m in missed)
            cells.append(f"{len(missed)} of {len(misses)}" + (f" ({why})" if why else "") if misses else "—")
        if any_missed:
            rows.append(f"| {name} | " + " | ".join(cells) + " |")
    if not rows:
        return []
    return ["Load steps that did not settle, and recoveries not made, with why (summed over the repetitions that "
            "record it; the band and the rule are the settle column's):", "",
            *table_head(["run"], ["steps up not settled", "steps down not recovered"]), *rows, ""]


def closing(experiment: Experiment, sweep: str, runs: dict[str, list[dict]], summaries: dict[str, dict]) -> list[str]:
    """Per metric: the best run, its ratio to the next best, and to the same scheduler
    without admission when the best has one; a lead inside both runs' 90% intervals is
    called a tie with the next best, not a win."""
    out = []
    without = {reps[0]["scheduler"]: name for name, reps in runs.items() if not reps[0]["admission"]}
    for key, title, scale, higher in METRICS:
        if higher is None:
            continue
        known = {name: s[key][0] for name, s in summaries.items() if math.isfinite(s[key][0])}
        if not known:
            continue
        ranked = sorted(known, key=known.get, reverse=higher)
        best = ranked[0]
        text = f"{experiment.name}, {sweep}: best {title}: {best} ({cell(summaries[best][key], scale)}"
        if runs[best][0]["admission"]:
            # What the lead cost: response times are of completed requests only.
            text += f", refusing {cell(summaries[best]['refused_share'], 100.0)}% of requests"
        text += ")"
        if len(ranked) > 1 and _overlap(summaries[best][key], summaries[ranked[1]][key]):
            text += f", tied with {ranked[1]} (the 90% intervals overlap)"
        others = [name for name in (ranked[1:2] + [without.get(runs[best][0]["scheduler"])]) if name and name != best]
        for other in dict.fromkeys(others):
            if other not in known:
                continue
            if known[best] != 0 and known[other] != 0:
                text += f"; {known[best] / known[other]:.3g}x {other} ({cell(summaries[other][key], scale)})"
            else:  # a ratio to or of nothing says nothing
                text += f"; against {other} ({cell(summaries[other][key], scale)})"
        out.append(f"- {text}.")
    return out


def _overlap(one: Figure, other: Figure) -> bool:
    """Whether two figures' intervals overlap (a single repetition's interval is its value,
    so it ties only an equal value or an interval around it)."""
    return one.low <= other.high and other.low <= one.high


def build(published: Path = PUBLISHED, doc: Path = DOC) -> str:
    """Writes ``doc`` (and its figures under ``published``/figures) and returns its text."""
    lines = [
        "# Adaptive admission beside SRPT and DWFS (issue 32)", "",
        "Generated by `python -m sojourn.overload doc` from the published results under "
        "docs/overload-control/ (nothing else is read). The policies are `serve --admission`'s "
        "(docs/server.md): gradient (Envoy's adaptive concurrency), codel (RFC 8289 on the wait before "
        "a response's first byte), delay (DAGOR's 20 ms queueing-delay threshold) and size (refuse "
        "what would complete later than 10 s, 000 (H)'s abort time, under the server's own order, the "
        "largest first). A refusal is a 503 the load generator records as outcome `refused`.", "",
        "Metrics: goodput counts the body bytes and the requests of completed responses per second, "
        "and (within 10 s/s) those completed within 000 (H)'s 10-s abort time, what a user who gives "
        "up after 10 s still receives; "
        "error responses % is the share of requests answered with an error other than a refusal (a 500 when "
        "the server had no file descriptor left to open the file); "
        "refused bytes % is the share of the offered body bytes refused, against the 1 - 1/rho "
        "(16.7% at rho 1.2, 28.6% at 1.4) that must go unserved at all; refused after the steps % is the share "
        "refused of the requests scheduled from the end of each load step (a stretch of periods above rho 1) to the "
        "next one, at a load below 1 the server could serve whole: the backlog a step left, or a limit still "
        "recovering from it (— without a step down, as in persistent overload, and for repetitions published "
        "before the measure); response times are of "
        "completed requests; handshake % is the share of their response time spent opening their connections (SYN to "
        "established: a SYN or SYN-ACK lost waits out the initial RTO, 000 §6); uplink queue is the "
        "mean wait of a packet at the bottleneck (the uplink's backlog, sampled each second, at its rate), which a "
        "response's first byte and each further round trip of its transfer wait (summed over SRPT's kernel bands, "
        "of which a higher band's packet waits only for its own and the higher ones: an upper bound there); "
        "SYN drops counts the SYNs the server's host dropped, demand queued beyond "
        "the server's connection cap, where no admission policy of the server looks (000 §4); unread wait is "
        "the mean time a request's first bytes waited in the kernel before the server read them, the accept "
        "queue included (`sojourn_unread_wait_seconds`, measured with an admission policy since it judges "
        "requests from that arrival; — for runs without a policy, or from before the measure, whose policy judged "
        "requests from when the server read them); settle is the time from a step up into overload "
        "(a stretch of periods above rho 1) until the mean response time (by bins of a sixtieth of the "
        "stretch, a running median over 5 bins) enters the band around its second half's level (25% of the level, "
        "or for a recovery a tenth of the step down from the overload's level if wider) to spend at least 90% of the rest of the stretch in "
        "it, and recover the same from the step down to the next step up, back to the underload level (never: it "
        "did not, still climbing, falling or swinging; the median over a run's load steps, one that never "
        "settled counting as the longest; — where there is no step down, as in persistent overload); sessions/s is 003's completed sessions per second. Cells are means over "
        "repetitions with their 90% interval.", "",
        "Beside each run, the simulator (`sojourn-engine sim`, docs/simulator.md) replays the run's trace "
        "with the server's own scheduler and admission code and the run's write quantum, write "
        "concurrency and NOTSENT_LOWAT (each write passing the mark by two segments, as Linux fills the "
        "segment buffer it opened below the mark), on a link of the body rate a load of 1 carried in the trace "
        "(load counted on the wire, 000 §2.3: what the bodies get of the uplink; each model.json names its "
        "options), without TCP, packets, a SYN queue "
        "or the kernel's priority bands, and ends its requests as the testbed's run ends them (after the run's "
        "timeout, or not complete when the run stops, its drain time after the last request)."
        " Where testbed and model agree, the policy alone explains the "
        "figure; where they part, the table beside the model shows how much of the gap the testbed's handshakes "
        "make, the uplink queue column what each round trip of the rest waited at the bottleneck, and the drop "
        "and timeout columns the losses at a full uplink queue, neither of which the model's fluid link has: a "
        "response whose first segment the queue dropped waits a retransmission timeout (at least 200 ms, RFC 6298 "
        "§2.4 as Linux bounds it) before its first byte (sojourn.overload.simulate).", "",
    ]
    note, missing = [], []
    sets = {experiment.name: read_published(published, experiment) for experiment in EXPERIMENTS}
    for experiment in EXPERIMENTS:
        reps, scale = sets[experiment.name]
        name = experiment.name if scale != "quick" else f"{experiment.name}-quick"
        twins = _by_sweep(sets[experiment.twin_set][0]) if experiment.twin_set else None
        part, part_note = section(experiment, reps, scale, published / "figures", doc, read_models(published, name),
                                  twins)
        lines += part
        note += part_note
        if scale != "full":
            missing.append(experiment.name)
    lines += ["## Closing note", ""]
    if note:
        lines += ["Which run wins on which metric, and by how much against the same scheduler without admission:", "",
                  *note]
    else:
        lines.append("No experiment has a published result yet, so no combination can be said to win on any metric.")
    if note and missing:
        lines += ["", f"Without a full-scale result yet: {', '.join(missing)}."]
    text = "\n".join(lines) + "\n"
    doc.write_text(text)
    return text
