"""004: Crovella, Frangioso & Harchol-Balter, "Connection scheduling in web servers".

Experiments: shortest-connection-first (SCF) vs size-independent scheduling of the server's
writes as user equivalents grow (Figs. 3-4), the effect of write concurrency (Figs. 5-6),
and the M/G/1 SRPT slowdown figures of §6 (Figs. 7-8, computed by `sojourn theory`).
"""

from __future__ import annotations

import pandas as pd

from sojourn.reproduce import Context, Entry, Paper, per_rep_quotient, quotient, rows_of
from sojourn.reproduce.beside import Panel, Printed, Series, draw
from sojourn.reproduce.rows import (Measure, Row, about_one, bound, direction, measured, missing, point, unexplained,
                                    within_2x)
from sojourn.runner.spec import run_name

VARIANTS = ("size-independent", "scf")


def _sweep(entry: str, metric: str, ctx: Context) -> dict:
    """Sweep value -> (size-independent / SCF of ``metric``, size-independent's, SCF's), Measures."""
    return ctx.sweep(entry, metric, variants=VARIANTS)


EXPERIMENTS = [
    Entry("apache", "apache2-prefork vs the size-independent server by file size (Fig. 2)",
          spec="experiments/004/apache.toml"),
    Entry("scf", "SCF vs size-independent vs user equivalents (Figs. 3-4)", spec="experiments/004/scf.toml",
          quick_s=420),
    Entry("write-concurrency", "write concurrency at 1400 users (Figs. 5-6)",
          spec="experiments/004/write-concurrency.toml", quick_s=420),
    Entry("fig7", "SRPT slowdown vs size percentile, exponential vs BP (Fig. 7)",
          command=("{python}", "-m", "sojourn.cli", "theory", "fig7", "--out", "{out}"), quick_s=5, exact=True),
    Entry("fig8", "SRPT slowdown vs size percentile, BP alpha 0.5-1.9 (Fig. 8)",
          command=("{python}", "-m", "sojourn.cli", "theory", "fig8", "--out", "{out}"), quick_s=5, exact=True),
]

# The paper's printed values: SCF's gain (§5.3: "a factor of 4 to 5" at 1400 UEs) and
# Fig. 7's (§6.2: the largest 5% under the exponential "5.6 or more", BP "no task size
# ... greater than 1.6").
SCF_GAIN = 4.5
FIG7_EXPONENTIAL, FIG7_TOP, FIG7_BP = 5.6, 0.95, 1.6
# §6.2: "for a Bounded Pareto distribution with alpha = 1.1, the largest 1% of all tasks
# account for more than half the total service demand ... for an exponential distribution
# with the same mean, the largest 1% of all tasks make up only 5%".
TAIL_BP, TAIL_EXPONENTIAL = 0.5, 0.05


def _figure_csv(ctx: Context, entry: str) -> pd.DataFrame:
    return pd.read_csv(ctx.directory(entry) / f"{entry}.csv")


def _computed(entry: str, value: float) -> Measure:
    """A value of an exact computation (one evaluation, no interval)."""
    return Measure(value, None, 1, ((entry, ""),))


def _fig7_why(fig7: pd.DataFrame):
    """Where the paper's 5.6 sits on the exact curve (read from the published CSV)."""
    at = fig7.set_index("percentile")["exponential"]
    reached = at[at >= FIG7_EXPONENTIAL]
    if reached.empty:
        return None
    return measured(f"the M/G/1 SRPT formula evaluated exactly (fig7.csv) gives {at[at.index >= FIG7_TOP].iloc[0]:.2f} "
                    f"at the {FIG7_TOP * 100:.0f}th percentile and first reaches {FIG7_EXPONENTIAL:g} at the "
                    f"{reached.index[0] * 100:.0f}th ({reached.iloc[0]:.2f}): the paper's value is read off its plot")


def _scf_rows(ctx: Context) -> list[Row]:
    e = "scf"
    ratios = _sweep(e, "response_mean", ctx)
    rows = []
    if 1000 in ratios:
        rows.append(ctx.row(e, "size-independent / SCF mean response time, 1000 users",
                            about_one("no difference below 1000 UEs"), ratios[1000][0]))
    if 1400 in ratios:
        rows.append(ctx.row(e, "size-independent / SCF mean response time, 1400 users",
                            direction(SCF_GAIN, "a factor of 4 to 5 at 1400 UEs"), ratios[1400][0],
                            _concurrency_why(ctx, _run_of(ctx, e, "scf", 1400))))
    # Fig. 4 goes to 1400 UEs; the published sweep's points beyond it get the same row.
    for users in sorted(u for u in ratios if u >= 1400):
        top, bottom = (_run_of(ctx, e, v, users) for v in ("scf", "size-independent"))
        rows.append(ctx.row(e, f"SCF / size-independent mean of the largest 1%, {users} users",
                            bound("<=", 1, text="large jobs are not penalized (Fig. 4)", digits=2),
                            ctx.ratio((e, top, "response_largest_1pct_mean"), (e, bottom, "response_largest_1pct_mean"))))
    return rows


def _concurrency_why(ctx: Context, run: str):
    """SCF's gain at 1400 users depends on how many responses the server lets write at once:
    measured when `write-concurrency` (at the same users) reaches the paper's factor (within
    2x) with fewer writes than the `scf` runs allowed, and stays short of it at theirs with the
    two intervals apart (004 Fig. 5: the gain grows as the network threads decline)."""
    e = "write-concurrency"
    used = ctx.config("scf", run, "server.write_concurrency")
    if not ctx.has(e) or ctx.config(e, _run_of(ctx, e, "scf", used), "workload.users") != \
            ctx.config("scf", run, "workload.users"):
        return None
    gains = {wc: parts[0] for wc, parts in _sweep(e, "response_mean", ctx).items()}
    if used not in gains:
        return None
    fewer = [wc for wc in sorted(gains) if wc < used and within_2x(gains[wc].value / SCF_GAIN)]
    at_used = gains[used]
    if not fewer or within_2x(at_used.value / SCF_GAIN):
        return None
    most = fewer[-1]
    reached = gains[most]
    if reached.ci and at_used.ci and reached.ci[0] <= at_used.ci[1]:
        return None
    return measured(f"the `scf` runs let {used} responses write at once (run.json server.write_concurrency); at the "
                    f"same users `write-concurrency` measured size-independent / SCF {at_used.value:.2f} at {used} "
                    f"and {reached.value:.2f} at {most}: with more writes at once what waits is in the kernel, in "
                    "its order, not the server's, and the paper's factor needs fewer of them here")


def _run_of(ctx: Context, entry: str, variant: str, value) -> str:
    key = {"apache": "users", "scf": "users", "write-concurrency": "write_concurrency"}[entry]
    return run_name(variant, key, value)


def _write_concurrency_rows(ctx: Context) -> list[Row]:
    e = "write-concurrency"
    points = sorted(_sweep(e, "response_mean", ctx))
    if not points:
        return []
    fewest, most = points[0], points[-1]

    def gain(point) -> dict[int, float]:
        return per_rep_quotient(*(ctx.per_rep(e, _run_of(ctx, e, v, point), "response_mean") for v in VARIANTS))

    runs = tuple((e, _run_of(ctx, e, v, p)) for v in VARIANTS for p in (fewest, most))
    return [
        ctx.row(e, f"size-independent / SCF at write concurrency {fewest} over that at {most}",
                bound(">", 1, text="the gain shrinks as threads grow"), quotient(gain(fewest), gain(most), runs)),
        ctx.row(e, f"size-independent / SCF at write concurrency {most}", about_one("no effect at about 60 threads"),
                _sweep(e, "response_mean", ctx)[most][0]),
        # Fig. 6: bytes of completed responses per second against the network threads.
        *(ctx.row(e, f"{variant}: byte throughput at write concurrency {most} / at {fewest} (Fig. 6)",
                  bound(">", 1, text="throughput increases roughly linearly with additional network threads"),
                  ctx.ratio((e, _run_of(ctx, e, variant, most), "throughput_bps"),
                            (e, _run_of(ctx, e, variant, fewest), "throughput_bps")),
                  _link_bound_why(ctx, {variant: _run_of(ctx, e, variant, fewest)}, fewest, "more slots could add"))
          for variant in VARIANTS),
        ctx.row(e, f"SCF / size-independent byte throughput at write concurrency {fewest} (Fig. 6)",
                bound(">", 1, text="shortest-connection-first has slightly higher throughput"),
                ctx.ratio((e, _run_of(ctx, e, "scf", fewest), "throughput_bps"),
                          (e, _run_of(ctx, e, "size-independent", fewest), "throughput_bps")),
                _link_bound_why(ctx, {v: _run_of(ctx, e, v, fewest) for v in VARIANTS}, fewest,
                                "either order could add")),
    ]


# A link busy this share of the run can carry at most 1/share more bytes.
LINK_BUSY = 0.97


def _link_bound_why(ctx: Context, runs: dict[str, str], slots: int, could: str):
    """Fig. 6's throughput grew with the threads of a server at 100 Mbit/s; here the uplink
    is 10 Mbit/s, and when it was already busy with the fewest write slots (each of ``runs``,
    policy -> run), more slots or another order can only add what it had left
    (summary.json's link_utilization)."""
    busy = {policy: ctx.mean("write-concurrency", run, "link_utilization") for policy, run in runs.items()}
    if any(missing(share) or share < LINK_BUSY for share in busy.values()):
        return None
    shares = " and ".join(f"{share:.1%}" + (f" ({policy})" if len(busy) > 1 else "") for policy, share in busy.items())
    return measured(f"the uplink was busy {shares} of the run already at write concurrency {slots} "
                    f"(link_utilization): {could} at most {1 / min(busy.values()) - 1:.1%}, so the link, not the "
                    "server's writes, bounded the throughput")


def _fig7_rows(ctx: Context) -> list[Row]:
    fig7 = _figure_csv(ctx, "fig7")
    top = fig7[fig7["percentile"] >= FIG7_TOP]
    return [
        ctx.row("fig7", f"exponential: least mean slowdown of the largest {1 - FIG7_TOP:.0%} (rho 0.9)",
                bound(">=", FIG7_EXPONENTIAL, text="the largest 5% all 5.6 or more"),
                _computed("fig7", float(top["exponential"].min())), _fig7_why(fig7)),
        ctx.row("fig7", "bounded Pareto alpha 1.1: most mean slowdown over the computed percentiles",
                bound("<=", FIG7_BP, text="no task size above 1.6"),
                _computed("fig7", float(fig7["bounded_pareto_1.1"].max())),
                note=f"computed up to the {fig7['percentile'].max() * 100:.0f}th percentile (fig7.csv)"),
        *_tail_share_rows(ctx),
    ]


def _tail_share_rows(ctx: Context) -> list[Row]:
    """§6.2's reason large jobs do not suffer: the share of all work in the largest 1%
    (tail-share.csv, written by the fig7 command)."""
    path = ctx.directory("fig7") / "tail-share.csv"
    if not path.is_file():
        return []
    share = pd.read_csv(path).set_index(["distribution", "largest"])["work_share"]
    return [
        ctx.row("fig7", "bounded Pareto alpha 1.1: share of all work in the largest 1% of jobs (§6.2)",
                bound(">", TAIL_BP, text="more than half the total service demand"),
                _computed("fig7", float(share[("bounded_pareto_1.1", 0.01)]))),
        ctx.row("fig7", "exponential, same mean: share of all work in the largest 1% of jobs (§6.2)",
                point(TAIL_EXPONENTIAL, "only 5%"), _computed("fig7", float(share[("exponential", 0.01)]))),
    ]


def _fig8_rows(ctx: Context) -> list[Row]:
    fig8 = _figure_csv(ctx, "fig8")
    last = fig8.iloc[-1]
    rows = [ctx.row("fig8", f"alpha {alpha}: most mean slowdown over the computed percentiles",
                    about_one("so close to 1 as to be invisible"),
                    _computed("fig8", float(fig8[f"alpha_{alpha}"].max()))) for alpha in ("0.5", "0.7")]
    rows.append(ctx.row("fig8", f"alpha 1.9 / alpha 0.7 slowdown at the {last['percentile'] * 100:.0f}th percentile",
                        bound(">", 1, text="high slowdowns only as alpha nears 2"),
                        _computed("fig8", float(last["alpha_1.9"] / last["alpha_0.7"]))))
    return rows


# The size-independent server's write slots counted as a bottleneck when all were held by
# blocked responses for this share of the run, and as idle below the second share.
SLOTS_BUSY, SLOTS_IDLE = 0.25, 0.05
# Two servers' handshakes (or waits for a first byte) are alike within this share.
ALIKE = 0.25


def _apache_small_why(ctx: Context, apache: str, fair: str, ours: Measure):
    """Where a short response's time went in each server, from summary.json: the handshake
    (connect_mean), then request sent to first byte (ttfb_mean less connect_mean: the wait at
    the server and one round trip), beside how long the size-independent server had all its
    write slots held by blocked responses (server_slots_full_s)."""
    e = "apache"
    handshake = {run: ctx.mean(e, run, "connect_mean") for run in (apache, fair)}
    wait = {run: ctx.mean(e, run, "ttfb_mean") - handshake[run] for run in (apache, fair)}
    full = ctx.mean(e, fair, "server_slots_full_s") / ctx.mean(e, fair, "duration_s")
    slots = ctx.config(e, fair, "server.write_concurrency")
    if any(missing(v) for v in (*handshake.values(), *wait.values(), full)):
        return None
    where = (f"handshake {handshake[apache] * 1e3:.3g} ms against {handshake[fair] * 1e3:.3g}, request to first byte "
             f"{wait[apache] * 1e3:.3g} ms against {wait[fair] * 1e3:.3g} (Apache against size-independent, "
             f"connect_mean and ttfb_mean, all sizes); the size-independent server's {slots} write slots were all held "
             f"by blocked responses {full:.1%} of the run (server_slots_full_s)")
    if full >= SLOTS_BUSY and wait[fair] > wait[apache] and handshake[apache] >= handshake[fair]:
        isolated = _more_slots(ctx, apache, fair)
        if isolated and isolated[0]:
            return unexplained(f"{where}; but {isolated[1]}, so the slots are not the whole reason")
        return measured(f"{where}: a short response waited at our server for a write slot behind long ones, while "
                        "Apache's short requests waited instead to be accepted by one of its processes, which then all "
                        f"write at once{f'; {isolated[1]}' if isolated else ''}")
    alike = all(abs(part[apache] / part[fair] - 1) <= ALIKE for part in (handshake, wait))
    if full < SLOTS_IDLE and alike and ours.ci and min(ours.ci) <= 1 <= max(ours.ci):
        return measured(f"{where}: neither server queued short responses, and 1 is inside the 90% interval; the "
                        "mean's side of 1 is noise")
    return None


def _more_slots(ctx: Context, apache: str, fair: str):
    """The one factor isolated, where `write-concurrency` ran at the same users: the
    size-independent server with its most write slots, its short responses' mean against
    Apache's here: (whether ours were the slower, the sentence), None without that run."""
    e = "write-concurrency"
    if not ctx.has(e):
        return None
    most = max(ctx.sweep_values(e))
    run = _run_of(ctx, e, "size-independent", most)
    if ctx.config(e, run, "workload.users") != ctx.config("apache", fair, "workload.users"):
        return None
    ours, theirs = ctx.mean(e, run, "response_mean_small"), ctx.mean("apache", apache, "response_mean_small")
    if missing(ours) or missing(theirs):
        return None
    return ours > theirs, (f"with {most} write slots at the same users (`write-concurrency`) the size-independent "
                          f"server's short responses averaged {ours:.3g} s, against Apache's {theirs:.3g} s")


def _apache_rows(ctx: Context) -> list[Row]:
    """Fig. 2: Apache treats short connections the same as the size-independent server or
    worse, long ones the same or better (summary.json splits at 10 KiB)."""
    e = "apache"
    rows = []
    for users in (1000, 1400, 1800):
        apache, fair = _run_of(ctx, e, "apache", users), _run_of(ctx, e, "size-independent", users)
        small = ctx.ratio((e, apache, "response_mean_small"), (e, fair, "response_mean_small"))
        rows.append(ctx.row(e, f"Apache / size-independent mean response below 10 KiB, {users} users",
                            bound(">=", 1, text="the same or worse", digits=2), small,
                            _apache_small_why(ctx, apache, fair, small)))
        rows.append(ctx.row(e, f"Apache / size-independent mean response from 10 KiB, {users} users",
                            bound("<=", 1, text="the same or better", digits=2),
                            ctx.ratio((e, apache, "response_mean_large"), (e, fair, "response_mean_large"))))
    return rows


def claims(ctx: Context) -> list[Row]:
    return rows_of(ctx, {"apache": _apache_rows, "scf": _scf_rows, "write-concurrency": _write_concurrency_rows, "fig7": _fig7_rows,
                         "fig8": _fig8_rows})


def figures(ctx: Context, out) -> list[tuple[str, str]]:
    if not ctx.has("fig7"):
        return []
    fig7 = _figure_csv(ctx, "fig7")
    series = [Series(f"ours, {label} (exact)", {p: _computed("fig7", v) for p, v in zip(fig7["percentile"], fig7[col])},
                     color) for col, label, color in (("exponential", "exponential", "C3"),
                                                      ("bounded_pareto_1.1", "BP alpha 1.1", "C0"))]
    last = float(fig7["percentile"].max())
    panel = Panel("Fig. 7: mean slowdown under SRPT, rho 0.9", "percentile of the task size", "mean slowdown",
                  series=series,
                  printed=[Printed(f"paper: exponential >= {FIG7_EXPONENTIAL:g} for the largest 5%", FIG7_TOP,
                                   FIG7_EXPONENTIAL, ">=", last, "C3"),
                           Printed(f"paper: BP no size above {FIG7_BP:g}", float(fig7["percentile"].min()), FIG7_BP,
                                   "<=", last, "C0")])
    draw([panel], out / "fig7.png", columns=1)
    return [("fig7.png", "Fig. 7: the exact M/G/1 SRPT slowdown curves (fig7.csv) with the values the paper prints "
             "(dashed)")]


def differences(ctx: Context) -> str:
    """Where ours differs and what measured it; numbers from the published results."""
    items = []
    if ctx.has("scf"):
        ratios = _sweep("scf", "response_mean", ctx)
        utilization = _sweep("scf", "link_utilization", ctx)
        text = ", ".join(f"{users} users {parts[0].value:.2f} (link busy {utilization[users][1].value:.0%} / "
                         f"{utilization[users][2].value:.0%})" for users, parts in sorted(ratios.items())
                         if users in utilization)
        items.append(f"**SCF's gain by load.** size-independent / SCF mean response time, with the uplink's "
                     f"utilization under size-independent / SCF: {text} (paper: none below 1000 UEs, 4-5x at 1400).")
    if ctx.has("write-concurrency"):
        ratios = _sweep("write-concurrency", "response_mean", ctx)
        rps = _sweep("write-concurrency", "throughput_rps", ctx)
        text = "; ".join(f"write concurrency {wc}: {ratio.value:.2f} (SCF {scf.value:.3g} s, size-independent "
                         f"{fair.value:.3g} s; SCF {rps[wc][2].value:.0f} req/s vs {rps[wc][1].value:.0f})"
                         for wc, (ratio, fair, scf) in sorted(ratios.items()) if wc in rps)
        items.append(f"**Why the order reaches the wire only with few concurrent writes (004 §5.4).** At 1400 users: "
                     f"{text}. With more than one response allowed unsent data in the kernel, what waits is "
                     "in the socket buffers and the uplink's FIFO, whose order the server does not choose; "
                     "the paper saw the same trend (the difference grows as threads decline and vanishes near 60 "
                     "threads).")
    if not items:
        return ""
    return "### Where ours differs from the paper, and why\n\n" + "\n\n".join(f"- {item}" for item in items)


def notes(ctx: Context) -> str:
    parts = [differences(ctx)]
    for entry, label in (("scf", "users"), ("write-concurrency", "write concurrency")):
        if not ctx.has(entry):
            continue
        means, throughput = _sweep(entry, "response_mean", ctx), _sweep(entry, "throughput_rps", ctx)
        lines = [f"### `{entry}` per point", "", f"| {label} | size-independent mean (s) | SCF mean (s) | ratio | "
                 "size-independent req/s | SCF req/s |", "|---|---|---|---|---|---|"]
        for at in sorted(means):
            cells = [m.value for m in means[at] + throughput.get(at, (Measure(),) * 3)[1:]]
            ratio, fair, scf, fair_rps, scf_rps = cells
            lines.append(f"| {at} | {fair:.3g} | {scf:.3g} | {ratio:.3g} | {fair_rps:.3g} | {scf_rps:.3g} |")
        parts.append("\n".join(lines))
    return "\n\n".join(parts)


PAPER = Paper(
    tag="004",
    title='Crovella, Frangioso & Harchol-Balter, "Connection scheduling in web servers"',
    experiments=EXPERIMENTS,
    claims=claims,
    notes=notes,
    figures=figures,
    intro="""
Size-independent scheduling is sojourn's FAIR policy (round robin of write quanta); SCF is its
SRPT policy (fewest bytes left first, 004 §3.2). Both limit write concurrency to 8 with
TCP_NOTSENT_LOWAT 16 KiB so the server's order reaches the wire, over a 10 Mbit/s uplink with a
100-packet queue; closed user equivalents with exponential idle time (mean 9 s) request a
2000-object SURGE catalogue (004 Table 1) as often as it is popular. The paper's 100 Mbit/s
network is scaled to 10 Mbit/s at the same user counts. Figs. 7-8 are the M/G/1 SRPT formulas.
""",
)
