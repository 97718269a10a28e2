"""002: Nahum, Rosu, Seshan & Almeida, "The Effects of Wide-Area Conditions on WWW Server
Performance".

Experiments: capacity (the most requests/s over a sweep of user equivalents, 002 §4.4) vs
dependent and independent loss (Figs. 17-18) and vs delay (Figs. 19-20); response time with
and without SACK at 6% loss (Figs. 15-16).
"""

from __future__ import annotations

from scipy import stats

from sojourn.reproduce import Context, Entry, Paper, rows_of
from sojourn.reproduce.rows import Claim, Measure, Row, bound, direction, measured
from sojourn.runner.spec import run_name

SERVERS = ("sojourn", "nginx")

EXPERIMENTS = [
    Entry("loss", "capacity vs two-state loss (Figs. 17-18)", spec="experiments/002/loss.toml"),
    Entry("loss-independent", "capacity vs independent loss (§3.4)", spec="experiments/002/loss-independent.toml"),
    Entry("delay", "capacity vs RTT (Figs. 19-20)", spec="experiments/002/delay.toml"),
    Entry("sack", "SACK vs NewReno at 6% loss (Figs. 15-16)", spec="experiments/002/sack.toml"),
    Entry("normality", "36 repetitions of one point against a normal distribution (Figs. 6-7)",
          spec="experiments/002/normality.toml"),
]
# §3.5: normality is judged on this many samples at least (the paper's 36; 8 at quick scale).
NORMALITY_SAMPLES = 8

# The paper's printed values: capacity at high loss (Fig. 17, Flash: "reduced by up to 50
# percent"), at 400 ms (§4.4: "reduced only 5 percent"), response time at 6% loss (Fig. 15:
# SACK 20% and New Reno 10% under Reno's).
LOSS_CAPACITY, DELAY_CAPACITY = 0.5, 0.95
NEWRENO, SACK = 0.9, 0.8


def _last_level(ctx: Context, entry: str, runs: tuple[str, ...]) -> list[str]:
    """The runs whose most requests per second came at the last level of users."""
    return [run for run in runs if ctx.mean(entry, run, "capacity_at_last_level") == 1]


def _capacity_row(ctx: Context, entry: str, server: str, parameter: str, high, low, claim: str,
                  paper: Claim) -> Row:
    top, base = run_name(server, parameter, high), run_name(server, parameter, low)
    capped = _last_level(ctx, entry, (top, base))
    why = measured(f"the capacity of {' and '.join(capped)} came at the last level of users "
                   "(capacity_at_last_level in summary.json): a lower bound, so the ratio is not the servers'"
                   ) if capped else None
    return ctx.row(entry, claim, paper, ctx.ratio((entry, top, "capacity_rps"), (entry, base, "capacity_rps")), why)


def _loss_rows(ctx: Context) -> list[Row]:
    return [
        _capacity_row(ctx, "loss", "sojourn", "loss", 0.09, 0, "sojourn: capacity at 9% / at 0% loss",
                      direction(LOSS_CAPACITY, "Flash: reduced by up to 50% at high loss")),
        _capacity_row(ctx, "loss", "nginx", "loss", 0.09, 0, "nginx: capacity at 9% / at 0% loss",
                      bound("<", 1, text="Apache: a noticeable reduction, less severe than Flash's")),
    ]


def _independent_loss_rows(ctx: Context) -> list[Row]:
    """§4: "similar trends and behavior using ... the independent loss model": capacity falls
    with independent loss as with dependent loss."""
    entry = "loss-independent"
    losses = sorted(ctx.sweep_values(entry))
    low, high = losses[0], losses[-1]
    return [_capacity_row(ctx, entry, server, "loss", high, low,
                          f"{server}: capacity at {high:.0%} / at {low:.0%} independent loss",
                          bound("<", 1, text="similar trends with independent loss: capacity falls as loss grows"))
            for server in SERVERS]


def _delay_rows(ctx: Context) -> list[Row]:
    return [_capacity_row(ctx, "delay", server, "rtt_ms", 400, 0, f"{server}: capacity at 400 / at 0 ms RTT",
                          direction(DELAY_CAPACITY, "reduced only 5%, and only at 400 ms")) for server in SERVERS]


def _sack_rows(ctx: Context) -> list[Row]:
    return [
        ctx.row("sack", "NewReno / SACK mean response time at 6% loss",
                direction(NEWRENO / SACK, "SACK 20% and New Reno 10% below Reno: 0.9 / 0.8"),
                ctx.ratio(("sack", "newreno", "response_mean"), ("sack", "sack", "response_mean"))),
        ctx.row("sack", "NewReno / SACK completed requests per second at the same load",
                bound("<", 1, text="SACK has the highest observed throughput at a given load (Fig. 16)"),
                ctx.ratio(("sack", "newreno", "throughput_rps"), ("sack", "sack", "throughput_rps"))),
    ]


def _normality_rows(ctx: Context) -> list[Row]:
    """§3.5, Figs. 6-7: the repetitions of one point against a normal distribution of their
    mean and deviation: Shapiro-Wilk's p-value (the CDF's fit) and the correlation of the
    probability plot (Fig. 7's "points close to a 45-degree line")."""
    e, run = "normality", run_name("sojourn", "rtt_ms", 100)
    samples = list(ctx.per_rep(e, run, "capacity_rps").values())

    def computed(statistic) -> Measure:
        if len(samples) < NORMALITY_SAMPLES:
            return Measure(absent=f"{len(samples)} repetitions of {run}; at least {NORMALITY_SAMPLES} are needed")
        return Measure(float(statistic(samples)), None, len(samples), ((e, run),))
    return [
        ctx.row(e, "requests/s of the repetitions: Shapiro-Wilk p-value against normality (Fig. 6)",
                bound(">", 0.05, text="the normal distribution is a very tight fit"),
                computed(lambda x: stats.shapiro(x).pvalue)),
        ctx.row(e, "requests/s of the repetitions: correlation of the normal probability plot (Fig. 7)",
                bound(">=", 0.95, text="the points lie close to a 45-degree line"),
                computed(lambda x: stats.probplot(x)[1][2])),
    ]


def claims(ctx: Context) -> list[Row]:
    return rows_of(ctx, {"loss": _loss_rows, "loss-independent": _independent_loss_rows, "delay": _delay_rows,
                         "sack": _sack_rows, "normality": _normality_rows})


def differences(ctx: Context) -> str:
    """Which capacities are lower bounds (reached at the last level of users), and why."""
    items, capped = [], []
    for entry in ("loss", "loss-independent", "delay"):
        if ctx.has(entry):
            capped += [f"{entry} {rep.run} ({rep.summary['capacity_rps']:.0f} req/s at "
                       f"{rep.summary.get('capacity_users'):.0f} users)" for rep in ctx.reps(entry)
                       if rep.summary.get("capacity_at_last_level") and rep.summary.get("capacity_rps") is not None]
    if capped:
        items.append("**Capacities that are lower bounds here:** the most requests per second came at the last "
                     "level of users, so throughput might still have risen with more: " + "; ".join(capped) + ". "
                     "Each user has one request outstanding, so users / response time bounds the request rate, and "
                     "loss and delay lengthen response times (002 §3.6: \"very large numbers of concurrent requests "
                     "are necessary to exercise the server when delays and losses are introduced\"). A ratio of two "
                     "lower bounds measures the client population as much as the server.")
    quotas = sorted({rep.summary["server_cpu"]["cpus"] for entry in ("loss", "loss-independent", "delay")
                     if ctx.has(entry) for rep in ctx.reps(entry) if rep.summary.get("server_cpu")})
    if quotas:
        items.append(f"**The server's share of the machine.** The server under test ran with "
                     f"{' or '.join(f'{q:g}' for q in quotas)} CPU (server.cpu_quota, a cgroup of its processes), so "
                     "it and not the clients sharing its two cores was the bottleneck, as the paper's CPU-bound server "
                     "beside eight client machines was; each summary's server_cpu says how often it was throttled.")
    else:
        items.append("**The machine, not only the server.** The clients, their emulated links and the server share "
                     "two cores here and these results ran without a CPU quota for the server, so the loss-free "
                     "capacity is the whole machine's; the paper's server had its own CPU (the specs now give the "
                     "server half a CPU, server.cpu_quota, for the next run).")
    return "### Where ours differs from the paper, and why\n\n" + "\n\n".join(f"- {item}" for item in items)


def notes(ctx: Context) -> str:
    parts = [differences(ctx)]
    for entry, parameter in (("loss", "loss"), ("loss-independent", "loss"), ("delay", "rtt_ms")):
        if not ctx.has(entry):
            continue
        lines = [f"### Capacity per point (`{entry}`)", "", f"| run | capacity (req/s) | at users | last level? |",
                 "|---|---|---|---|"]
        for rep in ctx.reps(entry):
            summary = rep.summary
            if summary.get("capacity_rps") is not None:
                lines.append(f"| {rep.run} (rep {rep.rep}) | {summary['capacity_rps']:.0f} | {summary.get('capacity_users')} | "
                             f"{'yes' if summary.get('capacity_at_last_level') else 'no'} |")
        parts.append("\n".join(lines))
    return "\n\n".join(parts)


PAPER = Paper(
    tag="002",
    title='Nahum, Rosu, Seshan & Almeida, "The Effects of Wide-Area Conditions on WWW Server Performance"',
    experiments=EXPERIMENTS,
    claims=claims,
    notes=notes,
    intro="""
Capacity is measured as 002 §4.4 defines it: the server is loaded by user equivalents without
think time at increasing counts, one level after the other on the same server, and its capacity
is the most requests per second sustained at any level (after a warm-up). WAN conditions come
from sojourn's emulator on the clients' side (two-state loss with 35% conditional loss, 002 §3.4
Table 1; or independent loss); the uplink is 1 Gbit/s so the server, not the link, limits. The
paper's server ran alone on its machine; here the clients and their emulated links share the
same two cores, so the capacity specs give the server under test half a CPU (server.cpu_quota)
to keep it the bottleneck (the notes below say what each published run had). Linux has no pure
Reno: without SACK it runs NewReno.
""",
)
