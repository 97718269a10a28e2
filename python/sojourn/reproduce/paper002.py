"""002: Nahum, Rosu, Seshan & Almeida, "The Effects of Wide-Area Conditions on WWW Server
Performance".

Experiments: capacity (the most requests/s over a sweep of user equivalents, 002 §4.4) vs
dependent and independent loss (Figs. 17-18) and vs delay (Figs. 19-20); response time with
and without SACK at 6% loss (Figs. 15-16).
"""

from __future__ import annotations

from sojourn.reproduce import Context, Entry, Paper, Row
from sojourn.runner.spec import run_name

SERVERS = ("sojourn", "nginx")

EXPERIMENTS = [
    Entry("loss", "capacity vs two-state loss 0-9% (Figs. 17-18)", spec="experiments/002/loss.toml"),
    Entry("loss-independent", "capacity vs independent loss (§3.4)", spec="experiments/002/loss-independent.toml"),
    Entry("delay", "capacity vs RTT 0-400 ms (Figs. 19-20)", spec="experiments/002/delay.toml"),
    Entry("sack", "SACK vs NewReno at 6% loss (Figs. 15-16)", spec="experiments/002/sack.toml"),
]



def _capacity_ratio(ctx: Context, entry: str, server: str, parameter: str, high, low, claim: str, paper: float,
                    text: str) -> Row:
    top, _, n = ctx.value(entry, run_name(server, parameter, high), "capacity_rps")
    base, _, m = ctx.value(entry, run_name(server, parameter, low), "capacity_rps")
    return Row(entry, claim, paper, top / base if base else float("nan"), min(n, m), ctx.result_path(entry),
               paper_text=text)


def claims(ctx: Context) -> list[Row]:
    rows: list[Row] = []
    if ctx.has("loss"):
        for server, paper, text in (("sojourn", 0.5, "Flash: -50% at high loss"),
                                    ("nginx", 0.5, "Flash -50%; Apache less severe")):
            rows.append(_capacity_ratio(ctx, "loss", server, "loss", 0.09, 0, f"{server}: capacity at 9% / at 0% loss",
                                        paper, text))
    if ctx.has("delay"):
        for server in SERVERS:
            rows.append(_capacity_ratio(ctx, "delay", server, "rtt_ms", 400, 0, f"{server}: capacity at 400 / at 0 ms RTT",
                                        0.95, "-5%, only at 400 ms"))
    if ctx.has("sack"):
        newreno, _, n = ctx.value("sack", "newreno", "response_mean")
        sack, ci, _ = ctx.value("sack", "sack", "response_mean")
        rows.append(Row("sack", "NewReno / SACK mean response time at 6% loss", 0.9 / 0.8, newreno / sack, n,
                        ctx.result_path("sack"), paper_text="SACK -20% and New Reno -10% vs Reno: 0.9 / 0.8 = 1.125"))
        a, _, n = ctx.value("sack", "newreno", "throughput_rps")
        b, _, _ = ctx.value("sack", "sack", "throughput_rps")
        rows.append(Row("sack", "NewReno / SACK completed requests per second (same load)", 0.8 / 0.9, a / b, n,
                        ctx.result_path("sack"), reference=None,
                        paper_text="throughput follows latency at a fixed load (Fig. 16)"))
    return rows


def differences(ctx: Context) -> str:
    """Which capacities are lower bounds (reached at the last level of users), and why."""
    items, unsaturated = [], []
    for entry in ("loss", "loss-independent", "delay"):
        if ctx.has(entry):
            unsaturated += [f"{entry} {rep.run} ({rep.summary['capacity_rps']:.0f} req/s at "
                            f"{rep.summary.get('capacity_users'):.0f} users)" for rep in ctx.reps(entry)
                            if rep.summary.get("capacity_at_last_level") and rep.summary.get("capacity_rps") is not None
                            and (rep.sweep_value or 0) > 0]
    if unsaturated:
        items.append("**Capacities with loss or delay are lower bounds here:** the most requests per second came at "
                     "the last level of users, and throughput was still rising: " + "; ".join(unsaturated) + ". "
                     "Each user has one request outstanding, so users / response time bounds the request rate, and "
                     "loss and delay lengthen response times (002 §3.6: \"very large numbers of concurrent requests "
                     "are necessary to exercise the server when delays and losses are introduced\"; the paper went "
                     "to 4096 users, the quick scale to 1024-2048). So the capacity ratios with loss and delay "
                     "measure the client population as much as the server.")
    items.append("**The machine, not only the server.** The clients, their emulated links and the server share two "
                 "cores here, so the loss-free capacity is the whole machine's; the paper's server had its own CPU.")
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
same two cores, which the capacity of either server includes. Linux has no pure Reno: without
SACK it runs NewReno.
""",
)
