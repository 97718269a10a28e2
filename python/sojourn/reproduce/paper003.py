"""003: Chen & Mohapatra, "Overload control in QoS-aware web servers".

Experiments: the four-queue productivity study of §4.1 (Table 2) with DWFS against every
static weight assignment around the best one (simulated, `sojourn.reproduce.dwfs_study`);
DWFS against Apache's FIFO with 40-60 closed-loop clients in three classes (§5, Tables 3-6)
and DWFS at timeouts 10 vs 20 s (Table 7, Figs. 11-12) on the testbed's stage pool.
"""

from __future__ import annotations

import json
import math
from functools import partial

from sojourn import papers
from sojourn.reproduce import Context, Entry, Paper, rows_of, summarize
from sojourn.reproduce.dwfs_study import STAGES, TABLE2 as TABLE2_ASSIGNMENTS
from sojourn.reproduce.section5_model import SERVICES
from sojourn.reproduce.rows import (Measure, Row, Why, about_one, bound, departs_alike, direction, measured,
                                    unexplained, within_2x)

EXPERIMENTS = [
    Entry("productivity-study", "four-queue productivity study: Table 2 and DWFS vs every static assignment (§4.1-4.2)",
          command=("{python}", "-m", "sojourn.reproduce.dwfs_study", "--out", "{out}", "{quick}"), quick_s=10),
    Entry("section5", "DWFS vs Apache FIFO, 40/50/60 closed-loop clients in three classes (§5, Tables 3-6)",
          spec="experiments/003/section5.toml", quick_s=240),
    Entry("section5-demand", "§5 with the stage costs as CPU demand (normal-load latency / 10), DWFS vs FIFO (issue 13)",
          spec="experiments/003/section5-demand.toml", quick_s=240, of_paper=False),
    Entry("section5-demand20", "§5 with the stage costs as CPU demand (normal-load latency / 20), DWFS only (issue 13)",
          spec="experiments/003/section5-demand20.toml", quick_s=130, of_paper=False),
    Entry("section5-demand40", "§5 with the stage costs as CPU demand (normal-load latency / 40), DWFS only (issue 13)",
          spec="experiments/003/section5-demand40.toml", quick_s=130, of_paper=False),
    Entry("section5-model", "§5 in virtual time: DWFS's drops per class from the stage pool's dispatcher alone "
          "(sojourn-engine stages) at every k with think time and at k = 20 without, in each order within a stage, "
          "one request at a time and with the CPU shared by threads, 10 seeds",
          command=("{python}", "-m", "sojourn.reproduce.section5_model", "--out", "{out}", "{quick}"), quick_s=150,
          of_paper=False),
    Entry("section5-demand-orders", "§5 at k = 10 (section5-demand) with DWFS ordering each stage's queue by class "
          "and by arrival instead of by deadline", spec="experiments/003/section5-demand-orders.toml", quick_s=240,
          of_paper=False),
    Entry("section5-demand-workers", "§5 at k = 10 (section5-demand) under a one-CPU quota, DWFS with one stage "
          "worker and with four sharing the CPU", spec="experiments/003/section5-demand-workers.toml", quick_s=240,
          of_paper=False),
    Entry("section5-demand-workers-onecore", "§5 at k = 10, DWFS with four stage workers on one core of their own "
          "(server.cpuset) instead of under a one-CPU quota: the quota's throttling taken out of their late "
          "completions, 60 clients", spec="experiments/003/section5-demand-workers-onecore.toml", quick_s=80,
          of_paper=False),
    Entry("section5-demand20-nothink", "§5 with the stage costs as CPU demand (latency / 20), clients without think "
          "time (Table 6's saturated closed loop), DWFS vs FIFO (issue 13)",
          spec="experiments/003/section5-demand20-nothink.toml", quick_s=90, of_paper=False),
    Entry("section5-demand20-nothink-continue", "as section5-demand20-nothink, clients going on after a failed "
          "request instead of restarting their session (workload.sessions.on_failure)",
          spec="experiments/003/section5-demand20-nothink-continue.toml", quick_s=90, of_paper=False),
    Entry("timeouts", "DWFS queue lengths and per-stage latency at timeout 10 vs 20 s (Table 7, Figs. 11-12)",
          spec="experiments/003/timeouts.toml", quick_s=80),
    Entry("timeouts-demand", "Table 7 with the stage costs as CPU demand (latency / 10), so CO and SR can finish",
          spec="experiments/003/timeouts-demand.toml", quick_s=80),
]

# 003 Table 2 and Tables 3-7.
EVEN = ",".join(["1"] * len(STAGES))  # Table 2's equal weights, the assignments' reference
# Each count Table 2 prints per assignment: completed, timed out and their difference, the
# productivity (§4.1).
TABLE2_COUNTS = {count: dict(zip(TABLE2_ASSIGNMENTS, papers.sessions()[f"table2_{count}"]))
                 for count in ("completed", "timed_out", "productivity")}
TABLE2 = TABLE2_COUNTS["productivity"]  # completed - timed out
# Average response time (s) per class at 40, 50, 60 clients (Tables 3-5: timeouts 10, 15, 20 s).
DWFS_RESPONSE = {"gold": {40: 6.902, 50: 7.152, 60: 6.968}, "silver": {40: 8.537, 50: 8.357, 60: 8.772},
                 "bronze": {40: 9.512, 50: 9.864, 60: 10.584}}
DWFS_TIMEOUT_RATE = {"gold": {40: 0.0016, 50: 0.0028, 60: 0.0044}, "silver": {40: 0.0011, 50: 0.0020, 60: 0.0035},
                     "bronze": {40: 0.0001, 50: 0.0016, 60: 0.0024}}
TIMEOUT_RATE_BOUND = 0.005  # §5.3: "such occurrence is less than 0.5%"
APACHE_RESPONSE = {40: 9.623, 50: 11.885, 60: 14.267}  # Table 6
TABLE7 = {"MM": (1.6, 2.3), "CO": (27.5, 27.9), "SR": (14.5, 20.9), "BR": (6.0, 6.6)}  # latency (s), timeout 10 / 20
TIMEOUT_RUNS = ("timeout-10", "timeout-20")  # the variants of timeouts.toml and timeouts-demand.toml

# The §5 experiments by k, the factor dividing §5.1's normal-load latencies into stage costs
# (issue 13): section5 takes them as CPU time (k = 1); the think time is divided by k too, so
# the relative load of 40-60 clients is the same in all three.
DEMAND_RUNS = (("section5", 1, "2 / k"), ("section5-demand", 10, "2 / k"), ("section5-demand20", 20, "2 / k"),
               ("section5-demand40", 40, "2 / k"),
               ("section5-demand20-nothink", 20, "0"), ("section5-demand20-nothink-continue", 20, "0"))


def _study(ctx: Context):
    import pandas as pd

    directory = ctx.directory("productivity-study")
    summary = json.loads((directory / "summary.json").read_text())
    table2 = pd.read_csv(directory / "table2.csv").set_index("weights")["productivity"].to_dict()
    return summary, table2, pd.read_csv(directory / "study.csv")


def _per_seed(study, clients: int, top: tuple[str, str], bottom: tuple[str, str],
              count: str = "productivity") -> Measure:
    """``count`` (study.csv: productivity, completed, timed_out) of (policy, weights) ``top``
    over ``bottom`` per seed (a repetition of the simulation), then the mean and its 90% interval."""
    at = study[study["clients"] == clients].set_index(["policy", "weights", "seed"])[count]
    ratios = [at[top + (seed,)] / at[bottom + (seed,)] for seed in sorted(study["seed"].unique())
              if top + (seed,) in at.index and bottom + (seed,) in at.index and at[bottom + (seed,)]]
    return summarize(ratios, (("productivity-study", ""),))


def _policy(label: str) -> tuple[str, str]:
    """``wfs (40,1,1,1)`` -> ("wfs", "40,1,1,1")."""
    policy, _, weights = label.partition(" ")
    return policy, weights.strip("()") or "-"


def _study_rows(ctx: Context) -> list[Row]:
    summary, table2, study = _study(ctx)
    e = "productivity-study"
    best, worst = max(table2, key=table2.get), min(table2, key=table2.get)
    rows = [
        ctx.row(e, f"Table 2: best / worst assignment's productivity, 20 clients (ours: ({best}) / ({worst}))",
                direction(max(TABLE2.values()) / min(TABLE2.values()), "nearly eight times (3314 / 394)"),
                _per_seed(study, 20, ("rr", best), ("rr", worst)), _co_weight_why(study, 20)),
        ctx.row(e, "Table 2: (5,1,1,1) / (1,1,1,1) productivity, 20 clients",
                direction(TABLE2["5,1,1,1"] / TABLE2["1,1,1,1"], "3314 / 2330"),
                _per_seed(study, 20, ("rr", "5,1,1,1"), ("rr", EVEN)),
                _load_why(study, 20, "5,1,1,1", EVEN)),
        *(ctx.row(e, f"Table 2: (5,1,1,1) / (1,1,1,1) requests {count.replace('_', ' ')}, 20 clients",
                  direction(TABLE2_COUNTS[count]["5,1,1,1"] / TABLE2_COUNTS[count][EVEN],
                            f"{TABLE2_COUNTS[count]['5,1,1,1']} / {TABLE2_COUNTS[count][EVEN]}"),
                  _per_seed(study, 20, ("rr", "5,1,1,1"), ("rr", EVEN), count),
                  _load_why(study, 20, "5,1,1,1", EVEN, count))
          for count in ("completed", "timed_out")),
        ctx.row(e, "Table 2: (5,1,5,1) / (1,1,1,1) productivity, 20 clients",
                direction(TABLE2["5,1,5,1"] / TABLE2["1,1,1,1"], "2986 / 2330"),
                _per_seed(study, 20, ("rr", "5,1,5,1"), ("rr", EVEN))),
    ]
    for clients, s in sorted(summary.items(), key=lambda item: int(item[0])):
        n = int(clients)
        for label, static in ((f"the best of Table 2's assignments ({s['best_table2']})", ("rr", s["best_table2"])),
                              (f"the best static assignment of the sweep ({s['best_static']})",
                               _policy(s["best_static"]))):
            rows.append(ctx.row(e, f"DWFS / {label}, {n} clients",
                                bound(">", 1, text="DWFS does better than static weights (§4.2, §7)"),
                                _per_seed(study, n, ("dwfs", "-"), static), _starving(study, n, static)))
    return rows


def _co_weight_why(study, clients: int) -> Why | None:
    """Why Table 2's spread is narrower here: the paper's worst assignments weight CO, a
    stage that Fig. 5's transitions send few requests to, so a work-conserving scheduler
    that favours it holds the other stages back little. Measured when the paper's worst
    assignment weights CO, CO completed under 5% of the requests of (1,1,1,1), and every
    assignment weighting CO was within 10% of (1,1,1,1) here."""
    co, even = STAGES.index("CO"), EVEN
    weighted = [w for w in TABLE2 if int(w.split(",")[co]) > 1]
    if min(TABLE2, key=TABLE2.get) not in weighted:
        return None
    share = _stage_share(study, clients, ("rr", even), "CO")
    ours = {w: _per_seed(study, clients, ("rr", w), ("rr", even)) for w in weighted}
    if not (share < 0.05 and all(m.ok and abs(m.value - 1) < 0.1 for m in ours.values())):
        return None
    return measured(f"the paper's worst assignments weight CO ({', '.join(f'({w}) {TABLE2[w]}' for w in weighted)} "
                    f"against {TABLE2[even]} for ({even})); CO completed {share:.1%} of ({even})'s requests here "
                    "(study.csv; Fig. 5's transitions send few sessions to it), so favouring it held the other "
                    "stages back little: " + ", ".join(f"({w}) made {m.value:.2f}x ({even})'s productivity (paper "
                                                        f"{TABLE2[w] / TABLE2[even]:.2f})" for w, m in ours.items()))


def _load_why(study, clients: int, top: str, bottom: str, count: str = "productivity") -> Why | None:
    """Where ours parts from Table 2's ``top`` / ``bottom`` ``count`` (productivity, completed
    or timed_out): the counts the paper prints, and the load. §4.1 gives no number of clients,
    so its load shows only in how many requests (1,1,1,1) timed out per completion; measured
    when, at the study's client count nearest the paper's in that (another than ``clients``),
    the ratio departs from 1 as the paper's does (within 2x, :func:`departs_alike`); None
    without the counts."""
    means = {int(n): group.groupby("weights")[["completed", "timed_out", "productivity"]].mean()
             for n, group in study[study["policy"] == "rr"].groupby("clients")}
    if clients not in means or not {top, bottom, EVEN} <= set(means[clients].index):
        return None
    at = means[clients]
    counts = "; ".join(
        f"({w}) completed {at.loc[w, 'completed']:.0f} and timed out {at.loc[w, 'timed_out']:.0f} (paper "
        f"{TABLE2_COUNTS['completed'][w]}, {TABLE2_COUNTS['timed_out'][w]})" for w in (top, bottom))
    per_completion = {n: m.loc[EVEN, "timed_out"] / m.loc[EVEN, "completed"] for n, m in means.items() if EVEN in m.index}
    paper_load = TABLE2_COUNTS["timed_out"][EVEN] / TABLE2_COUNTS["completed"][EVEN]
    nearest = min(per_completion, key=lambda n: abs(per_completion[n] - paper_load))
    text = (f"{counts} ({clients} clients, mean over the seeds, study.csv): ({EVEN}) timed out "
            f"{per_completion[clients]:.2f} requests per completion against the paper's {paper_load:.2f}, a load "
            "§4.1 gives no number of clients for")
    if nearest == clients:
        return unexplained(f"{text}; no other client count of the study comes nearer the paper's")
    papers_ratio = TABLE2_COUNTS[count][top] / TABLE2_COUNTS[count][bottom]
    ratio = means[nearest].loc[top, count] / means[nearest].loc[bottom, count]
    text += (f"; at {nearest} clients, where ({EVEN}) timed out {per_completion[nearest]:.2f} per completion (the "
             f"nearest of {', '.join(str(n) for n in sorted(per_completion))}), ({top}) / ({bottom}) "
             f"{count.replace('_', ' ')} was {ratio:.2f} against the paper's {papers_ratio:.3g}")
    return measured(text) if departs_alike(ratio, papers_ratio) else unexplained(text)


def _stage_share(study, clients: int, policy: tuple[str, str], stage: str = "MM") -> float:
    """The share of a policy's completed requests that were ``stage``'s (study.csv, all seeds)."""
    rows = study[(study["clients"] == clients) & (study["policy"] == policy[0]) & (study["weights"] == policy[1])]
    return float(rows[f"completed_{stage}"].sum() / rows["completed"].sum()) if len(rows) else math.nan


def _starving(study, clients: int, static: tuple[str, str]):
    """Why DWFS has less productivity than a static assignment: the assignment completes
    mostly MM, the shortest stage, and lets the sessions that leave it time out."""
    theirs, ours = _stage_share(study, clients, static), _stage_share(study, clients, ("dwfs", "-"))
    if not theirs > ours:
        return None
    return measured(f"{static[0]} ({static[1]}) completed {theirs:.1%} of its requests at MM, DWFS {ours:.1%} "
                    "(study.csv): productivity = completed - timed out rewards starving the long stages")


def _stated(measure: Measure, words: str) -> str:
    """A measure as a reason quotes it: its mean, and its 90% interval when it has one."""
    interval = f" [{measure.ci[0]:{words}}, {measure.ci[1]:{words}}]" if measure.ci else ""
    return f"{measure.value:{words}}{interval}"


def _larger_k(ctx: Context, experiment: str, quantity, in_line, words: str, paper_value: float | None = None):
    """A measured reason for a §5 row that differs from the paper: the same quantity
    (``quantity(experiment)``, a Measure) in line with the paper (``in_line``, given that
    Measure) in a run with the stage costs divided by a larger k at the same think time
    (DEMAND_RUNS), or, given the paper's ratio ``paper_value``, beyond it from ours on its side
    of 1 (the reading of the costs places the paper's value between the two). When no such run is:
    unexplained, with what each gave (for a row no other reason accounts for); None without
    such runs."""
    k, think = next((k, t) for e, k, t in DEMAND_RUNS if e == experiment)
    ours, gave = quantity(experiment), []
    for other, other_k, other_think in DEMAND_RUNS:
        if other_k > k and other_think == think and ctx.has(other):
            theirs = quantity(other)
            if theirs.ok and in_line(theirs):
                return measured(f"with the stage costs divided by {other_k} instead of {k} (`{other}`) it was "
                                f"{_stated(theirs, words)}: §5.1's latencies taken as CPU time leave the stages no "
                                "slack under the class bounds")
            # Between, and on the paper's side of 1 (a ratio past 1 turns the direction).
            if theirs.ok and ours.ok and paper_value is not None and (theirs.value - 1) * (paper_value - 1) > 0 and \
                    min(ours.value, theirs.value) <= paper_value <= max(ours.value, theirs.value):
                return measured(f"with the stage costs divided by {other_k} instead of {k} (`{other}`) it was "
                                f"{_stated(theirs, words)}: the paper's {paper_value:{words}} lies between the two, "
                                "so how §5.1's latencies are read as CPU time places it")
            if theirs.ok:
                gave.append(f"with the stage costs divided by {other_k} (`{other}`) {_stated(theirs, words)}")
    return unexplained("; ".join(gave) + ", not in line with the paper's either") if gave else None


# The §5 experiments of ours that differ from another in one factor: the other, and what it
# has that this one lacks (the spec files say the same).
ONE_FACTOR_APART = {
    "section5-demand20-nothink": ("section5-demand20", "a think time of 2 / k = 0.1 s"),
    "section5-demand20-nothink-continue": ("section5-demand20-nothink", "session restarts after a failed request"),
}


def _one_factor_why(ctx: Context, experiment: str, quantity, in_line, words: str):
    """A measured reason for a row of an experiment of ours that differs from the paper's
    set-up: the same quantity in line (``in_line``) once its factors are put back one at a
    time (ONE_FACTOR_APART), each step named with what it gave."""
    steps = []
    while experiment in ONE_FACTOR_APART and ctx.has(ONE_FACTOR_APART[experiment][0]):
        experiment, factor = ONE_FACTOR_APART[experiment]
        theirs = quantity(experiment)
        if not theirs.ok:
            return None
        steps.append(f"{'adding ' if steps else 'with '}{factor} (`{experiment}`) {_stated(theirs, words)}")
        if in_line(theirs):
            return measured("its factors put back one at a time: " + "; ".join(steps))
    return None


def _closed_loop_why(ctx: Context, experiment: str, name: str, users: int, ratio: Measure):
    """A measured reason for a DWFS class / FIFO response-time ratio beyond the paper's, in a
    closed loop without think time: there each class's clients always wait on one request,
    so its mean response is its clients over its request rate (Little's law; the rate counts
    the requests dropped early too, each of which also took a client's turn), and the ratio is
    FIFO's rate for the class over DWFS's. Given when that prediction is within 10% of it."""
    think = next(t for e, _, t in DEMAND_RUNS if e == experiment)
    if think != "0" or not ratio.ok:
        return None
    sent = {policy: ctx.mean(experiment, f"{policy}-users={users}", f"sessions.classes.{name}.requests")
            for policy in ("fifo", "dwfs")}
    gold = {policy: ctx.mean(experiment, f"{policy}-users={users}", "sessions.classes.gold.requests")
            for policy in ("fifo", "dwfs")}
    if not all(sent.values()) or abs(sent["fifo"] / sent["dwfs"] / ratio.value - 1) > 0.1:
        return None
    return measured(f"{name}'s clients sent {sent['dwfs']:.0f} requests a repetition under DWFS against "
                    f"{sent['fifo']:.0f} under FIFO (gold's {gold['dwfs']:.0f} against {gold['fifo']:.0f}); with "
                    "clients that do not think a class's mean response is its clients over its request rate "
                    f"(Little's law): {sent['fifo'] / sent['dwfs']:.3g}. DWFS moved {name}'s share of the server "
                    "to gold")


# How near our DWFS / FIFO mean over all classes must be to the paper's (Tables 3-5 against
# Table 6) for a class's miss to be put down to how the gain is split between the classes.
SAME_GAIN = 0.1


def _split_why(ctx: Context, experiment: str, name: str, users: int, ratio: Measure):
    """A measured reason for a class / FIFO ratio on the wrong side of the paper's: DWFS cut
    the mean over all requests by as much as the paper's did (within SAME_GAIN; the paper's
    is the mean of its three classes), but spread it wider between the classes (this class /
    gold beyond the paper's, its whole 90% interval). Favouring gold more leaves the last
    class less of the same gain. Why the split is wider is not measured here."""
    if not ratio.ok or name == "gold":
        return None
    dwfs, fifo = f"dwfs-users={users}", f"fifo-users={users}"
    gain = ctx.ratio((experiment, dwfs, "sessions.overall.response_mean_s"),
                     (experiment, fifo, "sessions.overall.response_mean_s"))
    spread = ctx.ratio((experiment, dwfs, f"sessions.classes.{name}.response_mean_s"),
                       (experiment, dwfs, "sessions.classes.gold.response_mean_s"))
    classes = DWFS_RESPONSE.values()
    paper_gain = sum(c[users] for c in classes) / len(DWFS_RESPONSE) / APACHE_RESPONSE[users]
    paper_spread = DWFS_RESPONSE[name][users] / DWFS_RESPONSE["gold"][users]
    if not (gain.ok and spread.ok) or abs(gain.value / paper_gain - 1) > SAME_GAIN:
        return None
    if min(spread.ci or (spread.value,)) <= paper_spread:
        return None
    return measured(f"DWFS's mean over all requests was {_stated(gain, '.3g')} of FIFO's, as the paper's "
                    f"classes averaged {paper_gain:.3g} of Apache's (Tables 3-5 over Table 6); ours split the "
                    f"gain wider: {name} / gold {_stated(spread, '.3g')} against the paper's {paper_spread:.3g}")


def _class_why(ctx: Context, experiment: str, name: str, users: int, ratio: Measure):
    return (_closed_loop_why(ctx, experiment, name, users, ratio)
            or _split_why(ctx, experiment, name, users, ratio))


def _drop_why(ctx: Context, experiment: str, name: str, users: int, rate: Measure):
    """A drop rate over the bound: measured when the paper's own rate is inside our 90%
    interval and that reaches below the bound (then there is no difference to explain), or
    when the same class at the same clients dropped less than half as much with the stage
    costs divided by a larger k, or with the factors of an experiment of ours put back
    (:func:`_one_factor_why`); else the early drops by stage."""
    run, metric = f"dwfs-users={users}", f"sessions.classes.{name}.drop_rate"
    printed = DWFS_TIMEOUT_RATE[name][users]
    if rate.ci and rate.ci[0] <= printed <= rate.ci[1] and rate.ci[0] < TIMEOUT_RATE_BOUND:
        return measured(f"the paper's own {printed:.2%} is inside our 90% interval [{rate.ci[0]:.2%}, "
                        f"{rate.ci[1]:.2%}], which reaches below the {TIMEOUT_RATE_BOUND:.1%} bound: ours does not "
                        "differ from the paper's by more than its repetitions' spread")

    def quantity(other: str) -> Measure:
        return ctx.measure(other, run, metric)

    def in_line(theirs: Measure) -> bool:
        return rate.ok and theirs.value < rate.value / 2

    found = (_larger_k(ctx, experiment, quantity, in_line, ".2%")
             or _one_factor_why(ctx, experiment, quantity, in_line, ".2%"))
    if found:
        return found
    deadline = sum(ctx.mean(experiment, run, f"sessions.anatomy.{s}.dropped_deadline") for s in TABLE7)
    sr = ctx.mean(experiment, run, "sessions.anatomy.SR.dropped_deadline")
    return unexplained(f"not measured apart; {sr:.0f} of the {deadline:.0f} early (deadline) drops per repetition "
                       "were SR's (sessions.anatomy)")


def _drop_claim(name: str, users: int):
    """Tables 3-5's drop rate of a class at a client count, under §5.3's bound."""
    return bound("<", TIMEOUT_RATE_BOUND, paper=DWFS_TIMEOUT_RATE[name][users],
                 text=f"{DWFS_TIMEOUT_RATE[name][users]:.2%}; less than 0.5% throughout")


def _drop_rows(ctx: Context, experiment: str) -> list[Row]:
    rows = []
    for users in (40, 60):
        for name in ("gold", "bronze"):
            rate = ctx.measure(experiment, f"dwfs-users={users}", f"sessions.classes.{name}.drop_rate")
            rows.append(ctx.row(experiment, f"DWFS {name} request timeout (drop) rate, {users} clients",
                                _drop_claim(name, users),
                                rate, _drop_why(ctx, experiment, name, users, rate)))
    return rows


def _section5_rows(ctx: Context, experiment: str = "section5",
                   clients: tuple[int, ...] = (40, 50, 60)) -> list[Row]:
    def ratio_row(claim: str, paper: float, text: str, top: tuple[str, str], bottom: tuple[str, str],
                  otherwise=lambda ratio: None) -> Row:
        def quantity(e: str) -> Measure:
            return ctx.ratio((e,) + top, (e,) + bottom)
        ours = quantity(experiment)
        def in_line(theirs: Measure) -> bool:
            """On the paper's side of 1 within 2x of it as a direction's verdict has it, or
            holding the paper's value in its 90% interval (0.988 is the paper's "about the
            same")."""
            value, interval = theirs.value, theirs.ci
            return ((value - 1) * (paper - 1) > 0 and departs_alike(value, paper)) or \
                (interval is not None and interval[0] <= paper <= interval[1])

        larger = _larger_k(ctx, experiment, quantity, in_line, ".3g", paper)
        why = ((larger if larger and larger.measured else None)
               or _one_factor_why(ctx, experiment, quantity, in_line, ".3g") or otherwise(ours) or larger)
        return ctx.row(experiment, claim, direction(paper, text), ours, why)

    rows = []
    for users in clients:
        for name in ("gold", "bronze"):
            rows.append(ratio_row(f"DWFS {name} / FIFO mean response time, {users} clients",
                                  DWFS_RESPONSE[name][users] / APACHE_RESPONSE[users],
                                  f"{DWFS_RESPONSE[name][users]} s / {APACHE_RESPONSE[users]} s",
                                  (f"dwfs-users={users}", f"sessions.classes.{name}.response_mean_s"),
                                  (f"fifo-users={users}", "sessions.overall.response_mean_s"),
                                  partial(_class_why, ctx, experiment, name, users)))
    rows += _drop_rows(ctx, experiment)
    rows.append(ratio_row("DWFS bronze / gold mean response time, 60 clients (service differentiation)",
                          DWFS_RESPONSE["bronze"][60] / DWFS_RESPONSE["gold"][60], "10.584 s / 6.968 s",
                          ("dwfs-users=60", "sessions.classes.bronze.response_mean_s"),
                          ("dwfs-users=60", "sessions.classes.gold.response_mean_s"),
                          partial(_model_split_why, ctx, experiment, 60)))
    for users in clients:
        rows.append(ctx.row(experiment, f"DWFS / FIFO requests served, {users} clients",
                            about_one("the number of completed requests was more or less the same (§5.2)"),
                            ctx.ratio((experiment, f"dwfs-users={users}", "sessions.overall.served"),
                                      (experiment, f"fifo-users={users}", "sessions.overall.served")),
                            _served_mix_why(ctx, experiment, users)))
    fifo = ctx.row(experiment, "FIFO mean response time, 60 / 40 clients",
                   direction(APACHE_RESPONSE[60] / APACHE_RESPONSE[40], "14.267 s / 9.623 s"),
                   ctx.ratio((experiment, "fifo-users=60", "sessions.overall.response_mean_s"),
                             (experiment, "fifo-users=40", "sessions.overall.response_mean_s")))
    still = "section5-demand20-nothink"
    if ctx.has(still) and experiment != still:
        theirs = ctx.ratio((still, "fifo-users=60", "sessions.overall.response_mean_s"),
                           (still, "fifo-users=40", "sessions.overall.response_mean_s"))
        if theirs.ok and departs_alike(theirs.value, fifo.paper.paper_value):
            fifo.why = measured(f"with clients that do not think (`{still}`) it was {theirs.value:.3g}: Table 6's "
                                "saturated closed loop, while these clients think between requests")
    return rows + [fifo]


def _served_mix_why(ctx: Context, e: str, users: int):
    """Why DWFS and FIFO served different numbers of requests: the CPU each spent on the
    requests it completed (completed x processing mean per stage, sessions.anatomy) and what
    one of them cost. Measured when both spent the worker alike (within 5%): then the count
    differs by what a completed request cost, i.e. by the mix of stages each completed."""
    def spent(policy: str) -> tuple[float, float, float]:
        run = f"{policy}-users={users}"
        done = {stage: ctx.mean(e, run, f"sessions.anatomy.{stage}.completed") for stage in TABLE7}
        cpu = sum(n * ctx.mean(e, run, f"sessions.anatomy.{stage}.processing_mean_s")
                  for stage, n in done.items() if n)
        served = sum(done.values())
        return cpu, cpu / served if served else math.nan, done["MM"] / served if served else math.nan

    (cpu, cost, cheap), (fifo_cpu, fifo_cost, fifo_cheap) = spent("dwfs"), spent("fifo")
    if any(math.isnan(v) for v in (cpu, cost, cheap, fifo_cpu, fifo_cost, fifo_cheap)):
        return None
    text = (f"DWFS's worker spent {cpu:.1f} s of CPU on the requests it completed, FIFO's {fifo_cpu:.1f} s (a "
            f"repetition of {ctx.config(e, f'dwfs-users={users}', 'workload.duration_s'):g} s), and a completed request "
            f"cost {cost * 1000:.2f} ms against {fifo_cost * 1000:.2f} ms ({cheap:.0%} of DWFS's were MM, the cheapest "
            f"stage, against {fifo_cheap:.0%}; completed x processing mean per stage, sessions.anatomy)")
    if abs(cpu / fifo_cpu - 1) < 0.05:
        return measured(f"{text}: the same CPU served {fifo_cost / cost:.2f}x the requests, DWFS's completed mix "
                        "being the cheaper")
    users_bound = _users_bound_why(ctx, e, users, cpu, fifo_cpu, fifo_cost)
    if users_bound:
        return measured(f"{text}; {users_bound}")
    return unexplained(f"{text}: the two spent the worker differently, so the mix alone does not give the count")


# How near a prediction of DWFS / FIFO requests served must come to ours to be its reason.
SERVED_PREDICTION = 0.1


def _users_bound_why(ctx: Context, e: str, users: int, cpu: float, fifo_cpu: float, fifo_cost: float) -> str | None:
    """DWFS serving more than FIFO with less CPU: when FIFO's workers were busy all along and
    DWFS's were not, FIFO served what its workers could at its mix (their time over what a
    completed request cost) and DWFS what its users asked for: in a closed loop each user
    sends a request per think time and response (Little's law), less those DWFS dropped.
    Given when that prediction of the ratio comes within SERVED_PREDICTION of ours."""
    dwfs, fifo = f"dwfs-users={users}", f"fifo-users={users}"
    duration, think = ctx.config(e, dwfs, "workload.duration_s"), ctx.config(e, dwfs, "workload.sessions.think_s")
    busy = ctx.config(e, dwfs, "server.stages.workers") * duration
    response, dropped = (ctx.mean(e, dwfs, f"sessions.overall.{key}") for key in ("response_mean_s", "drop_rate"))
    ours = ctx.ratio((e, dwfs, "sessions.overall.served"), (e, fifo, "sessions.overall.served"))
    if (not ours.ok or math.isnan(response) or math.isnan(dropped) or not think
            or fifo_cpu < 0.95 * busy or cpu > 0.9 * busy):
        return None
    asked = users * duration / (think + response)
    capacity = busy / fifo_cost
    predicted = asked * (1 - dropped) / capacity
    if abs(predicted / ours.value - 1) > SERVED_PREDICTION:
        return None
    return (f"FIFO's worker was busy {fifo_cpu:.1f} s of {busy:g} and served what it could at its mix ({busy:g} s / "
            f"{fifo_cost * 1000:.2f} ms = {capacity:,.0f} requests), while DWFS's idled: its users set its count, "
            f"{users} users thinking {think:g} s with {response * 1000:.0f}-ms responses send {asked:,.0f} requests "
            f"(Little's law) and DWFS dropped {dropped:.1%}, {asked * (1 - dropped):,.0f} served: {predicted:.2f}x "
            "FIFO's")


def _latency(ctx: Context, e: str, run: str, stage: str) -> dict[int, float]:
    """Per repetition: the stage's queueing + processing mean (s)."""
    queueing = ctx.per_rep(e, run, f"sessions.anatomy.{stage}.queueing_mean_s")
    processing = ctx.per_rep(e, run, f"sessions.anatomy.{stage}.processing_mean_s")
    return {rep: queueing[rep] + processing[rep] for rep in queueing if rep in processing}


def _unserved(ctx: Context, e: str, run: str, stage: str) -> str:
    deadline = ctx.mean(e, run, f"sessions.anatomy.{stage}.dropped_deadline")
    refused = ctx.mean(e, run, f"sessions.anatomy.{stage}.dropped_waiting_room")
    return f"{stage} completed nothing at {run} ({deadline:.0f} deadline drops and {refused:.0f} waiting-room " \
           "refusals per repetition)"


def _timeout_rows(ctx: Context, e: str = "timeouts") -> list[Row]:
    """Table 7: each stage's latency at timeout 20 s over 10 s (``e``: timeouts at the §5.1
    costs, timeouts-demand with the costs as CPU demand)."""
    rows = []
    costs = " (costs as CPU demand)" if e == "timeouts-demand" else ""
    for stage, (ten, twenty) in TABLE7.items():
        short, long = (_latency(ctx, e, run, stage) for run in TIMEOUT_RUNS)
        common = sorted(set(short) & set(long))
        absent = "; ".join(_unserved(ctx, e, run, stage) for run, values in zip(TIMEOUT_RUNS, (short, long))
                           if not values)
        ours = summarize([long[r] / short[r] for r in common if short[r]], tuple((e, run) for run in TIMEOUT_RUNS),
                         absent=absent)
        rows.append(ctx.row(e, f"Table 7: {stage} latency, timeout 20 s / 10 s{costs}",
                            direction(twenty / ten, f"{twenty} s / {ten} s"), ours,
                            _queueing_why(ctx, e, stage) or _unbound_why(ctx, e, stage)))
    return rows


def _at_both(ctx: Context, e: str, metric: str) -> list[float]:
    """``metric``'s mean over the repetitions at timeout-10 and at timeout-20."""
    return [ctx.mean(e, run, metric) for run in TIMEOUT_RUNS]


def _unbound_why(ctx: Context, e: str, stage: str) -> Why | None:
    """Why a stage's latency did not grow with the timeout: measured when the short timeout
    scarcely acted (under 2% of requests dropped) and the stage's queue did not lengthen, so
    a longer timeout had no queue to let grow (003 §4.2: it acts only through the deadline
    drops, the waiting room floor(timeout / T_j) and DWFS's weights)."""
    dropped = _at_both(ctx, e, "sessions.overall.drop_rate")
    queue = _at_both(ctx, e, f"sessions.queue_mean.{stage}")
    weight = _at_both(ctx, e, f"sessions.anatomy.{stage}.weight_mean")
    if not all(math.isfinite(v) for v in dropped + queue) or dropped[0] >= 0.02 or queue[1] > 1.1 * queue[0]:
        return None
    text = (f"the 10-s timeout scarcely acted: DWFS dropped {dropped[0]:.1%} of requests at timeout-10 and "
            f"{dropped[1]:.1%} at timeout-20, and {stage}'s mean queue was {queue[0]:.2f} / {queue[1]:.2f}")
    if all(math.isfinite(w) for w in weight):
        text += f" with its DWFS weight {weight[0]:.3f} / {weight[1]:.3f}"
    return measured(text + ": a longer timeout had no longer queue to let form")


def _worker_seconds(ctx: Context, e: str, run: str, stage: str) -> float:
    """The stage worker's time on ``stage`` in a repetition of ``run`` (completed requests x
    their mean processing time), averaged over the repetitions."""
    completed = ctx.per_rep(e, run, f"sessions.anatomy.{stage}.completed")
    processing = ctx.per_rep(e, run, f"sessions.anatomy.{stage}.processing_mean_s")
    seconds = [completed[rep] * processing.get(rep, 0.0) for rep in completed]
    return sum(seconds) / len(seconds) if seconds else 0.0


def _queueing_why(ctx: Context, e: str, stage: str) -> Why | None:
    """Why a stage's latency grew more with the timeout than Table 7's: measured when its
    processing time stayed put and its queueing grew while the one worker spent more time on
    another stage, most often one the short timeout let run not at all (003 §4.2: a request
    is dropped before it runs when now + T_j passes its deadline)."""
    queueing = _at_both(ctx, e, f"sessions.anatomy.{stage}.queueing_mean_s")
    processing = _at_both(ctx, e, f"sessions.anatomy.{stage}.processing_mean_s")
    if not all(math.isfinite(v) for v in queueing + processing) or queueing[1] <= queueing[0]:
        return None
    if not 0.9 <= processing[1] / processing[0] <= 1.1:
        return None
    busy = {other: [_worker_seconds(ctx, e, run, other) for run in TIMEOUT_RUNS] for other in TABLE7 if other != stage}
    other, (before, after) = max(busy.items(), key=lambda item: item[1][1] - item[1][0])
    if after <= before:
        return None
    length = ctx.mean(e, TIMEOUT_RUNS[1], "duration_s")
    text = (f"{stage}'s processing stayed {processing[0] * 1e3:.1f} / {processing[1] * 1e3:.1f} ms while its "
            f"queueing went from {queueing[0] * 1e3:.1f} to {queueing[1] * 1e3:.1f} ms: at timeout-20 the one "
            f"worker spent {after:.1f} s of {length:.0f} on {other} against {before:.1f} s at timeout-10")
    if before == 0:  # the worker never ran it at timeout-10: it completed nothing there
        text += (f"; {_unserved(ctx, e, TIMEOUT_RUNS[0], other)}, where the paper's ran "
                 f"({TABLE7[other][0]} s latency at 10 s)")
    return measured(text)


def claims(ctx: Context) -> list[Row]:
    return rows_of(ctx, {
        "productivity-study": _study_rows, "section5": _section5_rows,
        "section5-demand": lambda ctx: _section5_rows(ctx, "section5-demand"),
        "section5-demand20": lambda ctx: _drop_rows(ctx, "section5-demand20"),
        "section5-demand40": lambda ctx: _drop_rows(ctx, "section5-demand40"),
        "section5-demand-orders": _variant_rows("section5-demand-orders", {
            order: (f"in {order} order", order, "one") for order in ("class", "arrival")}),
        "section5-demand-workers": _variant_rows("section5-demand-workers", {
            "workers1": ("with one stage worker under a one-CPU quota", "deadline", "one"),
            "workers4": ("with four stage workers sharing one CPU", "deadline", "threads-4-patient")}),
        "section5-demand20-nothink": lambda ctx: _section5_rows(ctx, "section5-demand20-nothink", clients=(40, 60)),
        "section5-demand20-nothink-continue":
            lambda ctx: _section5_rows(ctx, "section5-demand20-nothink-continue", clients=(40, 60)),
        "timeouts": _timeout_rows, "timeouts-demand": lambda ctx: _timeout_rows(ctx, "timeouts-demand")})


def _study_note(ctx: Context) -> str:
    summary, _, _ = _study(ctx)
    lines = ["### Why DWFS loses to a static assignment in the four-queue study", "",
             "| clients | DWFS productivity | best static (sweep) | its productivity | DWFS / it | seeds DWFS >= it "
             "| its MM share of completions | DWFS's MM share | DWFS timeouts / fewest of any static |",
             "|---|---|---|---|---|---|---|---|---|"]
    for clients, s in sorted(summary.items(), key=lambda item: int(item[0])):
        lines.append(f"| {clients} | {s['dwfs_productivity']:.0f} | {s['best_static']} | "
                     f"{s['best_static_productivity']:.0f} | {s['dwfs_over_best_static']:.2f} | "
                     f"{s['seeds_dwfs_at_least_best_static']} of {s['seeds']} | "
                     f"{s['best_static_mm_share_of_completions']:.1%} | {s['dwfs_mm_share_of_completions']:.1%} | "
                     f"{s['dwfs_timed_out_over_fewest_static']:.2f} |")
    mm = papers.sessions()["fig5_percent"][0][0] / 100
    lines += ["", f"""
The claim that dynamic weights beat every static assignment does not hold for our DWFS (each step
of Algorithm 1 and eqs. 5-6 is checked against the text in docs/dwfs.md). The measured reason is
in the study's counters (the table above, from summary.json): productivity = completed - timed
out counts requests, and the best static assignment maximizes it by starving every stage but MM,
the shortest and the one sessions start at and mostly return to (Fig. 5: MM -> MM {mm:.1%}). It
completes almost only MM requests (column "its MM share"); the sessions that leave MM time out,
abort, and restart at MM. That is a shortest-job-first policy, which §5.2 itself sets DWFS apart
from. DWFS instead sizes each queue's weight to serve its backlog within the timeout (its demand
T_j L_j / timeout) and credits a queue by how often sessions enter it (Q_j, the column sums of
Fig. 5), which ignores service time: it keeps all four stages productive, and so completes fewer
requests. Changes to DWFS's rules tried in a build that was not kept were not published, so
their numbers are not given here.
""".strip()]
    return "\n".join(lines)


def _config(ctx: Context, experiment: str, kind: str, name: str, key: str):
    """A stage's or a class's setting from the published run.json of DWFS at 40 clients."""
    return ctx.config(experiment, "dwfs-users=40", f"server.stages.{kind}.{name}.{key}")


def _section5_table(ctx: Context, experiment: str) -> list[str]:
    def mean(run: str, metric: str) -> float:
        return ctx.mean(experiment, run, metric)

    lines = ["| clients | FIFO mean (s) | DWFS gold / silver / bronze mean (s) | DWFS drop rate gold / silver / bronze "
             "| DWFS deadline drops MM / CO / SR / BR | DWFS waiting-room refusals MM / CO / SR / BR "
             "| session abort rate FIFO / DWFS |",
             "|---|---|---|---|---|---|---|"]
    for users in (40, 50, 60):
        fifo, dwfs = f"fifo-users={users}", f"dwfs-users={users}"
        if math.isnan(mean(fifo, "sessions.overall.response_mean_s")):
            continue
        response = " / ".join(f"{mean(dwfs, f'sessions.classes.{c}.response_mean_s'):.3f}" for c in DWFS_RESPONSE)
        drops = " / ".join(f"{mean(dwfs, f'sessions.classes.{c}.drop_rate'):.1%}" for c in DWFS_RESPONSE)
        by_stage = " | ".join(" / ".join(f"{mean(dwfs, f'sessions.anatomy.{s}.{kind}'):.0f}" for s in TABLE7)
                              for kind in ("dropped_deadline", "dropped_waiting_room"))
        aborts = (f"{mean(fifo, 'sessions.overall.session_abort_rate'):.2f} / "
                  f"{mean(dwfs, 'sessions.overall.session_abort_rate'):.2f}")
        lines.append(f"| {users} | {mean(fifo, 'sessions.overall.response_mean_s'):.3f} | {response} | {drops} | "
                     f"{by_stage} | {aborts} |")
    return lines


def _section5_note(ctx: Context) -> str:
    e = "section5"
    cost = {stage: _config(ctx, e, "stage", stage, "processing_ms") for stage in TABLE7}
    limit = {name: _config(ctx, e, "class", name, "timeout_ms") for name in DWFS_RESPONSE}
    lines = ["### §5 per point (means over repetitions)", ""] + _section5_table(ctx, e)
    lines += ["", f"""
Where ours differs: DWFS's drop rate is far above the paper's 0.5%. The drops by stage show
where: the §5.1 costs, scaled as CPU time on one worker (run.json: SR {cost['SR']:g} ms, CO
{cost['CO']:g} ms), leave SR no slack under gold's {limit['gold']:g} ms bound and CO none under
any class's (up to {max(limit.values()):g} ms), so DWFS's early drop (`now + T_j > deadline`,
§4.2) removes them whenever they would wait at all (deadline drops); a stage's waiting room is
floor(timeout / T_j) requests (refusals). The paper's "average processing time under normal
server load" was measured in a multi-threaded Apache, where processing overlaps. Every dropped
request aborts its session (003 §5.2's definition), hence DWFS's session abort rates. FIFO
never drops. The costs-as-demand runs below (issue 13) measure this explanation.
""".strip()]
    return "\n".join(lines)


def _demand_note(ctx: Context) -> str:
    lines = ["### §5 with the stage costs as CPU demand (issue 13)", ""]
    if ctx.has("section5-demand"):
        lines += [f"`section5-demand` per point ({ctx.scale('section5-demand')} scale, means over repetitions), "
                  "columns as in the §5 table above:", ""] + _section5_table(ctx, "section5-demand") + [""]
    lines += ["DWFS's drops against k, the factor dividing §5.1's normal-load latencies into CPU costs. The think "
              "time is divided by k too, so the clients offer the same share of the worker at every k; without "
              "think time (the last rows) the worker is saturated at every client count, as Table 6 implies the "
              "paper's was. The last column is gold's mean over its class bound (run.json):", "",
              "| k | think (s) | experiment (scale, reps) | clients | drop rate gold / silver / bronze | all classes "
              "| deadline drops SR / all stages | waiting-room refusals | SR queueing mean (ms) "
              "| DWFS gold mean / bound | virtual time: drop rate gold / silver / bronze |",
              "|---|---|---|---|---|---|---|---|---|---|---|"]
    model = _model(ctx)
    for experiment, k, think in DEMAND_RUNS:
        if not ctx.has(experiment):
            continue
        scale = ctx.scale(experiment)
        gold_bound = _config(ctx, experiment, "class", "gold", "timeout_ms") / 1000
        for users in (40, 50, 60):
            run = f"dwfs-users={users}"
            overall = ctx.measure(experiment, run, "sessions.overall.drop_rate")
            if not overall.ok:
                continue
            mean = lambda metric: ctx.mean(experiment, run, metric)  # noqa: E731
            drops = " / ".join(f"{mean(f'sessions.classes.{c}.drop_rate'):.2%}" for c in DWFS_RESPONSE)
            deadline = sum(mean(f"sessions.anatomy.{s}.dropped_deadline") for s in TABLE7)
            refused = sum(mean(f"sessions.anatomy.{s}.dropped_waiting_room") for s in TABLE7)
            sr = mean("sessions.anatomy.SR.dropped_deadline")
            queueing = mean("sessions.anatomy.SR.queueing_mean_s") * 1000
            gold = mean("sessions.classes.gold.response_mean_s") / gold_bound
            lines.append(f"| {k} | {think} | {experiment} ({scale}, {overall.repetitions}) | {users} | {drops} | "
                         f"{overall.value:.2%} | {sr:.0f} / {deadline:.0f} | {refused:.0f} | {queueing:.0f} | "
                         f"{gold:.2f} | {_model_drops(model, experiment, run)} |")
    lines += ["", "The last column is the same dispatcher without the server (`section5-model`: "
              "sojourn-engine stages in virtual time, the spec's costs, bounds, users, exit and exponential "
              "think time, as many seeds as it says, each the spec's duration); — where it has no run.",
              "", DEMAND_CONCLUSION]
    return "\n".join(lines)


def _model(ctx: Context) -> dict:
    """`section5-model`'s summary.json (experiment/run -> seeds, drop rate per class), or {}."""
    path = ctx.directory("section5-model") / "summary.json"
    return json.loads(path.read_text()) if ctx.has("section5-model") and path.is_file() else {}


def _model_drops(model: dict, experiment: str, run: str) -> str:
    point = model.get(f"{experiment}/{run}")
    if not point:
        return "—"
    rates = point["drop_rate"]
    return " / ".join(f"{rates[c]:.2%}" if c in rates else "—" for c in DWFS_RESPONSE) + f" ({point['seeds']} seeds)"


def _served(point: dict, service: str) -> dict:
    """A `section5-model` point's rates with the CPU served as ``service`` says (one request at
    a time: the point's own), {} before the model recorded them."""
    return point if service == "one" else point.get("by_service", {}).get(service, {})


def _model_split(point: dict, order: str, service: str = "one") -> float:
    """Bronze / gold mean response of a `section5-model` point in one stage order, one request
    at a time or with the CPU shared as ``service`` says (NaN without both, or before the model
    recorded them)."""
    means = _served(point, service).get("response_mean_s_by_stage_order", {}).get(order, {})
    gold, bronze = means.get("gold"), means.get("bronze")
    return bronze / gold if gold and bronze else math.nan


def _served_by(service: str) -> str:
    """A model reason's words for how its CPU was served: none for one request at a time (the
    server's way, which the reasons take for granted)."""
    return "" if service == "one" else f", {_service_words(service)},"


def _service_words(service: str, point: dict | None = None) -> str:
    """How a reason names a way of serving the CPU (section5_model.SERVICES), with the front
    end's cost per request that ``point`` (a `section5-model` point) was replayed with."""
    threads, ready_queue, patient, front_end = SERVICES[service]
    if threads == 1:
        return "one request at a time"
    words = (f"a ready queue of {threads} refilled when empty" if ready_queue
             else f"{threads} threads each taking a request when free")
    words += " and sessions going on after a late response, as the testbed's clients' do" if patient else ""
    if front_end:
        cost = _served(point or {}, service).get("front_end_s")
        words += (f", each request costing {cost * 1e3:.3f} ms more, the CPU the server's front end spent on one "
                  "(`section5-demand-workers-onecore`)" if cost else ", each request costing the front end's CPU more")
    return words


# How a reason names each of DWFS's orders within a stage (sched::dispatch::StageOrder).
ORDER_WORDS = {"deadline": "the server's default order, earliest deadline first", "class": "class order",
               "arrival": "arrival order"}


def _model_split_why(ctx: Context, experiment: str, users: int, ours: Measure, order: str = "deadline",
                     service: str = "one"):
    """Why DWFS's bronze / gold (``ours``, run in ``order`` within a stage, its CPU served as
    ``service`` says) differs from the paper's, from `section5-model`'s replay of
    ``experiment``: when the same dispatcher without the server, in the same order and
    service, splits the classes nearer ours than the paper's (log scale), the policy sets the
    split, not the testbed; the other orders' and services' splits are named beside it."""
    point = _model(ctx).get(f"{experiment}/dwfs-users={users}", {})
    split = {name: _model_split(point, name, service)
             for name in _served(point, service).get("response_mean_s_by_stage_order", {})}
    paper = DWFS_RESPONSE["bronze"][users] / DWFS_RESPONSE["gold"][users]
    if ours.ok and not point and ctx.has("section5-model"):
        return unexplained(f"`section5-model` replays no run of `{experiment}`, so the policy's part in the split is "
                           "not told apart from the testbed's")
    if not ours.ok or math.isnan(split.get(order, math.nan)):
        return None
    others = ", ".join(f"{ORDER_WORDS[name]} {value:.3g}" for name, value in split.items() if name != order)
    text = (f"the same dispatcher without the server (`section5-model`, virtual time, {point['seeds']} seeds"
            f"{_served_by(service)}) "
            f"split bronze / gold {split[order]:.3g} in {ORDER_WORDS[order]} ({others})")
    shared = {other: value for other in SERVICES if other != service
              and not math.isnan(value := _model_split(point, order, other))}
    sharing = (f"; in the same order {'with the CPU shared' if service == 'one' else 'served otherwise'}: " + ", ".join(
        f"{_service_words(other, point)} {value:.3g}" for other, value in shared.items())) if shared else ""
    if abs(math.log(split[order] / ours.value)) < abs(math.log(split[order] / paper)):
        return measured(f"{text}: nearer ours than the paper's {paper:.3g}, so DWFS's policy sets the split here, "
                        f"not the testbed{sharing}")
    return unexplained(f"{text}: nearer the paper's {paper:.3g} than ours, so the testbed widens the split{sharing}")


def _model_drop_why(ctx: Context, experiment: str, users: int, name: str, order: str, rate: Measure,
                    service: str = "one"):
    """Why a class's drop rate in ``order`` (its CPU served as ``service`` says) is over the
    paper's bound, from `section5-model`'s replay of ``experiment`` in the same order and
    service: measured when the dispatcher alone dropped over the bound too (the policy sets
    it), else unexplained with the model's rate."""
    point = _model(ctx).get(f"{experiment}/dwfs-users={users}", {})
    model = _served(point, service).get("drop_rate_by_stage_order", {}).get(order, {}).get(name)
    if model is None or not rate.ok:
        return None
    text = (f"the same dispatcher without the server (`section5-model`, {point['seeds']} seeds{_served_by(service)}) in "
            f"{ORDER_WORDS[order]} dropped {model:.2%} of {name}'s requests")
    if model >= TIMEOUT_RATE_BOUND:
        what = "the order within a stage sets" if service == "one" else "the order and the shared CPU set"
        return measured(f"{text}, over the bound too: {what} the rate, not the testbed")
    return unexplained(f"{text}, under the bound: the testbed adds the rest")


def _variant_rows(e: str, variants: dict[str, tuple[str, str, str]]):
    """An experiment of section5-demand's DWFS changed one way per variant (variant -> how its
    rows name it, its order within a stage, how its CPU is served as `section5-model` names
    it), against Tables 3-5: each class's drops and the bronze / gold split, beside
    `section5-model`'s replay of section5-demand in the same order and service."""
    def rows(ctx: Context) -> list[Row]:
        found = []
        for variant, (words, order, service) in variants.items():
            for users in (40, 60):
                for name in ("gold", "bronze"):
                    rate = ctx.measure(e, f"dwfs-{variant}-users={users}", f"sessions.classes.{name}.drop_rate")
                    found.append(ctx.row(e, f"DWFS {words}: {name} request timeout (drop) rate, {users} clients",
                                         _drop_claim(name, users), rate,
                                         _model_drop_why(ctx, "section5-demand", users, name, order, rate, service)))
            run = f"dwfs-{variant}-users=60"
            split = ctx.ratio((e, run, "sessions.classes.bronze.response_mean_s"),
                              (e, run, "sessions.classes.gold.response_mean_s"))
            found.append(ctx.row(e, f"DWFS {words}: bronze / gold mean response time, 60 clients",
                                 direction(DWFS_RESPONSE["bronze"][60] / DWFS_RESPONSE["gold"][60],
                                           "10.584 s / 6.968 s"),
                                 split, _model_split_why(ctx, "section5-demand", 60, split, order, service)))
        return found
    return rows


def _stage_order_note(ctx: Context) -> str:
    """`section5-model` in each of DWFS's orders within a stage, against Tables 3-5's rates."""
    model = _model(ctx)
    points = [(experiment, k, users, model[f"{experiment}/dwfs-users={users}"])
              for experiment, k, think in DEMAND_RUNS if think != "0"
              for users in (40, 50, 60) if "drop_rate_by_stage_order" in model.get(f"{experiment}/dwfs-users={users}", {})]
    if not points:
        return ""
    orders = list(points[0][3]["drop_rate_by_stage_order"])
    lines = ["### DWFS's order within a stage, in virtual time (`section5-model`)", "",
             "003 §5.2 gives the shorter timeout the higher priority (\"the shorter timeout a request is assigned, "
             "the higher is its priority and thus it gets quicker service\") without saying how a stage's queue is "
             "ordered. The same dispatcher in virtual time, as in the k table above, once in each order "
             "(`sojourn-engine stages --stage-order`): deadline, the earliest deadline first (the server's); class, "
             "the shortest timeout's class strictly first; arrival, the oldest first whatever its class. Drop rate "
             "gold / silver / bronze; the paper column repeats Tables 3-5 (the paper ran one cost) beside every k:", "",
             "| k | clients | paper | " + " | ".join(orders) + " |", "|---|---|---|" + "---|" * len(orders)]
    falling = dict.fromkeys(orders, 0)
    for experiment, k, users, point in points:
        paper = " / ".join(f"{DWFS_TIMEOUT_RATE[c][users]:.2%}" for c in DWFS_RESPONSE)
        cells = []
        for order in orders:
            rates = [point["drop_rate_by_stage_order"][order][c] for c in DWFS_RESPONSE]
            falling[order] += rates[0] > rates[1] > rates[2]
            cells.append(" / ".join(f"{r:.2%}" for r in rates))
        lines.append(f"| {k} | {users} | {paper} | " + " | ".join(cells) + " |")
    counts = "; ".join(f"{order}: {n} of {len(points)}" for order, n in falling.items())
    lines += ["", f"Points where the drops fall from gold to bronze, as the paper's do at every client count: {counts} "
              f"({points[0][3]['seeds']} seeds a point)."]
    split_points = [p for p in points if "response_mean_s_by_stage_order" in p[3]]
    if split_points:
        lines += ["", "Bronze / gold mean response of the requests served in time, in the same runs (the paper's "
                  "from Tables 3-5; ours on the testbed in the §5 tables above):", "",
                  "| k | clients | paper | " + " | ".join(orders) + " |", "|---|---|---|" + "---|" * len(orders)]
        for experiment, k, users, point in split_points:
            paper = DWFS_RESPONSE["bronze"][users] / DWFS_RESPONSE["gold"][users]
            lines.append(f"| {k} | {users} | {paper:.2f} | "
                         + " | ".join(f"{_model_split(point, order):.2f}" for order in orders) + " |")
    return "\n".join(lines + _sharing_note(points))


def _sharing_note(points: list) -> list[str]:
    """`section5-model` at 60 clients in deadline order with the CPU shared by threads, against
    one request at a time (the server's) and Tables 3-5."""
    users, order = 60, "deadline"
    shared = [(k, point) for _, k, at, point in points if at == users and "by_service" in point]
    if not shared:
        return []
    services = list(shared[0][1]["by_service"])
    paper = (f"{DWFS_TIMEOUT_RATE['gold'][users]:.2%} / {DWFS_TIMEOUT_RATE['bronze'][users]:.2%}, "
             f"{DWFS_RESPONSE['bronze'][users] / DWFS_RESPONSE['gold'][users]:.2f}")
    lines = ["", "### Sharing the CPU, in virtual time (`section5-model`)", "",
             "003 §5.1's DWFS module ran \"when the ready queue is empty\" and Apache's worker threads served the "
             "requests in it, the OS sharing the CPU among them; our server's one stage worker serves one request at a "
             "time. The same dispatcher at 60 clients in deadline order (the server's), one request at a time and with "
             "the CPU shared (`sojourn-engine stages --threads --ready-queue`): drops gold / bronze (the dispatcher's: "
             "refused, dropped early or expired), then the share finished past its bound gold / bronze, then bronze / "
             f"gold mean response (the paper's drops and split: {paper}):", "",
             "| k | " + " | ".join(_service_words(s, shared[0][1]) for s in services) + " |",
             "|---|" + "---|" * len(services)]
    for k, point in shared:
        cells = []
        for service in services:
            served = point["by_service"][service]
            rates, late = (served[key][order] for key in ("drop_rate_by_stage_order", "late_rate_by_stage_order"))
            cells.append(f"{rates['gold']:.2%} / {rates['bronze']:.2%}, late {late['gold']:.2%} / {late['bronze']:.2%}, "
                         f"{_model_split(point, order, service):.2f}")
        lines.append(f"| {k} | " + " | ".join(cells) + " |")
    return lines


# What the rows isolate and what they leave unexplained is argued in prose, with the
# figures of the runs it was written from, in docs/dwfs.md (not recomputed here).
DEMAND_CONCLUSION = ("What these rows isolate, and what they leave unexplained (the saturated loop without think "
                     "time), is discussed in docs/dwfs.md, \"003 §5's stage costs: normal-load latency or CPU "
                     "demand\".")


def _timeouts_note(ctx: Context, e: str) -> str:
    # The dispatcher's mean share of each stage, in series written since 28 Nov 2026 (DWFS
    # sizes its weights by queue length x cost / timeout, 003 §4.2).
    weights = {stage: _at_both(ctx, e, f"sessions.anatomy.{stage}.weight_mean") for stage in TABLE7}
    weighed = any(math.isfinite(w) for pair in weights.values() for w in pair)
    lines = [f"### Table 7 per stage (latency = queueing + processing, s), `{e}`", "",
             "| stage | paper 10 s | paper 20 s | ours timeout-10 | ours timeout-20 | mean queue length 10 / 20 |"
             + (" mean DWFS weight 10 / 20 |" if weighed else ""),
             "|---|---|---|---|---|---|" + ("---|" if weighed else "")]
    unserved, longer = [], []
    for stage, (ten, twenty) in TABLE7.items():
        latency = {run: summarize(list(_latency(ctx, e, run, stage).values())) for run in TIMEOUT_RUNS}
        queue = _at_both(ctx, e, f"sessions.queue_mean.{stage}")
        longer += [stage] if queue[1] > queue[0] else []
        queues = " / ".join(f"{q:.2f}" for q in queue)
        cells = " | ".join(f"{m.value:.3f}" if m.ok else "—" for m in latency.values())
        shares = " / ".join(f"{w:.3f}" for w in weights[stage])
        lines.append(f"| {stage} | {ten} | {twenty} | {cells} | {queues} |" + (f" {shares} |" if weighed else ""))
        unserved += [_unserved(ctx, e, run, stage) for run, m in latency.items() if not m.ok]
    lines += ["", (f"The longer timeout lengthened the mean queue of {', '.join(longer)} of the {len(TABLE7)} stages"
                   if longer else "The longer timeout lengthened no stage's mean queue")
              + " (Table 7 and Figs. 11-12: every stage's queue and latency grow)."]
    if unserved:
        lines[-1] += (" A stage with no latency (—) completed nothing: on one CPU its processing time is not below "
                      "the timeout, so DWFS drops every request of it before it runs (`now + T_j > deadline`), or its "
                      "waiting room floor(timeout / T_j) is empty: " + "; ".join(unserved) + ".")
    figures = [f"- [{caption}]({path})" for path, caption in ctx.figures(e) if "queue" in caption.lower()]
    return "\n".join(lines + ([""] + figures if figures else []))


def notes(ctx: Context) -> str:
    parts = []
    if ctx.has("productivity-study"):
        parts.append(_study_note(ctx))
    if ctx.has("section5"):
        parts.append(_section5_note(ctx))
    if ctx.has("section5-demand") or ctx.has("section5-demand20"):
        parts.append(_demand_note(ctx))
    if ctx.has("section5-model") and (order_note := _stage_order_note(ctx)):
        parts.append(order_note)
    parts += [_timeouts_note(ctx, e) for e in ("timeouts", "timeouts-demand") if ctx.has(e)]
    return "\n\n".join(parts)


PAPER = Paper(
    tag="003",
    title='Chen & Mohapatra, "Overload control in QoS-aware web servers"',
    experiments=EXPERIMENTS,
    claims=claims,
    notes=notes,
    intro="""
The productivity study simulates one CPU with four queues MM, CO, SR, BR (processing times 0.5,
1, 1.5, 2; timeout 20; 10,000 time units; the Fig. 5 transitions) through the same dispatcher
the server uses (crates/sched/src/dispatch.rs). The paper does not say how its study generated
sessions; ours come from closed-loop clients with no think time (15, 20 and 25 of them), so
absolute productivities differ from Table 2's and ratios are compared. §5 runs on the testbed:
sojourn's stage pool (one CPU worker, the §5.1 stage costs and §5.2 class timeouts scaled by
1/100 in time) behind `sojourn-engine serve --stages`, closed-loop session clients from
`sojourn-engine load sessions` split evenly over three classes by source address.
""",
)
