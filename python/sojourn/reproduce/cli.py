"""``sojourn reproduce PAPER``: run a paper's experiments, publish them, write its doc."""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

from rich.console import Console

from sojourn.argtypes import positive_int
from sojourn.reproduce import DOCS, PAPERS, REPO, Context, load_paper
from sojourn.runner.cli import add_stop_after
from sojourn.runner.experiment import LEFT_INVALID, STOPPED_AT_DEADLINE, combined_status


def register(parser: argparse.ArgumentParser) -> None:
    parser.description = (
        "Reproduce one paper: run each of its experiments (specs under experiments/<paper>/, or commands), "
        "publish what the numbers come from into docs/reproduction/<paper>/<experiment>/ (summaries, figures), "
        "and write docs/reproduction/<paper>.md and <paper>.csv (the paper's numbers beside ours, one row format "
        "for every paper) and docs/reproduction/README.md (the summary over all papers). "
        "Completed repetitions are kept (resume). Needs root for testbed experiments. "
        "Example: sojourn reproduce 000 --quick --only baseline")
    parser.add_argument("paper", choices=list(PAPERS), help="paper tag (../shared/papers/README.md)")
    parser.add_argument("--quick", action="store_true",
                        help="each spec at its [quick] scale (minutes: fewer points, cycles or repetitions); results "
                             "in results/reproduce/<paper>-quick/")
    parser.add_argument("--only", action="append", metavar="NAME", default=[],
                        help="run only this experiment (repeatable); the doc still lists every published one")
    parser.add_argument("--list", action="store_true",
                        help="list the paper's experiments with their size and estimated wall time (at --quick's "
                             "scale with --quick), and exit")
    parser.add_argument("--doc-only", action="store_true", help="only regenerate the doc from published results")
    parser.add_argument("--results", type=Path, default=REPO / "results", help="results root (default: %(default)s)")
    parser.add_argument("--docs", type=Path, default=DOCS, help="where the doc is written (default: %(default)s)")
    parser.add_argument("--prefix", default="sjrep", help="testbed namespace prefix (default: %(default)s)")
    parser.add_argument("--concurrency", type=positive_int, default=None, metavar="N",
                        help="run N testbeds at once (sojourn run --concurrency; the fidelity guard redoes any "
                             "repetition they disturb; CPU-bound experiments run one at a time). Default: the most "
                             "measured safe for the experiment's kind of testbed, with the WAN emulator or without "
                             "(bench/concurrency, docs/reproduction/concurrency/*.json)")
    parser.add_argument("--fresh", action="store_true",
                        help="with --only: run the named experiments anew, neither keeping their results here nor "
                             "restoring their publication, which the new runs replace when they publish (for results "
                             "the code has since changed under; give it once: the next invocation without it resumes "
                             "from what this one published)")
    parser.add_argument("--redraw", action="store_true",
                        help="run nothing: publish the chosen experiments again from their publication and the "
                             "results here, so their figures and summaries are the current code's (after a change to "
                             "the report or the analysis: each repetition with records here is summarized afresh, its "
                             "fidelity record kept); refused for an experiment whose figures need per-request records "
                             "that are not here. Example: sojourn reproduce 002 --only loss --redraw")
    add_stop_after(parser)
    parser.set_defaults(func=main)


def _write_docs(console: Console, paper, ctx: Context) -> None:
    from sojourn.reproduce.doc import write_docs

    md_path, csv_path = write_docs(paper, ctx)
    console.print(f"wrote {md_path} and {csv_path}", markup=False, highlight=False)


def main(args: argparse.Namespace) -> int:
    console = Console(width=None if sys.stdout.isatty() else 160)
    try:
        paper = load_paper(args.paper)
    except ModuleNotFoundError as err:
        console.print(f"sojourn reproduce: paper {args.paper} has no reproduction yet ({err.name})", style="red",
                      markup=False)
        return 2
    if args.list:
        from sojourn.reproduce.publish import at_once, progress
        from sojourn.runner.spec import load_spec

        published = Context(paper, args.docs)
        for entry in paper.experiments:
            length = ""
            if entry.spec:
                experiment = load_spec(REPO / entry.spec, quick=args.quick)
                testbeds = at_once(experiment, args.concurrency, entry.most_testbeds)
                length = "  " + progress(experiment, published.directory(entry.name), args.quick, testbeds,
                                       share=True)
            console.print(f"{entry.name:24} {entry.title}  [{entry.spec or ' '.join(entry.command)}]{length}",
                          markup=False, highlight=False, soft_wrap=True)
        return 0
    try:
        chosen = [paper.entry(name) for name in args.only] or paper.experiments
    except KeyError as err:
        console.print(f"sojourn reproduce: {err.args[0]}", style="red", markup=False)
        return 2
    if args.redraw and (args.fresh or args.doc_only):
        console.print("sojourn reproduce: --redraw runs nothing; it goes with neither --fresh nor --doc-only",
                      style="red", markup=False)
        return 2
    if args.fresh and not args.only:
        console.print("sojourn reproduce: --fresh needs --only NAME (which experiments to run anew)", style="red",
                      markup=False)
        return 2
    ctx = Context(paper, args.docs)
    if args.quick and not args.doc_only:
        # A quick result published in place of a paper-scale one would lose the latter's
        # repetitions (their per-request records are not kept anywhere else).
        at_full = [entry.name for entry in chosen if ctx.has(entry.name) and ctx.meta(entry.name).get("scale") == "full"]
        if at_full:
            console.print(f"sojourn reproduce: {', '.join(at_full)} of {paper.tag} is published at the paper's scale in "
                          f"{ctx.directory(at_full[0]).parent}; --quick would replace it. Publish quick results "
                          "elsewhere (--docs DIR) or leave those out (--only)", style="red", markup=False, soft_wrap=True)
            return 2
    status, written = 0, False
    if not args.doc_only:
        from sojourn.reproduce.publish import NOTHING_NEW, publish, redraw_entry, run_entry
        from sojourn.runner.cli import stop_time

        stop_at = stop_time(args.stop_after)

        if any(e.spec for e in chosen) and os.geteuid() != 0 and not args.redraw:
            console.print("[red]sojourn reproduce needs root (network namespaces) for testbed experiments[/]")
            return 1
        started = time.monotonic()
        for number, entry in enumerate(chosen, 1):
            console.rule(f"{paper.tag} [{number}/{len(chosen)}] {entry.name}: {entry.title}")
            began = time.monotonic()
            if args.redraw:
                directory, code = redraw_entry(console, paper, entry, args.results, args.quick,
                                               ctx.directory(entry.name))
            else:
                directory, code = run_entry(console, paper, entry, args.results, args.quick, args.prefix,
                                            args.concurrency, None if args.fresh else ctx.directory(entry.name),
                                            stop_at, fresh=args.fresh)
            if code == NOTHING_NEW:
                console.print(f"{entry.name}: nothing ran that is not published already")
                continue
            if code == 130:  # Ctrl-C: the repetition is kept as partial; stop here, as `sojourn run` does
                console.print(f"[yellow]{paper.tag}: interrupted at {entry.name}; rerun to resume[/]")
                return 130
            if directory is None:
                status = combined_status(status, code)
                continue
            try:
                # A redraw keeps the time the runs took to publish, not its own.
                wall_s = ctx.meta(entry.name).get("wall_s", 0.0) if args.redraw else time.monotonic() - began
                publish(paper, entry, directory, ctx.directory(entry.name), args.quick, wall_s)
            except Exception as err:  # noqa: BLE001 - one entry's report must not stop the others
                console.print(f"[red]{entry.name}: publishing failed ({type(err).__name__}: {err}); its results stay "
                              f"in {directory}[/]")
                status = combined_status(status, 1)
                continue
            if code == STOPPED_AT_DEADLINE:
                console.print(f"[yellow]{entry.name}: published what finished; the repetitions --stop-after left are not started; rerun to resume[/]")
            elif code == LEFT_INVALID:
                console.print(f"[yellow]{entry.name}: published what finished; some repetitions are left invalid by "
                              "the fidelity guard (the machine disturbed every attempt); rerun to redo them[/]")
            elif code:
                console.print(f"[yellow]{entry.name}: some repetitions are partial; published as they are[/]")
            status = combined_status(status, code)
            # The doc follows each publication, so a campaign stopped later leaves it whole. A
            # fresh context: the old one cached every experiment's published repetitions as they
            # were when the previous doc was written (a campaign's doc kept an experiment's
            # old rows after its new repetitions were published).
            ctx = Context(paper, args.docs)
            _write_docs(console, paper, ctx)
            written = True
        console.print(f"{paper.tag}: {len(chosen)} experiment(s) in {time.monotonic() - started:.0f} s")
    if not written:
        _write_docs(console, paper, ctx)
    if Path(args.docs).resolve() == DOCS.resolve():
        from sojourn.reproduce.check import check_docs

        for name, problems in check_docs(DOCS).items():
            for problem in problems:
                console.print(f"[red]{name}: {problem}[/]", highlight=False)
            status = combined_status(status, 1)
    return status
