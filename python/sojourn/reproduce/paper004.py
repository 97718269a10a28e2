"""004: Crovella, Frangioso & Harchol-Balter, "Connection scheduling in web servers".

Experiments: shortest-connection-first (SCF) vs size-independent scheduling of the server's
writes as user equivalents grow (Figs. 3-4), the effect of write concurrency (Figs. 5-6),
and the M/G/1 SRPT slowdown figures of §6 (Figs. 7-8, computed by `sojourn theory`).
"""

from __future__ import annotations

import math

import pandas as pd

from sojourn.reproduce import Context, Entry, Paper, Row


def _sweep(entry: str, metric: str, ctx: Context) -> dict:
    """Sweep value -> (size-independent / SCF of ``metric``, size-independent's, SCF's, reps)."""
    return ctx.sweep_ratios(entry, metric, variants=("size-independent", "scf"))


EXPERIMENTS = [
    Entry("scf", "SCF vs size-independent vs user equivalents (Figs. 3-4)", spec="experiments/004/scf.toml",
          quick_s=420),
    Entry("write-concurrency", "write concurrency at 1400 users (Figs. 5-6)",
          spec="experiments/004/write-concurrency.toml", quick_s=420),
    Entry("fig7", "SRPT slowdown vs size percentile, exponential vs BP (Fig. 7)",
          command=("{python}", "-m", "sojourn.cli", "theory", "fig7", "--out", "{out}"), quick_s=5),
    Entry("fig8", "SRPT slowdown vs size percentile, BP alpha 0.5-1.9 (Fig. 8)",
          command=("{python}", "-m", "sojourn.cli", "theory", "fig8", "--out", "{out}"), quick_s=5),
]


def _fig7_note(fig7: pd.DataFrame) -> str:
    """Where the paper's 5.6 sits on the exact curve (read from the published CSV)."""
    at = fig7.set_index("percentile")["exponential"]
    p96 = at[at.index >= 0.96].iloc[0]
    return (f"the M/G/1 SRPT formula evaluated exactly (sojourn.theory.formulas) gives {at[at.index >= 0.95].iloc[0]:.2f} "
            f"at the 95th and {p96:.2f} at the 96th percentile: the paper's 5.6 is the curve's value one percentile "
            "further on, as read off its plot")


def _figure_csv(ctx: Context, entry: str) -> pd.DataFrame:
    return pd.read_csv(ctx.directory(entry) / f"{entry}.csv")


def claims(ctx: Context) -> list[Row]:
    rows: list[Row] = []
    if ctx.has("scf"):
        ratios = _sweep("scf", "response_mean", ctx)
        largest = _sweep("scf", "response_largest_1pct_mean", ctx)
        for users, paper, text in ((1000, 1.0, "no difference below 1000 UEs"), (1400, 4.5, "4-5x at 1400 UEs")):
            if users in ratios:
                rows.append(Row("scf", f"size-independent / SCF mean response time, {users} users", paper,
                                ratios[users][0], ratios[users][3], ctx.result_path("scf"), paper_text=text,
                                reference=None if users == 1000 else 1.0))
        if 1400 in largest:
            rows.append(Row("scf", "SCF / size-independent largest 1% mean, 1400 users (large jobs not worse)", 1.0,
                            1 / largest[1400][0] if largest[1400][0] else math.nan, largest[1400][3],
                            ctx.result_path("scf"), bound="<=", reference=None, paper_text="<= 1 (Fig. 4 middle)"))
    if ctx.has("write-concurrency"):
        ratios = _sweep("write-concurrency", "response_mean", ctx)
        if ratios:
            fewest, most = min(ratios), max(ratios)
            rows += [
                Row("write-concurrency", f"size-independent / SCF at write concurrency {fewest} over that at {most}",
                    1.0, ratios[fewest][0] / ratios[most][0], min(ratios[fewest][3], ratios[most][3]),
                    ctx.result_path("write-concurrency"), bound=">=", reference=None,
                    paper_text="> 1: the gain shrinks as threads grow"),
                Row("write-concurrency", f"size-independent / SCF at write concurrency {most}", 1.0,
                    ratios[most][0], ratios[most][3], ctx.result_path("write-concurrency"), reference=None,
                    paper_text="1: no effect at ~60 threads"),
            ]
    if ctx.has("fig7"):
        fig7 = _figure_csv(ctx, "fig7")
        top = fig7[fig7["percentile"] >= 0.95]
        to_p99 = fig7[fig7["percentile"] <= 0.99]
        rows += [
            Row("fig7", "exponential: least mean slowdown of the largest 5% (rho 0.9)", 5.6,
                float(top["exponential"].min()), 1, ctx.result_path("fig7"), reference=None,
                paper_text=">= 5.6", note=_fig7_note(fig7)),
            Row("fig7", "bounded Pareto alpha 1.1: most mean slowdown up to the 99th percentile", 1.6,
                float(to_p99["bounded_pareto_1.1"].max()), 1, ctx.result_path("fig7"), reference=None,
                paper_text="no task size above 1.6"),
        ]
    if ctx.has("fig8"):
        fig8 = _figure_csv(ctx, "fig8")
        at = fig8[fig8["percentile"] <= 0.99]
        rows += [
            Row("fig8", "alpha 0.7: most mean slowdown up to the 99th percentile", 1.0, float(at["alpha_0.7"].max()), 1,
                ctx.result_path("fig8"), reference=None, paper_text="~1 (invisible on the plot)"),
            Row("fig8", "alpha 1.9 / alpha 0.7 slowdown at the 99th percentile", 2.0,
                float(at["alpha_1.9"].iloc[-1] / at["alpha_0.7"].iloc[-1]), 1, ctx.result_path("fig8"),
                bound=">=", reference=None, paper_text="large only as alpha nears 2"),
        ]
    return rows


def differences(ctx: Context) -> str:
    """Where ours differs and what measured it; numbers from the published results."""
    items = []
    if ctx.has("scf"):
        ratios = _sweep("scf", "response_mean", ctx)
        text = ", ".join(f"{users} users {ratio:.2f}" for users, (ratio, *_rest) in sorted(ratios.items()))
        items.append(f"**SCF's gain by load.** size-independent / SCF mean response time: {text} (paper: none "
                     "below 1000 UEs, 4-5x at 1400). Here the 10 Mbit/s link saturates between 1000 and 1400 "
                     "users, so 1400 is just past saturation rather than the paper's moderate load.")
    if ctx.has("write-concurrency"):
        ratios = _sweep("write-concurrency", "response_mean", ctx)
        rps = _sweep("write-concurrency", "throughput_rps", ctx)
        text = "; ".join(f"write concurrency {wc}: {ratio:.2f} (SCF {scf:.3g} s, size-independent {fair:.3g} s; "
                         f"SCF {rps[wc][2]:.0f} req/s vs {rps[wc][1]:.0f})"
                         for wc, (ratio, fair, scf, _) in sorted(ratios.items()) if wc in rps)
        items.append(f"**Why the order reaches the wire only with few concurrent writes (004 §5.4).** At 1400 users: "
                     f"{text}. With more than one response allowed unsent data in the kernel, what waits is "
                     "in the socket buffers and the uplink's FIFO, whose order the server does not choose; "
                     "the paper saw the same trend (the difference grows as threads decline and vanishes near 60 "
                     "threads), at a larger count on a 10x faster link.")
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
        for point in sorted(means):
            ratio, fair, scf, _ = means[point]
            rps = throughput.get(point, (math.nan,) * 4)
            lines.append(f"| {point} | {fair:.3g} | {scf:.3g} | {ratio:.3g} | {rps[1]:.3g} | {rps[2]:.3g} |")
        parts.append("\n".join(lines))
    return "\n\n".join(parts)


PAPER = Paper(
    tag="004",
    title='Crovella, Frangioso & Harchol-Balter, "Connection scheduling in web servers"',
    experiments=EXPERIMENTS,
    claims=claims,
    notes=notes,
    intro="""
Size-independent scheduling is sojourn's FAIR policy (round robin of write quanta); SCF is its
SRPT policy (fewest bytes left first, 004 §3.2). Both limit write concurrency to 8 with
TCP_NOTSENT_LOWAT 16 KiB so the server's order reaches the wire, over a 10 Mbit/s uplink with a
100-packet queue; closed user equivalents with exponential idle time (mean 9 s) request a
2000-object SURGE catalogue (004 Table 1) as often as it is popular. The paper's 100 Mbit/s
network is scaled to 10 Mbit/s at the same user counts. Figs. 7-8 are the M/G/1 SRPT formulas.
""",
)
