"""``sojourn trace``: generate, shape, import and describe traces; make docroots.

Each subcommand is a thin shell over the library modules (models, shaping,
importers, docroot, stats, io): parse options, call, write files, print a summary.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TaskProgressColumn, TextColumn, TimeElapsedColumn

from sojourn.argtypes import positive, positive_int

from . import docroot, importers, io, models, shaping, stats

console = Console(stderr=True)


def register(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="trace_command", metavar="SUBCOMMAND", required=True)

    gen = sub.add_parser("gen", help="generate a synthetic trace from a size model", description="Generate a synthetic trace: objects from a catalogue with Zipf popularity, sizes from a model, Poisson or on/off arrivals.")
    gen.add_argument("-o", "--output", type=Path, required=True, help="trace CSV to write")
    gen.add_argument("--model", default="wc98", choices=sorted(models.MODELS), help="size model (default wc98)")
    gen.add_argument("--k", type=float, help="bounded_pareto: lower bound (bytes)")
    gen.add_argument("--p", type=float, help="bounded_pareto: upper bound (bytes)")
    gen.add_argument("--alpha", type=float, help="bounded_pareto: tail index")
    gen.add_argument("--mean", type=float, help="exponential: mean size (bytes)")
    gen.add_argument("--data-set-bytes", type=float, help="specweb99: data set size (default 3.3e9, 001 §2.4)")
    gen.add_argument("--max-size", type=float, help="surge: cap on the tail (default p = 1e10)")
    length = gen.add_mutually_exclusive_group(required=True)
    length.add_argument("--requests", type=positive_int, help="number of requests")
    length.add_argument("--duration", type=positive, help="length in seconds")
    gen.add_argument("--rate", type=positive, help="requests per second (or give --rho and --link-mbps)")
    gen.add_argument("--rho", type=positive, help="offered load on the link (000 §2.2)")
    gen.add_argument("--link-mbps", type=positive, help="bottleneck link rate, Mbit/s (with --rho)")
    gen.add_argument("--clients", type=positive_int, default=100, help="number of client ids (default 100)")
    gen.add_argument("--objects", type=positive_int, help="catalogue size (default 20000; surge 2000)")
    gen.add_argument("--zipf", type=float, default=1.0, help="Zipf popularity exponent (default 1.0)")
    gen.add_argument("--arrivals", choices=models.ARRIVALS, default="poisson", help="arrival process (default poisson)")
    gen.add_argument("--on-s", type=positive, default=1.0, help="onoff: mean ON period, s")
    gen.add_argument("--off-s", type=float, default=1.0, help="onoff: mean OFF period, s")
    gen.add_argument("--locality", type=float, default=0.0, help="probability a request repeats a recent object (SURGE-like temporal locality)")
    gen.add_argument("--locality-distance", type=positive, default=100.0, help="mean distance, in requests, of such repeats")
    gen.add_argument("--seed", type=int, default=0)
    gen.set_defaults(func=cmd_gen)

    shp = sub.add_parser("shape", help="shape a trace to a load profile (W1..W10, alternating, intermittent, persistent)", description="Scale inter-arrival times per period so each period offers its target rho on the link (000 §2.2-2.3).")
    shp.add_argument("trace", type=Path, help="trace CSV to shape")
    shp.add_argument("-o", "--output", type=Path, required=True, help="shaped trace CSV to write")
    shp.add_argument("--periods", type=Path, help="per-period table CSV (default: OUTPUT with .periods.csv)")
    shp.add_argument("--link-mbps", type=positive, required=True, help="bottleneck link rate, Mbit/s")
    which = shp.add_mutually_exclusive_group(required=True)
    which.add_argument("--profile", help=f"one of {', '.join(shaping.PROFILES)} (000 Table 1)")
    which.add_argument("--rho", type=positive, help="persistent load")
    which.add_argument("--kind", choices=("alternating", "intermittent"), help="custom profile (with --low-s --high-s --low-rho --high-rho)")
    shp.add_argument("--low-s", type=positive)
    shp.add_argument("--high-s", type=positive)
    shp.add_argument("--low-rho", type=positive)
    shp.add_argument("--high-rho", type=positive)
    shp.add_argument("--time-compression", type=positive, default=1.0, help="divide every period length by this, keeping each period's rho")
    shp.add_argument("--duration", type=positive, help="seconds of shaped trace (default: every whole period the trace fills)")
    shp.add_argument("--interarrivals", choices=shaping.INTERARRIVALS, default="scaled", help="scale the trace's own gaps (000 §2.3) or redraw Poisson per period")
    shp.add_argument("--seed", type=int, default=0)
    shp.set_defaults(func=cmd_shape)

    doc = sub.add_parser("docroot", help="write every object of a trace as a file", description="Materialize every object of a trace as a file of exactly its size with the deterministic content of docs/formats.md; files already correct are reused.")
    doc.add_argument("trace", type=Path)
    doc.add_argument("root", type=Path, help="document root directory")
    doc.set_defaults(func=cmd_docroot)

    _register_import_and_stats(sub)


def _register_import_and_stats(sub: argparse._SubParsersAction) -> None:
    imp = sub.add_parser("import", help="import access logs (any Apache/nginx format) or World Cup 98 binary logs", description="Import logs as a trace, streaming (memory does not grow with the log). Several files (rotated, .gz) are merged in time order. Unusable lines, and time outliers beyond a gap of most of the log's span, are skipped, counted and reported, never fatal. 1-second timestamps are spread within their second by --seed.")
    imp.add_argument("format", choices=sorted(importers.IMPORTERS), help="clf: access logs, Common/Combined Log Format by default (e.g. the NASA log, our server's access log), --log-format for others; wc98: World Cup 98 binary records")
    imp.add_argument("inputs", type=Path, nargs="+", help="log files (plain or gzip), in any order")
    imp.add_argument("-o", "--output", type=Path, required=True, help="trace CSV to write")
    imp.add_argument("--log-format", metavar="FORMAT", help="clf: an Apache LogFormat ('%%h %%l %%u %%t \"%%r\" %%>s %%b %%D'), an nginx log_format ('$remote_addr - $remote_user [$time_local] \"$request\" $status $body_bytes_sent ...') or a preset (common, combined); default: Common/Combined, whatever follows it allowed (a number after it is the response time)")
    imp.add_argument("--keep-outliers", action="store_true", help="keep lines cut off by a gap of most of the log's span (they are still named)")
    imp.add_argument("--seed", type=int, default=0)
    imp.set_defaults(func=cmd_import)

    st = sub.add_parser("stats", help="print size statistics and write the CCDF figure", description="Print count, mean, min, max, median, p90, share of bytes in the largest 1% and 3% of requests, fitted tail alpha and offered load; write the log-log CCDF of 000 Fig. 1.")
    st.add_argument("traces", type=Path, nargs="+", help="trace CSV(s); several give several curves")
    st.add_argument("--link-mbps", type=positive, help="link rate for the offered load, Mbit/s")
    st.add_argument("--ccdf", type=Path, help="PNG to write (default: first trace with .ccdf.png)")
    st.add_argument("--json", action="store_true", help="print the statistics as JSON instead of a table")
    st.set_defaults(func=cmd_stats)


def cmd_import(args: argparse.Namespace) -> int:
    missing = [str(p) for p in args.inputs if not p.is_file()]
    if missing:
        return _fail(f"no such input file: {', '.join(missing)}")
    columns = (TextColumn("{task.description}"), BarColumn(), TaskProgressColumn(), TimeElapsedColumn())
    try:
        with Progress(*columns, console=console, transient=True) as bar:
            tasks = {"read": bar.add_task("read", total=None), "sort": bar.add_task("sort + write", total=None)}
            report, chunks = importers.import_chunks(
                args.format, args.inputs, seed=args.seed, log_format=args.log_format, keep_outliers=args.keep_outliers,
                progress=lambda stage, done, total: bar.update(tasks[stage], completed=done, total=total))
            with io.TraceWriter(args.output) as writer:
                for chunk in chunks:
                    writer.write(chunk)
    except ValueError as error:
        return _fail(str(error))
    print(report.summary())
    for example in report.examples:
        print(f"  skipped {example}")
    print(f"wrote {args.output}: {writer.rows} requests")
    return 0


def cmd_stats(args: argparse.Namespace) -> int:
    from rich.table import Table

    traces = {}
    try:
        for path in args.traces:
            traces[path.name] = io.read_trace(path)
        described = {name: stats.describe(trace, args.link_mbps * 1e6 if args.link_mbps else None) for name, trace in traces.items()}
        figure = args.ccdf or args.traces[0].with_name(args.traces[0].name.removesuffix(".csv") + ".ccdf.png")
        stats.plot_ccdf(traces, figure)
    except ValueError as error:
        return _fail(str(error))
    if args.json:
        print(json.dumps({name: d.as_dict() for name, d in described.items()}, indent=2))
    else:
        table = Table("statistic", *described)
        for row in zip(*(d.rows() for d in described.values())):
            table.add_row(row[0][0], *(value for _, value in row))
        Console().print(table)
    for name, described_trace in described.items():
        for warning in described_trace.warnings():
            console.print(f"[yellow]warning:[/yellow] {name}: {warning}", highlight=False)
    console.print(f"CCDF figure: {figure}", highlight=False)
    return 0


def _fail(message: str) -> int:
    console.print(f"[red]sojourn trace:[/red] {message}", highlight=False)
    return 2


def cmd_gen(args: argparse.Namespace) -> int:
    params = {
        "bounded_pareto": {"k": args.k, "p": args.p, "alpha": args.alpha},
        "exponential": {"mean": args.mean},
        "specweb99": {"data_set_bytes": args.data_set_bytes},
        "surge": {"max_size": args.max_size},
    }.get(args.model, {})
    missing = [f"--{name.replace('_', '-')}" for name, value in params.items() if value is None and args.model in ("bounded_pareto", "exponential")]
    if missing:
        return _fail(f"model {args.model} needs {', '.join(missing)}")
    try:
        model = models.model_by_name(args.model, **{k: v for k, v in params.items() if v is not None})
        with console.status(f"generating {args.model} trace"):
            trace = models.make_trace(
                model,
                n_requests=args.requests,
                duration_s=args.duration,
                rate=args.rate,
                rho=args.rho,
                link_bps=args.link_mbps * 1e6 if args.link_mbps else None,
                clients=args.clients,
                seed=args.seed,
                n_objects=args.objects,
                zipf_alpha=args.zipf,
                arrivals=args.arrivals,
                on_s=args.on_s,
                off_s=args.off_s,
                locality=args.locality,
                locality_mean_distance=args.locality_distance,
            )
            io.write_trace(trace, args.output)
    except ValueError as error:
        return _fail(str(error))
    span = float(trace["arrival_s"].iloc[-1]) if len(trace) else 0.0
    print(f"wrote {args.output}: {len(trace)} requests over {span:.3f} s, {trace['path'].nunique()} objects, mean size {trace['size'].mean():.0f} B")
    return 0


def _profile_from(args: argparse.Namespace) -> shaping.TransientProfile | None:
    if args.profile:
        return shaping.profile_by_name(args.profile)
    if args.kind:
        missing = [flag for flag in ("low_s", "high_s", "low_rho", "high_rho") if getattr(args, flag) is None]
        if missing:
            raise ValueError(f"--kind {args.kind} needs {', '.join('--' + m.replace('_', '-') for m in missing)}")
        return shaping.TransientProfile(args.kind, args.kind, args.low_s, args.high_s, args.low_rho, args.high_rho)
    return None


def cmd_shape(args: argparse.Namespace) -> int:
    try:
        profile = _profile_from(args)
        with console.status(f"shaping {args.trace}"):
            trace = io.read_trace(args.trace)
            shaped, periods = shaping.shape(
                trace,
                args.link_mbps * 1e6,
                profile=profile,
                rho=args.rho,
                time_compression=args.time_compression,
                seed=args.seed,
                duration_s=args.duration,
                interarrivals=args.interarrivals,
            )
            io.write_trace(shaped, args.output)
            table_path = args.periods or args.output.with_name(args.output.name.removesuffix(".csv") + ".periods.csv")
            periods.to_csv(table_path, index=False, float_format="%.6f")
    except ValueError as error:
        return _fail(str(error))
    error = (periods["achieved_rho"] / periods["target_rho"] - 1).abs()
    print(
        f"wrote {args.output}: {len(shaped)} of {len(trace)} requests in {len(periods)} periods over "
        f"{periods['end_s'].iloc[-1]:.3f} s; per-period table {table_path}; "
        f"largest |achieved/target - 1| = {error.max():.4f}"
    )
    return 0


def cmd_docroot(args: argparse.Namespace) -> int:
    try:
        trace = io.read_trace(args.trace)
        with Progress(TextColumn("docroot"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(), console=console, transient=True) as bar:
            task = bar.add_task("objects", total=None)
            stats = docroot.materialize(trace, args.root, progress=lambda done, total: bar.update(task, completed=done, total=total))
    except (ValueError, OSError) as error:
        return _fail(str(error))
    print(f"{args.root}: {stats.summary()}")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="sojourn trace")
    register(parser)
    args = parser.parse_args(argv)
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
