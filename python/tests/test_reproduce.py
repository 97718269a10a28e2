"""`sojourn reproduce`: the paper specs, spec bases and quick scales, the claim rows, the doc
generator on the stored results, and one quick experiment end to end in the testbed."""

from __future__ import annotations

import csv
import json
import re
import os
import shutil
import subprocess
import sys
import tomllib
from collections.abc import Callable
from functools import partial
from pathlib import Path
from types import SimpleNamespace

import pandas as pd
import pytest

from sojourn.reproduce import CSV_COLUMNS, DOCS, PAPERS, Context, load_paper
from sojourn.reproduce.doc import BESIDE, markdown, write_docs
from sojourn.reproduce.rows import Measure, Row, bound, direction, measured, point
from sojourn.runner.spec import SpecError, load_spec

REPO = Path(__file__).resolve().parents[2]
PAPER_SPECS = sorted(p for p in (REPO / "experiments").glob("[0-9][0-9][0-9]/*.toml")
                     if "name" in tomllib.loads(p.read_text()) or "base" in tomllib.loads(p.read_text()))


@pytest.mark.parametrize("path", PAPER_SPECS, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_every_paper_spec_is_valid_at_both_scales(path):
    full = load_spec(path)
    quick = load_spec(path, quick=True)
    assert full.name == f"{path.parent.name}-{path.stem}"
    assert quick.name == full.name + "-quick"
    for experiment in (full, quick):
        names = [run.name for run in experiment.runs]
        assert names and len(names) == len(set(names))


@pytest.mark.parametrize("path", [p for p in PAPER_SPECS if p.parent.name == "000"], ids=lambda p: p.name)
def test_every_srpt_run_of_000_is_the_papers_srpt_unless_it_says_otherwise(path):
    """000 §3: its SRPT is the kernel's, the responses' remaining sizes mapped to priority
    bands, over the server's own (FAIR) order, and its FAIR the same server without bands. A
    factor run changed from either keeps that, or a row would compare another policy under its
    name (srpt-slots2000 once ran the application's SRPT order without bands); only a run named
    for the difference may have it: srpt-app (the application's order), fair-synack-band (the
    SYN-ACKs in a band of their own)."""
    for run in load_spec(path).runs:
        server = run.config["server"]
        if run.variant.startswith("srpt") and not run.variant.startswith("srpt-app"):
            assert server["kernel_bands"], f"{path.name}: {run.name} runs SRPT without kernel bands"
            assert server["policy"] == "fair", f"{path.name}: {run.name} orders writes by size"
        if run.variant.startswith("fair") and "synack-band" not in run.variant:
            assert not server["kernel_bands"] and server["policy"] == "fair", f"{path.name}: {run.name} is not FAIR"


@pytest.mark.parametrize("tag", [t for t in PAPERS if (REPO / "python/sojourn/reproduce" / f"paper{t}.py").is_file()])
def test_every_entry_of_a_paper_names_a_spec_that_exists(tag):
    paper = load_paper(tag)
    assert paper.tag == tag
    for entry in paper.experiments:
        assert entry.command or (REPO / entry.spec).is_file(), entry.spec
    assert len({e.name for e in paper.experiments}) == len(paper.experiments)


def test_a_base_is_merged_and_the_merged_spec_is_what_is_stored(tmp_path):
    (tmp_path / "base.toml").write_text(
        'name = "b"\nrepetitions = 3\n[network]\nlink_mbps = 10\n[workload]\nrho = 0.5\nclients = 7\n'
        '[sweep]\nparameter = "workload.rho"\nvalues = [0.1, 0.2]\n[variants.fair]\nserver.policy = "fair"\n')
    (tmp_path / "child.toml").write_text(
        'base = "base.toml"\nname = "c"\n[workload]\nrho = 0.9\n[variants.srpt]\nserver.policy = "srpt"\n'
        '[quick]\nrepetitions = 1\nworkload.clients = 3\n')
    child = load_spec(tmp_path / "child.toml")
    # Tables merge key by key (clients from the base, rho from the child), the child's
    # variants replace the base's, and the base's sweep is not inherited.
    assert [r.name for r in child.runs] == ["srpt"]
    assert child.runs[0].config["workload"]["clients"] == 7 and child.runs[0].config["workload"]["rho"] == 0.9
    assert child.repetitions == 3
    stored = tomllib.loads(child.text)
    assert "base" not in stored and stored["workload"] == {"rho": 0.9, "clients": 7}
    quick = load_spec(tmp_path / "child.toml", quick=True)
    assert quick.name == "c-quick" and quick.repetitions == 1 and quick.runs[0].config["workload"]["clients"] == 3
    # A base may have a base of its own; only this spec's `runs` of the merged runs.
    (tmp_path / "grandchild.toml").write_text('base = "child.toml"\nname = "g"\nrepetitions = 2\nruns = ["srpt"]\n')
    grandchild = load_spec(tmp_path / "grandchild.toml")
    assert [r.name for r in grandchild.runs] == ["srpt"] and grandchild.repetitions == 2
    assert grandchild.runs[0].config["workload"] == child.runs[0].config["workload"]
    assert grandchild.text.startswith("# grandchild.toml over its base child.toml over base.toml, merged")
    # A spec without a sweep of its own inherits none of the base's points, quick ones included.
    (tmp_path / "swept.toml").write_text('name = "s"\n[workload]\nrho = 0.5\n[sweep]\nparameter = "workload.rho"\nvalues = [0.1]\n'
                                         '[quick]\nrepetitions = 1\nsweep.values = [0.2]\n')
    (tmp_path / "one-point.toml").write_text('base = "swept.toml"\nname = "o"\n')
    assert [r.name for r in load_spec(tmp_path / "one-point.toml", quick=True).runs] == ["run"]
    # ... and says so, for `sojourn run` to print; a sweep of its own needs no note.
    (notice,) = load_spec(tmp_path / "one-point.toml").notices
    assert notice.startswith("one-point.toml: its base swept.toml sweeps workload.rho over 1 value(s)")
    # A sweep of its own over the base's parameter keeps the base's quick points; over
    # another parameter it does not (rho's 0.2 would become a client count).
    (tmp_path / "same.toml").write_text('base = "swept.toml"\nname = "same"\n[sweep]\nparameter = "workload.rho"\n'
                                        'values = [0.3, 0.4]\n')
    assert [r.sweep_value for r in load_spec(tmp_path / "same.toml", quick=True).runs] == [0.2]
    assert load_spec(tmp_path / "same.toml").notices == []
    (tmp_path / "other.toml").write_text('base = "swept.toml"\nname = "other"\n[sweep]\nparameter = "workload.clients"\n'
                                         'values = [5, 6]\n')
    assert [r.sweep_value for r in load_spec(tmp_path / "other.toml", quick=True).runs] == [5, 6]
    # The quick scale is checked with the full one, and its errors say which scale they are of.
    (tmp_path / "bad-baseline.toml").write_text('base = "swept.toml"\nname = "bb"\nbaseline = "rho=0.3"\n'
                                                '[sweep]\nparameter = "workload.rho"\nvalues = [0.3]\n')
    with pytest.raises(SpecError, match=r"at its \[quick\] scale .*baseline = 'rho=0.3' is not a run"):
        load_spec(tmp_path / "bad-baseline.toml")
    (tmp_path / "loop.toml").write_text('base = "loop2.toml"\nname = "l"\n')
    (tmp_path / "loop2.toml").write_text('base = "loop.toml"\nname = "l2"\n')
    with pytest.raises(SpecError, match="leads back"):
        load_spec(tmp_path / "loop.toml")
    (tmp_path / "bad.toml").write_text('base = "base.toml"\nname = "x"\n[quick]\nname = "y"\n')
    with pytest.raises(SpecError, match="unknown key quick.name"):
        load_spec(tmp_path / "bad.toml")


def test_row_verdicts():
    def row(claim, value, reps=1):
        return Row("e", "c", claim, Measure(value, None, reps), "p", "quick")

    ratio = row(direction(8.0), 5.0)
    assert ratio.ratio == pytest.approx(0.625) and ratio.verdict() == "same direction within 2x"
    assert ratio.reason() == "—"
    assert row(direction(8.0), 0.9).verdict() == "opposite"
    assert row(direction(8.0), 1.0).verdict() == "opposite"  # on the reference is not the paper's side
    assert row(direction(8.0), 3.0).verdict() == "same direction beyond 2x"
    assert row(direction(8.0), 3.0).reason() == "unexplained"
    minimum = row(bound(">=", 2.5), 2.0)
    assert minimum.ratio is None and minimum.verdict() == "missed"  # never a ratio to a bound
    assert row(bound(">=", 2.5, paper=2.5), 2.0).ratio == pytest.approx(0.8)  # the paper's own value
    assert row(bound("<=", 1.6), 1.62).verdict() == "met"  # at the digits the paper printed
    assert row(bound("<=", 1.6), 1.66).verdict() == "missed"
    assert row(bound(">", 1), 1.0).verdict() == "missed"  # a direction without a number is strict
    assert row(point(1.1), 0.3).verdict() == "same direction beyond 2x"
    absent = Row("e", "c", point(1.1), Measure(absent="run x is not published"), "p", "quick")
    assert absent.verdict() == "no result" and absent.ratio is None and absent.why_text() == "run x is not published"
    measured_row = Row("e", "c", point(1.1), Measure(0.3, None, 1), "p", "quick", why=measured("because"))
    assert measured_row.reason() == "measured" and measured_row.why_text() == "because"
    with pytest.raises(ValueError):
        point(0)  # a point needs the paper's value, which a ratio is taken to


def test_a_run_without_a_syn_drop_counts_its_length_and_an_early_drop_misses_the_bound():
    from sojourn.reproduce.paper000 import _first_syn_drop_or_end
    assert _first_syn_drop_or_end({"first_syn_drop_s": 43.2, "duration_s": 1800.4}, lasted=1800) == 43.2
    assert _first_syn_drop_or_end({"first_syn_drop_s": 0, "duration_s": 1800.4}, lasted=1800) == 0  # at once
    # None came: the spec's length, not the measured duration a millisecond short of it
    assert _first_syn_drop_or_end({"first_syn_drop_s": None, "duration_s": 1799.999}, lasted=1800) == 1800
    half_hour = bound(">=", 900, unit="s")
    assert Row("e", "c", half_hour, Measure(1800.4, None, 3), "p", "paper").verdict() == "met"
    assert Row("e", "c", half_hour, Measure(43.2, None, 1), "p", "paper").verdict() == "missed"


@pytest.mark.parametrize("tag", list(PAPERS))
def test_an_experiment_not_run_has_its_claims_as_rows_naming_its_spec(tag, tmp_path):
    """Nothing published: every claim of a spec is still a row, `no result` at scale `not
    run`, citing the spec and the command that runs it, and the docs are written."""
    paper = load_paper(tag)
    rows = paper.claims(Context(paper, tmp_path))
    specs = {entry.name for entry in paper.experiments if entry.spec}
    assert rows and {row.experiment for row in rows} <= specs
    assert all(row.verdict() == "no result" and row.scale == "not run" for row in rows)
    assert all(row.result_path == paper.entry(row.experiment).spec for row in rows)
    assert all(f"sojourn reproduce {tag} --only {row.experiment}" in row.why_text() for row in rows)
    md_path, csv_path = write_docs(paper, Context(paper, tmp_path))
    assert len(list(csv.DictReader(csv_path.open()))) == len(rows) and "not run" in md_path.read_text()


def test_the_most_over_a_sweep_counts_the_repetitions_of_the_point_it_shows(tmp_path):
    """000 (H): FAIR / SRPT incomplete is defined in one repetition at 15 s (SRPT left none
    incomplete in the other two) and in three at 3 s, the most; the row shows the 3-s point's
    mean and interval, so its repetitions are that point's 3, not the sweep's least 1."""
    paper = load_paper("000")
    _published(tmp_path, "000", "abort")
    (row,) = [r for r in paper.claims(Context(paper, tmp_path))
              if r.experiment == "abort" and r.claim.startswith("FAIR / SRPT incomplete")]
    assert row.ours.at == "abort_after_s=3" and row.ours.repetitions == 3 and row.ours.ci is not None


def test_the_least_over_a_sweep_waits_for_every_point_to_have_both_variants(tmp_path):
    """000 (B)'s "at least 2.5 for all RTTs", least at 150 ms in the paper: while FAIR's 150-ms
    run is published and SRPT's is not (a campaign cut short), the least over the RTTs is no
    result, not the least of the points that have both; without either 150-ms run it is."""
    paper = load_paper("000")
    _published(tmp_path, "000", "rtt")
    shutil.rmtree(tmp_path / "000" / "rtt" / "srpt-rtt_ms=150", ignore_errors=True)
    claim = "least FAIR / SRPT over the RTTs"
    row = _the_row(paper, tmp_path, "rtt", claim)
    assert row.verdict() == "no result" and "150 have only one of fair and srpt" in row.ours.absent
    shutil.rmtree(tmp_path / "000" / "rtt" / "fair-rtt_ms=150")
    assert _the_row(paper, tmp_path, "rtt", claim).ours.at == "rtt_ms=100"


def test_a_claim_per_workload_has_a_row_for_every_workload_of_the_spec(tmp_path):
    """000 §5.2's "never more than 10% higher under SRPT for any workload": a row per workload
    the spec runs, before any ran (issue 28: "that is a row, not silence")."""
    paper = load_paper("000")
    rows = paper.claims(Context(paper, tmp_path))
    assert {row.experiment for row in rows} >= {"txqueue", "syn-queue-w4", "rtt-loss-grid", "workloads"}
    profiles = [run.sweep_value for run in load_spec(REPO / paper.entry("workloads").spec).runs]
    largest = [row for row in rows if row.experiment == "workloads" and "largest 1%" in row.claim]
    assert [row.claim.rsplit(", ", 1)[1] for row in largest] == list(dict.fromkeys(profiles)) and len(largest) == 10


def test_doc_regenerates_the_stored_docs_from_the_published_results(tmp_path):
    """The committed docs/reproduction/<paper>.csv and .md, the figures of the paper's values
    beside ours and README.md are what the generator makes from the committed published
    results: every number can be traced to a stored summary."""
    stored = REPO / "docs" / "reproduction"
    if (stored / "concurrency").is_dir():  # the published solo-against-concurrent comparisons
        shutil.copytree(stored / "concurrency", tmp_path / "concurrency")
    checked = []
    for tag in PAPERS:
        if not (stored / f"{tag}.csv").is_file() or not (stored / tag).is_dir():
            continue
        paper = load_paper(tag)
        shutil.copytree(stored / tag, tmp_path / tag)
        md_path, csv_path = write_docs(paper, Context(paper, tmp_path, cited=stored))
        assert csv_path.read_text() == (stored / f"{tag}.csv").read_text(), tag
        assert md_path.read_text() == (stored / f"{tag}.md").read_text(), tag
        for figure in sorted((stored / tag / BESIDE).glob("*.png")):
            assert (tmp_path / tag / BESIDE / figure.name).read_bytes() == figure.read_bytes(), figure
        rows = list(csv.DictReader(csv_path.open()))
        assert rows and tuple(rows[0]) == CSV_COLUMNS
        checked.append(tag)
    if not checked:
        pytest.skip("no paper has published results in docs/reproduction yet")
    assert (tmp_path / "README.md").read_text() == (stored / "README.md").read_text()


@pytest.mark.netns
@pytest.mark.skipif(os.geteuid() != 0, reason="needs root for network namespaces")
def test_quick_reproduction_of_one_factor_end_to_end(tmp_path):
    docs = tmp_path / "docs"
    try:
        done = subprocess.run([sys.executable, "-m", "sojourn.cli", "reproduce", "000", "--quick", "--only", "baseline",
                               "--results", str(tmp_path / "results"), "--docs", str(docs), "--prefix", "sjrpt"],
                              capture_output=True, text=True, timeout=600)
    except subprocess.TimeoutExpired as err:
        # Each attempt waits for the host's steal to calm (up to 30 minutes) before it starts:
        # a host stolen from all along is not the code's failure either.
        said = err.stdout.decode() if isinstance(err.stdout, bytes) else err.stdout or ""
        if "waiting for calm" in said:
            pytest.skip(f"the host's steal did not calm: {said[-500:]}")
        raise
    # The paper's spec keeps its host-noise bounds (steal, generator lag); a repetition the host
    # disturbed past them on every attempt is the guard working, so it skips naming them, never passes.
    disturbed = [violation for attempts in (tmp_path / "results").glob("**/attempts.json")
                 if json.loads((attempts.parent / "status.json").read_text())["state"] == "invalid"
                 for attempt in json.loads(attempts.read_text()) for violation in attempt["fidelity"]["violations"]]
    if done.returncode and disturbed and all(v.split()[0] in ("lag_p99_s", "cpu_steal") for v in disturbed):
        pytest.skip(f"the host disturbed every attempt past the fidelity guard: {'; '.join(disturbed)}")
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    meta = json.loads((docs / "000" / "baseline" / "meta.json").read_text())
    assert meta["scale"] == "quick" and meta["spec"] == "experiments/000/baseline.toml"
    summaries = sorted((docs / "000" / "baseline").glob("*/0/summary.json"))
    assert [p.parent.parent.name for p in summaries] == ["fair", "srpt"]
    for path in summaries:
        summary = json.loads(path.read_text())
        assert summary["requests"] > 100 and summary["completed"] > 0.9 * summary["requests"]
    figures = json.loads((docs / "000" / "baseline" / "figures.json").read_text())
    assert figures and all((docs / "000" / "baseline" / f["file"]).is_file() for f in figures)
    rows = list(csv.DictReader((docs / "000.csv").open()))
    (row,) = [r for r in rows if r["experiment"] == "baseline" and r["claim"] == "FAIR / SRPT mean response time"]
    fair = json.loads((docs / "000/baseline/fair/0/summary.json").read_text())["response_mean"]
    srpt = json.loads((docs / "000/baseline/srpt/0/summary.json").read_text())["response_mean"]
    assert float(row["ours"]) == pytest.approx(fair / srpt, rel=1e-5)
    assert row["paper"] == "000" and row["repetitions"] == "1" and row["scale"] in ("quick", "compressed")
    assert "not run yet" in (docs / "000.md").read_text()  # the other experiments are listed as such


def test_the_default_concurrency_is_the_measured_one_for_the_experiments_testbed(tmp_path):
    """sojourn reproduce runs as many testbeds at once as bench/concurrency measured safe for
    the kind the experiment uses (with the WAN emulator or without, open or closed loop): every count up to it
    measured, and safe in every comparison that measured it; one where nothing was."""
    from sojourn.reproduce.concurrency import measured_concurrency
    from sojourn.runner.spec import validate

    lan = validate({"name": "lan", "workload": {"rho": 0.5}})
    wan = validate({"name": "wan", "workload": {"rho": 0.5, "clients": 4},
                    "network": {"groups": [{"name": "far", "rtt_ms": 100}]}})
    measured = tmp_path / "concurrency"
    measured.mkdir()
    assert (measured_concurrency(lan, tmp_path), measured_concurrency(wan, tmp_path)) == (1, 1)

    def comparison(name: str, spec: str, verdicts: dict[int, bool]) -> None:
        row = lambda inside: {"inside_solo_interval": inside, "n": 3, "valid": 3, "complete": 3}  # noqa: E731
        counts = {str(count): {"fair": row(inside), "srpt": row(True)} for count, inside in verdicts.items()}
        (measured / f"{name}.json").write_text(json.dumps({"spec": spec, "counts": counts}))

    comparison("lan-a", "experiments/000/concurrency.toml", {1: True, 3: True, 4: True})
    comparison("wan-a", "experiments/000/concurrency-rtt.toml", {1: True, 2: True, 4: False})
    assert (measured_concurrency(lan, tmp_path), measured_concurrency(wan, tmp_path)) == (1, 2)  # 2 unmeasured
    comparison("lan-b", "experiments/000/concurrency.toml", {1: True, 2: True})
    comparison("wan-b", "experiments/000/concurrency-rtt.toml", {1: True, 2: False, 3: True})
    assert (measured_concurrency(lan, tmp_path), measured_concurrency(wan, tmp_path)) == (4, 1)
    # A closed loop of users is a kind of its own: the open loops' counts do not license it.
    closed = validate({"name": "closed", "workload": {"mode": "closed", "think_s": 9.0}})
    assert measured_concurrency(closed, tmp_path) == 1
    comparison("closed-a", "experiments/004/concurrency.toml", {1: True, 2: True, 3: True})
    assert [measured_concurrency(e, tmp_path) for e in (lan, wan, closed)] == [4, 1, 3]


def test_an_experiment_seen_to_need_fewer_testbeds_runs_at_most_that_many():
    """An entry's most_testbeds caps the measured count (000's mtu: five W1 testbeds with
    536-byte packets made every generator late); --concurrency still decides when given, and
    CPU-bound runs go alone whatever either says."""
    from sojourn.reproduce.concurrency import measured_concurrency
    from sojourn.reproduce.publish import at_once
    from sojourn.runner.spec import validate

    lan = validate({"name": "lan", "workload": {"rho": 0.5}})
    measured = measured_concurrency(lan)
    assert measured >= 3
    assert (at_once(lan, None), at_once(lan, None, most=2), at_once(lan, None, most=measured + 1)) == (
        measured, 2, measured)
    assert at_once(lan, 4, most=2) == 4
    alone = validate({"name": "alone", "workload": {"rho": 0.5}, "collect": {"fidelity": {"cpu_idle_min": 0}}})
    assert at_once(alone, 4, most=2) == 1


def test_the_concurrency_comparison_gives_each_shift_with_its_welch_interval():
    """bench/concurrency/compare.py: the shift of a concurrent set from the solo one, with
    the Welch 90% interval of the difference of means, relative to the solo mean."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("compare", REPO / "bench" / "concurrency" / "compare.py")
    compare = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(compare)
    solo = [1.00, 1.02, 0.98, 1.01, 0.99, 1.00]
    shifted = compare.welch([1.10, 1.12, 1.08], solo)
    assert shifted["welch_diff"] == pytest.approx(0.10)
    assert 0 < shifted["welch_lo"] < 0.10 < shifted["welch_hi"] and shifted["welch_p"] < 0.01
    same = compare.welch([1.00, 1.02, 0.98], solo)
    assert same["welch_lo"] < 0 < same["welch_hi"] and same["welch_p"] > 0.5
    assert compare.welch([1.1], solo)["welch_lo"] is None  # one repetition: no interval
    # A repetition stopped by a signal is no evidence either way; one that failed is.
    stopped = {"state": "partial", "reason": "interrupted (signal SIGINT)"}
    assert compare.interrupted(SimpleNamespace(status=stopped))
    assert not compare.interrupted(SimpleNamespace(status={"state": "partial", "reason": "load generator exited with status 1"}))
    assert not compare.interrupted(SimpleNamespace(status={"state": "complete"}))


def test_the_estimated_wall_time_counts_whole_waves_of_testbeds(tmp_path):
    """--list's hours: repetitions start on the first testbed free, in the runner's order,
    so three runs of two repetitions five at once take two repetitions' time, not 6/5 of one."""
    from sojourn.reproduce.publish import estimated_seconds

    spec = tmp_path / "e.toml"
    spec.write_text('name = "e"\nrepetitions = 2\n[workload]\nrho = 0.5\n[sweep]\nparameter = "workload.seed"\n'
                    'values = [1, 2, 3]\n')
    experiment = load_spec(spec)
    one = estimated_seconds(experiment, 1) / 6
    assert estimated_seconds(experiment, 5) == pytest.approx(2 * one)
    assert estimated_seconds(experiment, 6) == pytest.approx(one)
    assert estimated_seconds(experiment, 4, done=frozenset({("seed=1", "0"), ("seed=2", "0")})) == pytest.approx(one)


def test_published_repetitions_of_the_same_spec_are_restored_as_complete_results(tmp_path):
    """results/ does not outlive a checkout, docs/reproduction/ does: a campaign goes on from
    the repetitions published with the same spec at the same scale, and only from those."""
    from sojourn.reproduce.publish import (RESTORED, has_unpublished, estimated_seconds, remaining_seconds,
                                           restore_published)
    from sojourn.runner import layout

    spec = tmp_path / "e.toml"
    spec.write_text('name = "e"\nrepetitions = 2\n[workload]\nrho = 0.5\n')
    experiment = load_spec(spec)
    published = tmp_path / "published"
    for rep, state in (("0", "complete"), ("1", "partial")):
        (published / "run" / rep).mkdir(parents=True)
        layout.mark(published / "run" / rep, state)
        (published / "run" / rep / "summary.json").write_text('{"response_mean": 1.0}\n')
    (published / "spec.toml").write_text(experiment.text)
    (published / "meta.json").write_text(json.dumps({"scale": "full"}))
    # --list's "published 1 of 2": half the wall time is left.
    assert remaining_seconds(experiment, published, False, 1) == pytest.approx(estimated_seconds(experiment, 1) / 2)
    assert remaining_seconds(experiment, published, True, 1) == pytest.approx(estimated_seconds(experiment, 1))
    results = tmp_path / "results"
    assert restore_published(experiment, published, results, quick=True) == 0  # another scale
    assert restore_published(experiment, published, results, quick=False) == 1
    restored = results / "e" / "run" / "0"
    assert layout.is_complete(restored) and (restored / RESTORED).is_file()
    assert (restored / "summary.json").read_text() == '{"response_mean": 1.0}\n'
    assert not (results / "e" / "run" / "1").exists()  # a partial repetition is run again
    assert (results / "e" / "spec.toml").read_text() == experiment.text
    assert restore_published(experiment, published, results, quick=False) == 0  # complete already
    assert not has_unpublished(results / "e")  # nothing to publish again
    (results / "e" / "run" / "1").mkdir()
    layout.mark(results / "e" / "run" / "1", "complete")
    assert has_unpublished(results / "e")
    spec.write_text('name = "e"\nrepetitions = 2\n[workload]\nrho = 0.6\n')
    assert restore_published(load_spec(spec), published, tmp_path / "other", quick=False) == 0  # another spec


def test_a_repetition_named_as_another_run_is_not_published_and_the_publication_is_kept(tmp_path):
    """The tables find a repetition by the run its run.json names: one sitting under another
    run's directory (rtt's restored 0-ms repetitions once carried mtu's names) would be
    counted as that run. Publishing refuses it by name and leaves the last publication whole."""
    from sojourn.reproduce import Entry, Paper
    from sojourn.reproduce.publish import publish
    from sojourn.runner import layout

    source = tmp_path / "results" / "e"
    for run, named in (("rtt_ms=0", "rtt_ms=0"), ("rtt_ms=50", "mtu=1500")):
        (source / run / "0").mkdir(parents=True)
        layout.mark(source / run / "0", "complete")
        (source / run / "0" / "run.json").write_text(json.dumps({"run": named, "index": 0}))
    destination = tmp_path / "published" / "e"
    destination.mkdir(parents=True)
    (destination / "meta.json").write_text('{"scale": "full"}\n')
    paper = Paper("t", "t", [], claims=lambda ctx: [])
    with pytest.raises(ValueError, match=r"rtt_ms=50/0/run.json names run 'mtu=1500', not 'rtt_ms=50'"):
        publish(paper, Entry("e", "e", spec="e.toml"), source, destination, quick=False, wall_s=1.0)
    assert sorted(p.name for p in destination.parent.iterdir()) == ["e"]  # no staging left behind
    assert (destination / "meta.json").read_text() == '{"scale": "full"}\n'


def test_a_run_configured_as_another_experiments_is_measured_once_and_published_in_both(tmp_path):
    """000's RTT x loss grid holds rtt's and rtt-loss's points: a repetition another experiment
    of the paper published at the same scale from a run configured alike (the run.json it ran
    with) is put back, marked shared.json with where it ran, not marked restored (it is new to
    this publication, so it publishes), counted as done by --list, and only one hop: what that
    experiment itself took from a third is not taken again."""
    from sojourn.reproduce import SHARED
    from sojourn.reproduce.publish import (RESTORED, estimated_seconds, has_unpublished, progress, remaining_seconds,
                                           restore_published, shared_reps)
    from sojourn.runner import layout

    def publish_rep(experiment_dir: Path, run, rep: str, config: dict, scale="full", state="complete"):
        directory = experiment_dir / run / rep
        directory.mkdir(parents=True)
        layout.mark(directory, state)
        (directory / "run.json").write_text(json.dumps({"config": config}))
        (directory / "summary.json").write_text('{"response_mean": 2.0}\n')
        (experiment_dir / "meta.json").write_text(json.dumps({"scale": scale}))
        return directory

    grid = tmp_path / "grid.toml"
    grid.write_text('name = "grid"\nrepetitions = 2\n[workload]\nrho = 0.5\n'
                    '[sweep]\nparameter = "workload.rho"\nvalues = [0.5, 0.7]\n')
    experiment = load_spec(grid)
    configs = experiment.configs_as_run()
    at = {run.sweep_value: configs[run.name] for run in experiment.runs}
    paper = tmp_path / "docs" / "000"
    publish_rep(paper / "rtt", "rho=0.5", "0", at[0.5])
    publish_rep(paper / "rtt", "rho=0.5", "1", at[0.5], state="partial")  # not complete: run here
    publish_rep(paper / "rtt", "rho=0.5", "2", at[0.5])  # beyond the grid's 2 repetitions
    publish_rep(paper / "mtu", "mtu=1500", "1", at[0.7], scale="quick")  # another scale
    other = dict(at[0.7], workload=dict(at[0.7]["workload"], seed=at[0.7]["workload"]["seed"] + 1))
    publish_rep(paper / "loss", "loss=0", "0", other)  # another seed: another trace
    taken = publish_rep(paper / "loss", "loss=0", "1", at[0.7])
    (taken / SHARED).write_text("{}")  # loss took it from a third experiment: not taken again
    published = paper / "grid"

    assert set(shared_reps(experiment, published, quick=False)) == {("rho=0.5", "0")}
    assert remaining_seconds(experiment, published, False, 1) == pytest.approx(estimated_seconds(experiment, 1))
    assert remaining_seconds(experiment, published, False, 1, share=True) == \
        pytest.approx(estimated_seconds(experiment, 1) * 3 / 4)
    assert "published 0 of 4 (and 1 shared with other experiments)" in progress(experiment, published, False, 1, True)
    results = tmp_path / "results"
    assert restore_published(experiment, published, results, quick=False) == 0  # sharing is asked for
    assert restore_published(experiment, published, results, quick=False, share=True) == 1
    put_back = results / "grid" / "rho=0.5" / "0"
    assert layout.is_complete(put_back) and not (put_back / RESTORED).is_file()
    assert json.loads((put_back / SHARED).read_text())["experiment"] == "rtt"
    named = json.loads((put_back / "run.json").read_text())
    assert (named["run"], named["sweep_value"], named["index"]) == ("rho=0.5", 0.5, 0) and named["config"] == at[0.5]
    assert has_unpublished(results / "grid")


def test_a_restored_run_keeps_its_own_figures_and_no_figure_of_several_runs(tmp_path):
    """A run every repetition of which was restored has no per-request records to draw: its
    own figures ("RUN: ...") come from the earlier publication, drawn from those repetitions;
    a figure of several runs is the new one, drawn without it, never the earlier one."""
    from sojourn.reproduce.publish import _carry_run_figures

    published, staging = tmp_path / "published", tmp_path / "staging"
    published.mkdir()
    staging.mkdir()
    earlier = [("CDF of every run", b"old cdf"), ("a: deciles", b"a's"), ("b: deciles", b"old b's")]
    for n, (caption, png) in enumerate(earlier, 1):
        (published / f"figure-{n:02d}.png").write_bytes(png)
    (published / "figures.json").write_text(json.dumps(
        [{"file": f"figure-{n:02d}.png", "caption": caption} for n, (caption, _) in enumerate(earlier, 1)]))
    (staging / "figure-01.png").write_bytes(b"new cdf")
    (staging / "figure-02.png").write_bytes(b"new b's")
    (staging / "figures.json").write_text(json.dumps([{"file": "figure-01.png", "caption": "CDF of every run"},
                                                      {"file": "figure-02.png", "caption": "b: deciles"}]))
    _carry_run_figures(published, staging, {"a"})
    figures = json.loads((staging / "figures.json").read_text())
    assert [f["caption"] for f in figures] == ["CDF of every run", "b: deciles", "a: deciles"]
    assert [(staging / f["file"]).read_bytes() for f in figures] == [b"new cdf", b"new b's", b"a's"]


def test_repetitions_that_failed_are_a_failure_not_nothing_new(tmp_path, monkeypatch):
    """A campaign whose repetitions all failed (a stale engine, a server that did not start)
    must not end as "nothing ran that is not published already" with exit 0: run_entry
    names the failed repetitions and returns 1; stopped ones (--stop-after) are not failures,
    and what ran before the deadline is published with the status that says rerun later."""
    from rich.console import Console

    from sojourn.reproduce import publish
    from sojourn.runner import cli as runner_cli
    from sojourn.runner import layout
    from sojourn.runner.experiment import NOT_STARTED, STOPPED_AT_DEADLINE, Outcome

    paper = load_paper("000")
    entry = paper.entry("baseline")
    states = {}
    monkeypatch.setattr(runner_cli, "run_with_progress",
                        lambda *args, **kwargs: (Outcome(tmp_path / "e", dict(states)), 0))
    console = Console(file=open(os.devnull, "w"), width=200, record=True)
    states.update({("fair", 0): "partial", ("srpt", 0): NOT_STARTED})
    assert publish.run_entry(console, paper, entry, tmp_path / "results", False, "sjx") == (None, 1)
    assert "1 repetition(s) did not complete (fair rep 0" in console.export_text()
    states.update({("fair", 0): NOT_STARTED})
    assert publish.run_entry(console, paper, entry, tmp_path / "results", False, "sjx")[1] == publish.NOTHING_NEW
    ran = tmp_path / "e" / "srpt" / "0"  # one new repetition, the other left by --stop-after
    ran.mkdir(parents=True)
    layout.mark(ran, "complete")
    states.update({("srpt", 0): "complete"})
    assert publish.run_entry(console, paper, entry, tmp_path / "results", False, "sjx") == (tmp_path / "e",
                                                                                            STOPPED_AT_DEADLINE)


def test_results_of_a_changed_spec_are_set_aside_and_the_new_version_runs(tmp_path, monkeypatch):
    """A reproduction whose spec changed after some repetitions completed (000's persistent
    connections got five client pools) runs the new version instead of refusing to run at
    all; the old results of the runs it changed are moved aside, not deleted. Partial results of the old
    version alone pin nothing (the runner replaces them)."""
    from rich.console import Console

    from sojourn.reproduce import publish
    from sojourn.runner import cli as runner_cli
    from sojourn.runner import layout
    from sojourn.runner.experiment import NOT_STARTED, Outcome

    paper = load_paper("000")
    entry = paper.entry("baseline")
    seen = []
    monkeypatch.setattr(runner_cli, "run_with_progress",
                        lambda console, experiment, root, *a, **k: seen.append(sorted(p.name for p in root.iterdir()))
                        or (Outcome(root / experiment.name, {("fair", 0): NOT_STARTED}), 0))
    old = tmp_path / "results" / "reproduce" / "000" / "000-baseline"
    (old / "fair" / "0").mkdir(parents=True)
    (old / "spec.toml").write_text("# an older version\n")
    layout.mark(old / "fair" / "0", "partial")
    console = Console(file=open(os.devnull, "w"), width=200, record=True)
    publish.run_entry(console, paper, entry, tmp_path / "results", False, "sjx")
    assert seen[-1] == ["000-baseline"] and "changed" not in console.export_text()  # nothing complete: kept
    layout.mark(old / "fair" / "0", "complete")
    publish.run_entry(console, paper, entry, tmp_path / "results", False, "sjx")
    aside = [p for p in old.parent.iterdir() if p.name.startswith("000-baseline.before-")]
    assert len(aside) == 1 and layout.is_complete(aside[0] / "fair" / "0")
    assert (aside[0] / "spec.toml").read_text() == "# an older version\n"
    assert seen[-1] == sorted(["000-baseline", aside[0].name]) and not (old / "fair").exists()  # run afresh
    told = console.export_text()
    assert "configures fair otherwise than when they ran" in told and f"their results are kept in {aside[0].name}" in told


@pytest.mark.skipif(os.geteuid() != 0, reason="sojourn reproduce refuses testbed experiments without root")
def test_each_doc_of_a_campaign_reads_what_was_published_before_it(tmp_path, monkeypatch):
    """The doc written after an experiment is published must read the published results
    afresh: a context kept from the previous doc had cached the next experiment's old
    repetitions, and a campaign's doc showed rto's compressed rows after its paper-scale
    repetitions were published."""
    import argparse

    from sojourn.reproduce import cli, publish

    events = []

    class Recording(cli.Context):
        def __init__(self, *args, **kwargs):
            events.append("context")
            super().__init__(*args, **kwargs)

    monkeypatch.setattr(cli, "Context", Recording)
    monkeypatch.setattr(publish, "run_entry", lambda console, paper, entry, *rest, **options: (tmp_path / entry.name, 0))
    monkeypatch.setattr(publish, "publish", lambda paper, entry, *rest: events.append(f"published {entry.name}"))
    monkeypatch.setattr(cli, "_write_docs", lambda console, paper, ctx: events.append("doc"))
    parser = argparse.ArgumentParser()
    cli.register(parser)
    args = parser.parse_args(["000", "--only", "baseline", "--only", "rto", "--docs", str(tmp_path / "docs"),
                              "--results", str(tmp_path / "results")])
    assert cli.main(args) == 0
    assert events == ["context", "published baseline", "context", "doc", "published rto", "context", "doc"]


@pytest.mark.skipif(os.geteuid() != 0, reason="sojourn reproduce refuses testbed experiments without root")
def test_fresh_runs_the_named_experiments_anew_without_their_publication(tmp_path, monkeypatch):
    """For results the code has changed under (000's overload ran with a server that cut off
    starved responses): --fresh neither restores the publication nor keeps local results, and
    is refused without --only, which would run every experiment of the paper again."""
    import argparse

    from sojourn.reproduce import cli, publish

    calls = []
    monkeypatch.setattr(publish, "run_entry", lambda console, paper, entry, results, quick, prefix, concurrency,
                        published, stop_at, fresh=False: calls.append((entry.name, published, fresh)) or (None, 1))
    parser = argparse.ArgumentParser()
    cli.register(parser)

    def main(*argv: str) -> int:
        return cli.main(parser.parse_args(["000", *argv, "--docs", str(tmp_path / "docs"),
                                           "--results", str(tmp_path / "results")]))
    assert main("--fresh") == 2 and calls == []
    main("--only", "overload", "--fresh")
    assert calls == [("overload", None, True)]
    main("--only", "overload")
    assert calls[-1] == ("overload", tmp_path / "docs" / "000" / "overload", False)


def test_quick_refuses_to_replace_a_paper_scale_publication(tmp_path, monkeypatch, capsys):
    """`--quick` publishes where the paper-scale results are: it would have replaced 002's
    delay (three repetitions of 60-s levels) by one compressed repetition. It is refused
    before anything runs, naming the experiment; elsewhere (--docs) it runs."""
    import argparse

    from sojourn.reproduce import cli, publish

    shutil.copytree(DOCS / "002" / "delay", tmp_path / "docs" / "002" / "delay")
    calls = []
    monkeypatch.setattr(publish, "run_entry", lambda console, paper, entry, *rest, **options:
                        calls.append(entry.name) or (None, 1))
    parser = argparse.ArgumentParser()
    cli.register(parser)

    def main(docs: Path) -> int:
        return cli.main(parser.parse_args(["002", "--quick", "--only", "delay", "--docs", str(docs),
                                           "--results", str(tmp_path / "results")]))
    assert main(tmp_path / "docs") == 2 and calls == []
    assert "delay of 002 is published at the paper's scale" in " ".join(capsys.readouterr().out.split())
    if os.geteuid() == 0:  # a testbed experiment needs root to be started at all
        main(tmp_path / "elsewhere")
        assert calls == ["delay"]


def _published_003(tmp_path: Path, experiment: str) -> Callable[[], Row]:
    """003's published ``experiment`` copied under ``tmp_path``, and a reader of its row
    "DWFS bronze / FIFO mean response time, 40 clients" from the copy."""
    paper = load_paper("003")
    _published(tmp_path, "003", experiment)
    return lambda: _the_row(paper, tmp_path, experiment, "DWFS bronze / FIFO mean response time, 40 clients")


def test_a_closed_loop_reason_is_given_only_when_littles_law_predicts_the_ratio(tmp_path):
    """003 with clients that do not think: DWFS bronze / FIFO response is FIFO's bronze request
    rate over DWFS's (Little's law), so the row carries that as its measured reason; with
    DWFS's bronze rate made FIFO's the prediction (1) misses the measured 1.51 and that reason
    is not claimed."""
    experiment = "section5-demand20-nothink"
    bronze_row = _published_003(tmp_path, experiment)
    row = bronze_row()
    assert row.verdict() == "opposite" and row.reason() == "measured" and "Little's law" in row.why_text()
    fifo = [json.loads(path.read_text()) for path in sorted((tmp_path / "003" / experiment).glob(
        "fifo-users=40/*/summary.json"))]
    for path, theirs in zip(sorted((tmp_path / "003" / experiment).glob("dwfs-users=40/*/summary.json")), fifo):
        summary = json.loads(path.read_text())
        bronze = next(c for c in summary["sessions"]["classes"] if c["name"] == "bronze")
        bronze["requests"] = next(c for c in theirs["sessions"]["classes"] if c["name"] == "bronze")["requests"]
        path.write_text(json.dumps(summary))
    row = bronze_row()
    assert row.verdict() == "opposite" and "Little's law" not in row.why_text()


def test_a_class_split_reason_needs_the_papers_gain_and_a_wider_split(tmp_path):
    """003 with think time, 40 clients: DWFS bronze is slower than FIFO where the paper's is
    about the same. The measured reason: DWFS's gain over FIFO on all requests is the paper's,
    split wider between gold and bronze. It is withdrawn when the gain is not the paper's
    (FIFO made as fast as DWFS) and when the split is not wider (gold made as slow as bronze)."""
    experiment = "section5-demand"
    bronze_row = _published_003(tmp_path, experiment)
    row = bronze_row()
    assert row.verdict() == "opposite" and row.reason() == "measured" and "split the gain wider" in row.why_text()

    def summaries(run: str) -> list[Path]:
        return sorted((tmp_path / "003" / experiment).glob(f"{run}/*/summary.json"))

    originals = {path: path.read_text() for path in summaries("*-users=40")}
    for fifo, dwfs in zip(summaries("fifo-users=40"), summaries("dwfs-users=40")):
        summary = json.loads(fifo.read_text())
        summary["sessions"]["overall"]["response_mean_s"] = json.loads(dwfs.read_text())["response_mean"]
        fifo.write_text(json.dumps(summary))
    row = bronze_row()
    assert row.verdict() == "opposite" and row.reason() == "unexplained"

    for path, text in originals.items():
        path.write_text(text)
    for dwfs in summaries("dwfs-users=40"):
        summary = json.loads(dwfs.read_text())
        classes = {c["name"]: c for c in summary["sessions"]["classes"]}
        classes["gold"]["response_mean_s"] = classes["bronze"]["response_mean_s"]
        dwfs.write_text(json.dumps(summary))
    row = bronze_row()
    assert row.verdict() == "opposite" and row.reason() == "unexplained"


def _published(tmp_path: Path, paper: str, experiment: str) -> Path:
    """A copy of ``paper``'s published ``experiment`` (docs/reproduction) under ``tmp_path``,
    where a test may change it; the copy's path."""
    return Path(shutil.copytree(DOCS / paper / experiment, tmp_path / paper / experiment))


def _in_summary(change: Callable[[dict], None]) -> Callable[[Path], None]:
    """Changes a repetition's summary.json in place."""
    def breaking(rep: Path) -> None:
        summary = json.loads((rep / "summary.json").read_text())
        change(summary)
        (rep / "summary.json").write_text(json.dumps(summary))
    return breaking


def _in_counters(change: Callable[[pd.DataFrame], None]) -> Callable[[Path], None]:
    """Changes a repetition's counters.csv in place."""
    def breaking(rep: Path) -> None:
        counters = pd.read_csv(rep / "counters.csv")
        change(counters)
        counters.to_csv(rep / "counters.csv", index=False)
    return breaking


def _triple_mm_processing(summary: dict) -> None:
    next(stage for stage in summary["sessions"]["anatomy"] if stage["stage"] == "MM")["processing_mean_s"] *= 3


def _block_a_thread_every_50th_sample(counters: pd.DataFrame) -> None:
    counters.loc[::50, "server_blocked"] = 1


def _halve_uplink_use(counters: pd.DataFrame) -> None:
    counters["uplink_util"] /= 2


def _establish_only_100_connections(counters: pd.DataFrame) -> None:
    counters["established"] = 100


def _give_the_server_its_quota(counters: pd.DataFrame) -> None:
    counters["server_cpu"] = 0.5


@pytest.mark.parametrize("paper_tag, experiment, claim, verdict, words, broken, breaking", [
    # 000 (J): FAIR's 215 SYN drops in one repetition were all accept-queue overflows (the
    # queue at 513 of 512); no longer so once the kernel counts fewer overflows than drops.
    ("000", "realistic", "FAIR SYN drops under W1, realistic set-up", "missed", "at the full accept queue", "fair",
     _in_counters(lambda counters: counters.__setitem__("listen_overflows", 0))),
    # 003 Table 7: MM grew 4.2x (paper 1.44x) with its processing unchanged, queueing behind
    # the SR requests that timeout-10 dropped before they ran; no longer so once MM's own
    # processing changes too.
    ("003", "timeouts", "Table 7: MM latency, timeout 20 s / 10 s", "same direction beyond 2x",
     "SR completed nothing at timeout-10", "timeout-20", _in_summary(_triple_mm_processing)),
    # 003 Table 7 with the costs as demand: BR did not grow because the 10-s timeout dropped
    # 0.3% of requests and BR's queue stayed 0.16; no longer so at a 5% drop rate.
    ("003", "timeouts-demand", "Table 7: BR latency, timeout 20 s / 10 s (costs as CPU demand)", "opposite",
     "scarcely acted", "timeout-10", _in_summary(lambda summary: summary["sessions"]["overall"].update(drop_rate=0.05))),
    # 001 Table 2: nginx's capacity was sojourn's (0.98; the new Flash 1.28x the old) because
    # both probes filled the 1 Gbit/s link; no longer so on a link twice as fast.
    ("001", "variants", "sojourn / nginx capacity (requests/s)", "opposite", "capacities were the link's",
     "nginx-load_fraction=0.9", _in_summary(lambda summary: summary.update(link_bps=summary["link_bps"] * 2))),
    # 001 §6.2: apache2 was rarely idle (0.04 of the samples, paper 0.2), the paper's idle time
    # being blocking on disk and locks, and no thread blocked here; no longer so once a thread
    # is blocked in 2% of the samples.
    ("001", "apache-burst", "256 processes: share of one-second samples with no runnable process",
     "same direction beyond 2x", "blocked (state D)", "prefork-256", _in_counters(_block_a_thread_every_50th_sample)),
    # 001 §6.2: 1024 processes' run queue stayed short because the link set the pace (0.89 of
    # its rate carried); no longer so when the uplink carried half its rate.
    ("001", "apache-burst", "1024 processes: median load level", "missed", "paced by the link", "prefork-1024",
     _in_counters(_halve_uplink_use)),
    # 001 Figs. 1-2: apache2-prefork completed a quarter of what it was offered at every load
    # because its 256 processes were held by 1020 client connections idling between requests;
    # no longer so once fewer connections than processes were established.
    ("001", "latency", "apache2-prefork: least share of offered requests completed", "missed",
     "256 processes for the generator's 1020 client connections", "apache2-prefork-load_fraction=*",
     _in_counters(_establish_only_100_connections)),
    # 001: with 1024 processes, one per client, apache2-prefork still completed 68% at 0.95
    # because the clients held 1534 connections; no longer so once only 100 were established.
    ("001", "latency", "apache2-prefork-1024: least share of offered requests completed", "missed",
     "a client whose connection is busy opens another", "apache2-prefork-1024-load_fraction=*", _in_counters(_establish_only_100_connections)),
    # ...and because held to one connection a client, the same 1024 processes completed all they
    # were offered (the isolating variant); no longer so once that variant left half unserved.
    ("001", "latency", "apache2-prefork-1024: least share of offered requests completed", "missed",
     "with each client held to one connection", "apache2-prefork-1024-one-conn-load_fraction=*",
     _in_summary(lambda summary: summary.update(incomplete=summary["completed"]))),
    # 001 Figs. 1-2: its mean fell with load because the completed requests waited for a
    # process before their first byte; no longer so once they spent most of it after.
    ("001", "latency", "apache2-prefork: mean latency at load 0.95 / at 0.2", "missed", "waiting for a process",
     "apache2-prefork-load_fraction=*", _in_summary(lambda summary: summary.update(ttfb_mean=summary["response_mean"] / 4))),
    # 001 Figs. 3-4: sojourn answered 85% within 10 ms (the original Flash "very few") because it
    # returned 2.5 ready events per epoll_wait, not the original's 61; no longer so at 61.
    ("001", "latency", "sojourn: share of responses within 10 ms at load 0.9", "missed", "ready events per select()",
     "sojourn-load_fraction=0.9", _in_summary(lambda summary: summary["after_probe"].update(events_per_wait_mean=61.0))),
    # 001 Figs. 1-2: nginx's mean grew 23-96 times from load 0.2 to 0.95 in every repetition, the
    # interval of three ratios this spread reaching below 1; no longer so once one fell.
    ("001", "latency", "nginx: mean latency at load 0.95 / at 0.2", "missed", "grew in every repetition",
     "nginx-load_fraction=0.95", _in_summary(lambda summary: summary.update(response_mean=0.0005))),
    # 001 Fig. 18: nonpersistent connections' means followed the generator's lateness (r 0.90
    # over 18 repetitions), 1 inside the interval; no longer so once the lag fell as they rose.
    # 003 §5.2: DWFS's gold drop rate at 60 clients, 0.52% against the 0.5% bound, holds the
    # paper's own 0.44% in its interval; no longer so once ours is 2%.
    ("003", "section5-demand20", "DWFS gold request timeout (drop) rate, 60 clients", "missed",
     "the paper's own 0.44% is inside our 90% interval", "dwfs-users=60",
     _in_summary(lambda summary: [c.update(drop_rate=0.02)
                                  for c in summary["sessions"]["classes"] if c["name"] == "gold"])),
    # 003 §5.2 at k = 1: DWFS served 1.12x FIFO's requests with 57% of its CPU; FIFO's worker
    # was saturated and DWFS's count was what its thinking users sent (Little's law) less its
    # drops, 1.06x; no longer so once DWFS is said to have dropped half.
    ("003", "section5", "DWFS / FIFO requests served, 60 clients", "missed", "its users set its count",
     "dwfs-users=60", _in_summary(lambda summary: summary["sessions"]["overall"].update(drop_rate=0.5))),
    # 001 Fig. 18: persistent connections' transfer after the first byte was 3% of the
    # unclamped mean, leaving a clamp little to act on; no longer so once it is half.
    ("001", "cwnd", "persistent: mean latency unclamped / with the best clamp", "same direction beyond 2x",
     "the transfer after the first byte took", "persistent-cwnd_clamp=0",
     _in_summary(lambda summary: summary.update(ttfb_mean=summary["response_mean"] / 2))),
    ("001", "cwnd", "nonpersistent: mean latency unclamped / with the best clamp", "missed",
     "the mean rose with how late the generator sent", "nonpersistent-cwnd_clamp=*",
     _in_summary(lambda summary: summary.update(lag_p99=1e-5 / summary["response_mean"]))),
    # 002 §4.3: SACK shortened 1 KB responses (NewReno 1.14x, paper no gain) by the tail loss
    # probes Linux sends only on SACK connections; no longer so once NewReno's sent some too.
    ("002", "sack-sizes", "1 KB files: NewReno / SACK", "missed", "tail loss probe", "newreno-1k",
     _in_summary(lambda summary: summary.update(loss_probes=500.0))),
    # 002 Fig. 8: 1 KB capacity through the emulator was 0.80 of wired because the emulator
    # took CPU on the server's host (the server used 0.30 CPU against 0.48); no longer so
    # once the server used its whole quota through the emulator too.
    ("002", "scalability", "1 KB files: capacity through the emulator", "missed", "shares the server's host",
     "emulated-1k", _in_counters(_give_the_server_its_quota)),
    # 002 Fig. 10: at 6% loss sojourn's CPU was higher at the last level than at 256 users in
    # every repetition (1.34-2.26 times), the interval of three reaching below 1; no longer so
    # once the last level used less than 256 users did.
    ("002", "loss", "sojourn: server CPU at the last level / at 256 users, 6% loss (Fig. 10)", "missed",
     "the server's CPU grew in every repetition", "sojourn-loss=0.06",
     _in_summary(lambda summary: summary["levels"][-1].update(server_cpu=0.01))),
])
def test_a_reason_is_claimed_only_while_its_premise_holds(tmp_path, paper_tag, experiment, claim, verdict, words,
                                                          broken, breaking):
    """Each row carries its measured reason on the published data, and loses it (unexplained,
    same verdict) once one run's summaries or counters are changed so that the premise fails."""
    paper = load_paper(paper_tag)
    _published(tmp_path, paper_tag, experiment)
    row = _the_row(paper, tmp_path, experiment, claim)
    assert row.verdict() == verdict and row.reason() == "measured" and words in row.why_text()
    for rep in (tmp_path / paper_tag / experiment).glob(f"{broken}/*/"):
        breaking(rep)
    row = _the_row(paper, tmp_path, experiment, claim)
    assert row.verdict() == verdict and row.reason() == "unexplained"


def test_table2s_narrower_spread_is_put_down_to_co_only_while_weighting_co_changes_little(tmp_path):
    """003 Table 2: the paper's worst assignments weight CO (759 and 394 against 2330); CO
    completed 3% of the requests here, and weighting it moved ours by 2% at most: the
    measured reason of best / worst 3.6 (paper 8.4), withdrawn once weighting CO costs
    (1,5,1,1) two thirds of its productivity, as in the paper."""
    paper = load_paper("003")
    _published(tmp_path, "003", "productivity-study")
    claim = "Table 2: best / worst assignment's productivity"
    row = _the_row(paper, tmp_path, "productivity-study", claim)
    assert row.verdict() == "same direction beyond 2x" and row.reason() == "measured"
    assert "CO completed 3.1% of (1,1,1,1)'s requests" in row.why_text()
    _scale_productivity(tmp_path, 20, "1,5,1,1", 1 / 3)
    row = _the_row(paper, tmp_path, "productivity-study", claim)
    assert row.reason() == "unexplained"


def _scale_productivity(tmp_path: Path, clients: int, weights: str, factor: float) -> None:
    """Multiplies round robin's productivity with ``weights`` at ``clients`` in the copied
    study.csv of 003's productivity-study by ``factor``."""
    study_csv = tmp_path / "003" / "productivity-study" / "study.csv"
    study = pd.read_csv(study_csv)
    chosen = (study["clients"] == clients) & (study["policy"] == "rr") & (study["weights"] == weights)
    study.loc[chosen, "productivity"] = (study.loc[chosen, "productivity"] * factor).round().astype(int)
    study.to_csv(study_csv, index=False)


def test_table2s_ratio_is_put_down_to_the_load_where_a_client_count_near_the_papers_gives_it(tmp_path):
    """003 Table 2 prints completed and timed out beside the productivity. At 20 clients
    (1,1,1,1) timed out 0.58 requests per completion against the paper's 0.24 (747 / 3077), and
    (5,1,1,1) / (1,1,1,1) productivity was 2.53 (paper 1.42); at 15 clients, the nearest load
    (0.31 per completion), 1.62: the measured reason, for the timed-out ratio too (0.70 against
    0.825). Withdrawn once the nearest load's ratio departs as far as 20 clients' does."""
    paper = load_paper("003")
    _published(tmp_path, "003", "productivity-study")
    claim = "Table 2: (5,1,1,1) / (1,1,1,1) productivity"
    row = _the_row(paper, tmp_path, "productivity-study", claim)
    assert row.verdict() == "same direction beyond 2x" and row.reason() == "measured"
    assert "(1,1,1,1) completed 8594 and timed out 5005 (paper 3077, 747)" in row.why_text()
    assert "timed out 0.58 requests per completion against the paper's 0.24" in row.why_text()
    assert "at 15 clients, where (1,1,1,1) timed out 0.31 per completion" in row.why_text()
    timed_out = _the_row(paper, tmp_path, "productivity-study", "Table 2: (5,1,1,1) / (1,1,1,1) requests timed out")
    assert timed_out.reason() == "measured" and "timed out was 0.70 against the paper's 0.825" in timed_out.why_text()
    _scale_productivity(tmp_path, 15, "5,1,1,1", 1.6)  # 15 clients' ratio 2.6, as far off as 20's
    assert _the_row(paper, tmp_path, "productivity-study", claim).reason() == "unexplained"


def test_srpts_largest_1pct_are_put_down_to_backed_off_timers_or_else_to_their_transfer(tmp_path):
    """000 §5.2 under W4: SRPT's largest 1% took 1.23x FAIR's (bound 1.1) though the ideal
    SRPT gives them half of PS's. With the RTO's backoff capped at 3 s (`workloads-largest`,
    in both namespaces or by the server alone) they took 0.95x and 0.94x, their first byte
    coming about 2 s sooner: the measured reason. Without
    that run, `workloads-anatomy`'s split stands in while their transfer is the slow part
    against the ideal, and is withdrawn once their first byte came as late as their last."""
    paper = load_paper("000")
    for experiment in ("workloads", "workloads-largest", "workloads-anatomy"):
        _published(tmp_path, "000", experiment)
    claim = "SRPT / FAIR mean of the largest 1%, W4"
    row = _the_row(paper, tmp_path, "workloads", claim)
    assert row.verdict() == "missed" and row.reason() == "measured"
    assert "with the RTO's backoff capped at 3 s 0.95x FAIR's" in row.why_text()
    assert "with the server capping its connections' RTO backoff at 3 s 0.94x FAIR's" in row.why_text()
    assert "their first byte came after 2.21 s (SRPT 4.08 s, `workloads-anatomy`)" in row.why_text()
    for capped in (tmp_path / "000" / "workloads-largest").glob("srpt-*rto-max3s-*"):
        shutil.rmtree(capped)
    row = _the_row(paper, tmp_path, "workloads", claim)
    assert row.reason() == "measured" and "where the time went" in row.why_text()
    # The backed-off timers that may hold the transfer, from the run's own counters.
    assert "the largest RTO among SRPT's sockets averaged 23.9 s" in row.why_text()
    assert "against FAIR's 0.22 s" in row.why_text()
    for path in (tmp_path / "000" / "workloads-anatomy").glob("srpt-profile=W4/*/summary.json"):
        summary = json.loads(path.read_text())
        summary["ttfb_largest_1pct_mean"] = summary["response_largest_1pct_mean"]
        path.write_text(json.dumps(summary))
    assert _the_row(paper, tmp_path, "workloads", claim).reason() == "unexplained"


def test_realistic_largest_1pct_are_told_by_their_own_runs_not_by_the_baselines_factors(tmp_path):
    """000 §5.2, realistic set-up, W4: SRPT's largest 1% took 1.27x FAIR's. The factors of
    `workloads-largest` ran the baseline set-up and are no reason for it, even when published;
    its own runs are: FAIR never completed about half of the requests at or above the 99th
    percentile of size, so its largest completed 1% were smaller. Withdrawn once FAIR's were as
    large as SRPT's."""
    paper = load_paper("000")
    for experiment in ("workloads-realistic", "workloads-largest", "workloads-anatomy"):
        _published(tmp_path, "000", experiment)
    claim = "SRPT / FAIR mean of the largest 1%, W4"
    row = _the_row(paper, tmp_path, "workloads-realistic", claim)
    assert row.verdict() == "missed" and row.reason() == "measured"
    assert "the requests compared differ" in row.why_text()
    assert "workloads-largest" not in row.why_text() and "workloads-anatomy" not in row.why_text()
    for rep in (tmp_path / "000" / "workloads-realistic").glob("fair-profile=W4/*/"):
        _in_summary(lambda summary: summary.update(size_largest_1pct_mean=1e6))(rep)
    row = _the_row(paper, tmp_path, "workloads-realistic", claim)
    assert row.verdict() == "missed" and row.reason() == "unexplained"
    # Under W7 SRPT's largest 1% that completed took 0.41x the ideal SRPT of every request
    # (users abort at 7 s): no time lost against the ideal, so no "where the time went".
    row = _the_row(paper, tmp_path, "workloads-realistic", "SRPT / FAIR mean of the largest 1%, W7")
    assert row.verdict() == "missed" and row.reason() == "unexplained"
    assert "ours took 0.41x the ideal under SRPT" in row.why_text() and "where the time went" not in row.why_text()


def _realistic_why_w7(tmp_path: Path) -> Path:
    """Copies of `workloads-realistic` and `workloads-realistic-why`, the latter with SRPT's run
    with 2000 slots under W7 made from the published SRPT of `workloads-realistic` (the tests
    set the figures they read); the copy of `workloads-realistic-why`."""
    for experiment in ("workloads-realistic", "workloads-realistic-why"):
        _published(tmp_path, "000", experiment)
    why = tmp_path / "000" / "workloads-realistic-why"
    shutil.rmtree(why / "srpt-slots2000-profile=W7", ignore_errors=True)
    _publish_as(DOCS / "000" / "workloads-realistic" / "srpt-profile=W7" / "0", why, "srpt-slots2000-profile=W7")
    return why


def test_realistic_largest_1pct_are_put_down_to_a_factor_changed_for_both_policies(tmp_path):
    """000 §5.2, realistic set-up, W7: SRPT's largest 1% took 1.48x FAIR's, FAIR having never
    completed 30% of its requests and SRPT 24%. With a factor changed for both policies
    (`workloads-realistic-why`: 2000 connection slots), a ratio within the bound is the measured
    reason; one beyond it leaves the row unexplained, saying what it gave. W8 without SRPT's
    factor run (FAIR's alone) says nothing of the pair. (The factor runs' figures are set here.)"""
    paper = load_paper("000")
    why = _realistic_why_w7(tmp_path)

    def with_srpt_over_fair(ratio: float) -> Row:
        fair = json.loads(next(why.glob("fair-slots2000-profile=W7/*/summary.json")).read_text())
        for rep in why.glob("srpt-slots2000-profile=W7/*/"):
            _in_summary(lambda summary: summary.update(
                response_largest_1pct_mean=ratio * fair["response_largest_1pct_mean"]))(rep)
        return _the_row(paper, tmp_path, "workloads-realistic", "SRPT / FAIR mean of the largest 1%, W7")

    row = with_srpt_over_fair(0.96)
    assert row.verdict() == "missed" and row.reason() == "measured"
    assert "with 2000 connection slots instead of 350 for both, SRPT / FAIR 0.96 meets the bound" in row.why_text()
    assert re.search(r"against \d+\.\d% and \d+\.\d% in these runs", row.why_text())
    row = with_srpt_over_fair(1.44)
    assert row.reason() == "unexplained" and "SRPT / FAIR 1.44," in row.why_text()
    assert "meets the bound" not in row.why_text()
    shutil.rmtree(why / "srpt-slots2000-profile=W8", ignore_errors=True)
    row = _the_row(paper, tmp_path, "workloads-realistic", "SRPT / FAIR mean of the largest 1%, W8")
    assert row.reason() == "unexplained" and "for both" not in row.why_text()


def test_the_least_realistic_ratio_is_put_down_to_a_factor_changed_for_both_policies_once_it_accounts(tmp_path):
    """000 §5.2, realistic set-up: FAIR / SRPT was least under W7 (1.07, the paper's least 1.4).
    With a factor changed for both policies (`workloads-realistic-why`), a ratio within 2x of
    the paper's, in its departure from 1 too, or within the paper's range over its workloads
    (1.4-4), is the measured reason; one that is neither leaves the row unexplained, saying what
    it gave. (The factor runs' means are set here.)"""
    paper = load_paper("000")
    why = _realistic_why_w7(tmp_path)

    def with_fair_over_srpt(ratio: float) -> Row:
        srpt = json.loads(next(why.glob("srpt-slots2000-profile=W7/*/summary.json")).read_text())["response_mean"]
        for rep in why.glob("fair-slots2000-profile=W7/*/"):
            _in_summary(lambda summary: summary.update(response_mean=ratio * srpt))(rep)
        return _the_row(paper, tmp_path, "workloads-realistic", "least FAIR / SRPT over the workloads")

    row = with_fair_over_srpt(1.5)
    assert row.ours.at == "profile=W7" and row.verdict() == "same direction beyond 2x"
    assert row.reason() == "measured"
    assert "with 2000 connection slots instead of 350 for both, FAIR / SRPT 1.50 within 2x of the paper's 1.4 or in " \
        "its range 1.4-4," in row.why_text()
    # Beyond 2x of the paper's least, but within the range it printed for all its workloads.
    assert with_fair_over_srpt(2.9).reason() == "measured"
    assert with_fair_over_srpt(4.5).reason() == "unexplained"
    row = with_fair_over_srpt(1.1)
    assert row.reason() == "unexplained" and "FAIR / SRPT 1.10," in row.why_text()
    assert row.why_text().endswith("none of which accounts for the miss")


def test_the_rtt_effect_under_loss_is_told_in_seconds_where_its_ratio_misses(tmp_path):
    """000 (D) right: "the negative effect of a given RTT is accentuated under high loss". As
    ratios to the 0-ms mean SRPT's effect under 5% loss fell (0.29), but 150 ms added more
    seconds under the loss than without it: the measured reason, withdrawn once it adds fewer.
    FAIR's mean does not rise with the RTT at all: its handshake's share is told apart."""
    paper = load_paper("000")
    grid = _published(tmp_path, "000", "rtt-loss-grid")
    claim = "SRPT: (150 ms / 0 ms at 5% loss) / (150 ms / 0 ms without loss)"
    row = _the_row(paper, tmp_path, "rtt-loss-grid", claim)
    assert row.verdict() == "missed" and row.reason() == "measured"
    assert "accentuated in seconds" in row.why_text()
    clean = {rtt: json.loads(next(grid.glob(f"srpt-loss0-rtt_ms={rtt}/*/summary.json")).read_text())["response_mean"]
             for rtt in (0, 150)}
    for rep in grid.glob("srpt-loss5-rtt_ms=150/*/"):  # 150 ms adds half the seconds it adds without loss
        _in_summary(lambda summary: summary.update(response_mean=0.5 * (clean[150] - clean[0]) + json.loads(
            next(grid.glob("srpt-loss5-rtt_ms=0/*/summary.json")).read_text())["response_mean"]))(rep)
    row = _the_row(paper, tmp_path, "rtt-loss-grid", claim)
    assert row.reason() == "unexplained" and row.why_text().endswith("the RTT adds fewer seconds under loss")
    # FAIR's mean does not rise with the RTT: its handshake got shorter (fewer SYN-ACKs and SYNs
    # dropped) while the rest of the response got longer; unexplained once the handshake does not.
    claim = "FAIR: (150 ms / 0 ms at 5% loss) / (150 ms / 0 ms without loss)"
    fair = _the_row(paper, tmp_path, "rtt-loss-grid", claim)
    assert fair.reason() == "measured" and "the handshake got shorter with the RTT" in fair.why_text()
    assert "(synacks_dropped)" in fair.why_text() and "past the handshake 150 ms added +" in fair.why_text()
    for rep in grid.glob("fair-loss0-rtt_ms=150/*/"):  # more handshake packets dropped at 150 ms: no reason
        _in_summary(lambda summary: summary.update(syn_drops=summary["syn_drops"] + 100_000))(rep)
    assert _the_row(paper, tmp_path, "rtt-loss-grid", claim).reason() == "unexplained"
    for rep in grid.glob("fair-loss0-rtt_ms=150/*/"):
        _in_summary(lambda summary: summary.update(syn_drops=summary["syn_drops"] - 100_000))(rep)
    assert _the_row(paper, tmp_path, "rtt-loss-grid", claim).reason() == "measured"
    for rep in grid.glob("fair-loss5-rtt_ms=150/*/"):
        _in_summary(lambda summary: summary.update(connect_mean=10.0))(rep)
    fair = _the_row(paper, tmp_path, "rtt-loss-grid", claim)
    assert fair.reason() == "unexplained" and fair.why_text().endswith("the RTT does not raise the mean")


def test_an_incomplete_share_is_the_workloads_own_when_its_ideal_schedule_keeps_as_many_past_the_abort(tmp_path):
    """000 §5.2: 10-15% of requests never completed at load 0.9, under FAIR and SRPT alike. Under
    W4 SRPT lost 0.2% here, all of the largest 1%. The ideal fluid SRPT of W4's arrivals and
    sizes, each request's transfer over the 100-ms, 5%-loss path added, keeps 0.23% past the
    first 7-s abort, PS 0.64% (summary.json ideal share_past_abort_on_path): SRPT's share is the
    workload's own, the paper's 20x beyond either. FAIR lost 3.4%, 5x its ideal PS: the figures
    are told, the reason stays unexplained. Not claimed once the ideal keeps far fewer than
    ours, nor once it keeps as many as the paper's; without the path's share the schedule's
    alone (share_past_abort) stands in."""
    paper = load_paper("000")
    published = _published(tmp_path, "000", "workloads-realistic")

    def past_abort(ps: float, srpt: float, key: str = "share_past_abort_on_path") -> None:
        for rep in published.glob("*-profile=W4/*/"):
            _in_summary(lambda summary: summary["ideal"]["ps"].update({key: ps}))(rep)
            _in_summary(lambda summary: summary["ideal"]["srpt"].update({key: srpt}))(rep)

    def row(policy: str) -> Row:
        return _the_row(paper, tmp_path, "workloads-realistic", f"{policy}: share of requests incomplete, W4")

    past_abort(0.0064, 0.0023)
    srpt = row("SRPT")
    assert srpt.reason() == "measured" and "is the workload's own under its ideal SRPT" in srpt.why_text()
    assert ("each request's transfer over the path added (one TCP connection carries 79 KB/s at 100 ms and 5% loss"
            in srpt.why_text() and "keep 0.640% (PS) and 0.230% (SRPT) of its requests past the first abort at 7 s"
            in srpt.why_text())
    fair = row("FAIR")
    assert fair.reason() == "unexplained" and "keep 0.640% (PS)" in fair.why_text()
    past_abort(0.0064, 0.0004)  # the ideal SRPT keeps a fifth of ours
    assert row("SRPT").reason() == "unexplained"
    past_abort(0.1, 0.0023)  # a schedule keeps as many as the paper's lost: not beyond the schedule
    assert row("SRPT").reason() == "unexplained"
    for rep in published.glob("*-profile=W4/*/"):  # summaries from before the path's share
        _in_summary(lambda summary: [summary["ideal"][p].pop("share_past_abort_on_path", None) for p in ("ps", "srpt")])(rep)
    past_abort(0.0051, 0.0018, key="share_past_abort")
    srpt = row("SRPT")
    assert srpt.reason() == "measured" and "keep 0.510% (PS) and 0.180% (SRPT)" in srpt.why_text()
    assert "over the path" not in srpt.why_text()


def test_fairs_excess_over_the_workloads_own_share_is_put_down_to_the_factor_that_removes_it(tmp_path):
    """000 §5.2, W4: FAIR lost 3.4%, 5x what its ideal PS keeps past the first abort with the
    path added (0.64%), the paper 12.5%. With 2000 connection slots (`workloads-realistic-why`)
    FAIR lost 1.03%, 1.62x the ideal's: what ours lost beyond the workload's own went to the 350
    slots, measured; not once that run too lies beyond 2x of the ideal's."""
    paper = load_paper("000")
    for experiment in ("workloads-realistic", "workloads-realistic-why"):
        _published(tmp_path, "000", experiment)
    claim = "FAIR: share of requests incomplete, W4"
    row = _the_row(paper, tmp_path, "workloads-realistic", claim)
    assert row.reason() == "measured"
    assert "with 2000 connection slots instead of 350 ours is 1.62x its ideal PS's, the workload's own" in row.why_text()
    for rep in (tmp_path / "000" / "workloads-realistic-why" / "fair-slots2000-profile=W4").glob("*/"):
        _in_summary(lambda summary: summary.update(incomplete=0.02 * summary["requests"]))(rep)
    assert _the_row(paper, tmp_path, "workloads-realistic", claim).reason() == "unexplained"


def test_an_incomplete_share_is_put_down_to_the_one_factor_run_that_brings_it_within_the_row(tmp_path):
    """000 §5.2, realistic set-up, W7: FAIR never completed 30% of its requests, SRPT 24%, past
    the range between the paper's 0.2% (load 0.7) and 10-15% (0.9). `workloads-realistic-why`
    changes one factor of a policy at a time; a factor whose run lands in the range is the
    measured reason, and none is claimed while each leaves the share outside it; a policy's row
    reads its own runs only. (The factor runs here are W7's published runs under other names,
    their counts changed.)"""
    paper = load_paper("000")
    published = DOCS / "000" / "workloads-realistic"
    _published(tmp_path, "000", "workloads-realistic")
    why = tmp_path / "000" / "workloads-realistic-why"
    why.mkdir(parents=True)
    shutil.copy(published / "meta.json", why / "meta.json")
    for variant in ("fair-slots2000", "fair-synq8192", "srpt-slots2000"):
        shutil.copytree(published / f"{variant.split('-')[0]}-profile=W7", why / f"{variant}-profile=W7")
        for run_json in (why / f"{variant}-profile=W7").glob("*/run.json"):
            run_json.write_text(json.dumps({**json.loads(run_json.read_text()), "run": f"{variant}-profile=W7",
                                            "variant": variant}))

    def with_shares(policy: str, **shares: float) -> Row:
        for factor, share in shares.items():
            for rep in (why / f"{policy}-{factor}-profile=W7").glob("*/"):
                _in_summary(lambda summary: summary.update(incomplete=share * summary["requests"]))(rep)
        return _the_row(paper, tmp_path, "workloads-realistic", f"{policy.upper()}: share of requests incomplete, W7")

    row = with_shares("fair", slots2000=0.05, synq8192=0.28)
    assert row.verdict() == "missed" and row.reason() == "measured"
    assert "with 2000 connection slots instead of 350 5.00%" in row.why_text()
    assert "with 2000 connection slots instead of 350, 5.00% meets the row's range" in row.why_text()
    row = with_shares("fair", slots2000=0.25, synq8192=0.28)
    assert row.reason() == "unexplained" and row.why_text().endswith("none of which accounts for the miss")
    row = with_shares("srpt", slots2000=0.04)
    assert row.reason() == "measured" and "SRPT's requests" in row.why_text()
    assert "with 2000 connection slots instead of 350, 4.00% meets the row's range" in row.why_text()
    assert "SYN queue" not in row.why_text()  # FAIR's factor run is not SRPT's


def test_non_normal_capacities_are_put_down_to_timeouts_only_while_their_count_carries_the_spread(tmp_path):
    """002 Figs. 6-7: at 27 repetitions the capacities missed Shapiro-Wilk (p 0.010); each
    error (a user held for the 30-s timeout) took about 1.5 requests/s off, as the timeout
    predicts, and without them the rest is normal: the measured reason, withdrawn once the
    errors no longer fall with the capacity (the same counts given to the repetitions in the
    opposite order)."""
    from sojourn.reproduce.paper002 import _normality_why

    paper = load_paper("002")
    _published(tmp_path, "002", "normality")

    def why():
        # Asked directly: the published 36 repetitions pass (p 0.051), so the row shows none.
        return _normality_why(Context(paper, tmp_path), "normality", "sojourn-rtt_ms=100")
    assert why().measured and "about what a user held for the 30-s timeout costs" in why().text
    summaries = sorted((tmp_path / "002" / "normality").glob("*/*/summary.json"),
                       key=lambda path: json.loads(path.read_text())["capacity_rps"])
    counts = sorted(json.loads(path.read_text())["levels"][0]["errors"] for path in summaries)
    for path, errors in zip(summaries, counts):
        summary = json.loads(path.read_text())
        summary["levels"][0]["errors"] = errors
        path.write_text(json.dumps(summary))
    assert why() is None


def test_a_capacity_rests_on_its_server_using_its_cpu_and_else_names_what_held_it(tmp_path):
    """002 §3.1: a capacity ratio compares the server only while the server, CPU-bound, set
    the capacity. The premise row is met when the server used 90% of its quota at its
    capacity level; when it did not, its reason names what did hold the capacity, from the
    counters: the emulator at a whole core, or handshakes dropped at the listener (the first
    paper-scale run had both, at half a CPU and 512-long queues); with neither, no reason."""
    paper = load_paper("002")
    _published(tmp_path, "002", "loss")
    reps = sorted((tmp_path / "002" / "loss" / "sojourn-loss=0.09").glob("[0-9]*/"))
    assert reps

    def row_with(share: float, emulator_cpu: float, dropped: int) -> Row:
        for rep in reps:
            summary = json.loads((rep / "summary.json").read_text())
            at_capacity = next(level for level in summary["levels"] if level["users"] == summary["capacity_users"])
            at_capacity["server_cpu"] = share * summary["server_cpu"]["cpus"]
            (rep / "summary.json").write_text(json.dumps(summary))
            counters = pd.read_csv(rep / "counters.csv")
            counters["router_cpu"] = emulator_cpu
            counters["listen_drops"] = [dropped * i // (len(counters) - 1) for i in range(len(counters))]
            counters.to_csv(rep / "counters.csv", index=False)
        return _the_row(paper, tmp_path, "loss", "sojourn: server CPU at its capacity / its CPU quota, 9% loss")

    row = row_with(0.97, 1.0, 3000)
    assert row.verdict() == "met" and row.ours.value == pytest.approx(0.97)
    row = row_with(0.62, 1.0, 0)
    assert row.verdict() == "missed" and row.reason() == "measured"
    assert "the emulator ran at 1.00 CPU" in row.why_text() and "handshakes" not in row.why_text()
    row = row_with(0.62, 0.5, 3000)
    assert "dropped 3000 handshakes a repetition" in row.why_text() and "emulator" not in row.why_text()
    assert row_with(0.62, 0.5, 0).reason() != "measured"


def test_a_cpu_bound_capacity_ratio_is_put_down_to_what_a_request_costs_the_server(tmp_path):
    """002 Fig. 17: with the server CPU-bound at both loss rates, its capacity is its CPU
    over what a request costs it, so a capacity that did not fall with loss is explained by a
    cost that did not rise (server_cpu over requests/s at the capacity level); not claimed
    once either run left a tenth of its quota unused, and a lower bound (the capacity at the
    last level of users) is the reason before it."""
    from sojourn.reproduce.paper002 import _cost_why

    paper = load_paper("002")
    _published(tmp_path, "002", "loss")

    def set_runs(capacities: dict[str, float], share: float = 0.97, last_level: bool = False) -> None:
        for run, capacity in capacities.items():
            for path in (tmp_path / "002" / "loss" / run).glob("*/summary.json"):
                summary = json.loads(path.read_text())
                level = next(level for level in summary["levels"] if level["users"] == summary["capacity_users"])
                level["server_cpu"] = share * summary["server_cpu"]["cpus"]
                summary["capacity_rps"], summary["capacity_at_last_level"] = capacity, last_level
                path.write_text(json.dumps(summary))

    def capacity_row() -> Row:
        return _the_row(paper, tmp_path, "loss", "sojourn: capacity at 9% / at 0% loss")

    set_runs({"sojourn-loss=0.09": 4400, "sojourn-loss=0": 4000})
    row = capacity_row()
    assert row.verdict() == "opposite" and row.reason() == "measured", row.why_text()
    assert "(0.91x; server_cpu, its cgroup's CPU, over requests/s" in row.why_text()
    assert "did not make a request dearer" in row.why_text()
    set_runs({"sojourn-loss=0.09": 2000})
    assert "made each request dearer" in _cost_why(Context(paper, tmp_path), "loss", "sojourn-loss=0.09",
                                                   "sojourn-loss=0").text
    set_runs({"sojourn-loss=0.09": 4400}, share=0.6)
    assert capacity_row().reason() == "unexplained"
    set_runs({"sojourn-loss=0.09": 4400}, last_level=True)
    assert "a lower bound" in capacity_row().why_text()


def test_capacity_per_point_says_whether_a_maximum_came_from_a_saturated_server(tmp_path):
    """002's capacity tables: beside each repetition's maximum, the server's CPU over its
    quota at that level, the first level at which it used 90% of its quota, and how far the
    saturated levels' requests per second spread (a maximum at the last level of a saturated
    server is no lower bound); dashes where the server had no quota."""
    from sojourn.reproduce.paper002 import notes

    paper = load_paper("002")
    _published(tmp_path, "002", "delay")
    path = tmp_path / "002" / "delay" / "sojourn-rtt_ms=100" / "0" / "summary.json"
    summary = json.loads(path.read_text())
    quota = summary["server_cpu"]["cpus"]
    levels = [{"users": users, "server_cpu": share * quota, "throughput_rps": rps}
              for users, share, rps in ((256, 0.5, 900), (512, 0.95, 2000), (1024, 0.99, 1600), (2048, 1.0, 2100))]
    summary |= {"levels": levels, "capacity_rps": 2100, "capacity_users": 2048, "capacity_at_last_level": True}
    path.write_text(json.dumps(summary))
    table = notes(Context(paper, tmp_path))
    assert "| sojourn-rtt_ms=100 (rep 0) | 2100 | 2048 | yes | 1.00 | 512 | 0.76 |" in table
    summary["server_cpu"]["cpus"] = 0
    path.write_text(json.dumps(summary))
    assert "| sojourn-rtt_ms=100 (rep 0) | 2100 | 2048 | yes | — | — | — |" in notes(Context(paper, tmp_path))


def test_a_dearer_request_is_put_down_to_the_users_when_the_base_cost_as_much_with_as_many(tmp_path):
    """002 delay (29 Nov, 0.1 CPU): sojourn reached its capacity at 400 ms with 4096 users, at
    0 ms with 256, and a request cost more at 400 ms; at 0 ms with 4096 users it cost about as
    much. The reason then says the dearer requests came with the users, not the condition;
    not when the base's cost with as many users differs by more than a tenth."""
    from sojourn.reproduce.paper002 import _cost_why

    paper = load_paper("002")
    _published(tmp_path, "002", "loss")
    users, quota = 4096, 0.2

    def set_cost(run: str, cost_s: float, capacity: bool) -> None:
        for path in (tmp_path / "002" / "loss" / run).glob("*/summary.json"):
            summary = json.loads(path.read_text())
            level = next(level for level in summary["levels"] if level["users"] == users)
            level["server_cpu"] = 0.97 * quota
            level["throughput_rps"] = level["server_cpu"] / cost_s
            if capacity:
                summary["capacity_users"], summary["capacity_rps"] = users, level["throughput_rps"]
                summary["capacity_at_last_level"] = False
            path.write_text(json.dumps(summary))

    def why() -> str:
        return _cost_why(Context(paper, tmp_path), "loss", "sojourn-loss=0.09", "sojourn-loss=0").text

    set_cost("sojourn-loss=0.09", 70e-6, capacity=True)
    set_cost("sojourn-loss=0", 66e-6, capacity=False)
    assert "made each request dearer" in why() and "came with the users it took to fill the server" in why()
    assert "a request cost 66 µs" in why()
    set_cost("sojourn-loss=0", 50e-6, capacity=False)
    assert "made each request dearer" in why() and "came with the users" not in why()


def test_a_variant_of_ours_is_explained_by_putting_its_factors_back_one_at_a_time(tmp_path):
    """003 §5: the clients that neither think nor restart their session
    (`section5-demand20-nothink-continue`) dropped 6.1% of gold's requests at 40 clients;
    with restarts (`-nothink`) 3.4%, and adding the think time (`section5-demand20`) 0%, under
    the paper's 0.5%: the measured reason, withdrawn once the think time no longer brings it
    down. A step on the other side of 1 than the paper's ratio explains a direction only while
    its 90% interval holds the paper's value: section5's bronze / FIFO (k = 1, 0.24) is put
    down to section5-demand's 1.14 [0.96, 1.31] (paper 0.988), not once that is 1.3 in every
    repetition."""
    paper = load_paper("003")
    for experiment in ("section5", "section5-demand", "section5-demand20", "section5-demand20-nothink",
                       "section5-demand20-nothink-continue"):
        _published(tmp_path, "003", experiment)
    claim = "DWFS gold request timeout (drop) rate, 40 clients"
    row = _the_row(paper, tmp_path, "section5-demand20-nothink-continue", claim)
    assert row.verdict() == "missed" and row.reason() == "measured"
    assert "(`section5-demand20-nothink`) 3.37% [3.30%, 3.45%]; adding a think time" in row.why_text()
    for path in (tmp_path / "003" / "section5-demand20").glob("dwfs-users=40/*/summary.json"):
        summary = json.loads(path.read_text())
        next(c for c in summary["sessions"]["classes"] if c["name"] == "gold")["drop_rate"] = 0.05
        path.write_text(json.dumps(summary))
    assert _the_row(paper, tmp_path, "section5-demand20-nothink-continue", claim).reason() == "unexplained"

    bronze_claim = "DWFS bronze / FIFO mean response time, 40 clients"
    bronze = _the_row(paper, tmp_path, "section5", bronze_claim)
    theirs = _the_row(paper, tmp_path, "section5-demand", bronze_claim)
    assert theirs.verdict() == "opposite" and bronze.reason() == "measured"
    assert "(`section5-demand`) it was 1.14 [0.961, 1.31]" in bronze.why_text()
    demand = tmp_path / "003" / "section5-demand"

    def bronze_over_fifo(users: int, ratio: float) -> None:
        """section5-demand's DWFS bronze mean made ``ratio`` times FIFO's, repetition by repetition."""
        for fifo_path in demand.glob(f"fifo-users={users}/*/summary.json"):
            path = demand / f"dwfs-users={users}" / fifo_path.parent.name / "summary.json"
            summary = json.loads(path.read_text())
            fifo_mean = json.loads(fifo_path.read_text())["sessions"]["overall"]["response_mean_s"]
            next(c for c in summary["sessions"]["classes"] if c["name"] == "bronze")["response_mean_s"] = \
                ratio * fifo_mean
            path.write_text(json.dumps(summary))

    bronze_over_fifo(40, 1.3)
    assert _the_row(paper, tmp_path, "section5", bronze_claim).reason() == "unexplained"
    # At 50 clients section5-demand's 0.931 [0.841, 1.02] misses the paper's 0.83 by its
    # departure from 1, but lies beyond it from ours (0.147) on its side of 1: the cost's
    # reading places the paper's value, measured; not once it passes 1.
    claim = "DWFS bronze / FIFO mean response time, 50 clients"
    row = _the_row(paper, tmp_path, "section5", claim)
    assert row.reason() == "measured" and "the paper's 0.83 lies between the two" in row.why_text()
    bronze_over_fifo(50, 1.2)
    assert _the_row(paper, tmp_path, "section5", claim).reason() == "unexplained"


def test_throughput_that_did_not_grow_with_write_slots_is_put_down_to_a_busy_link(tmp_path):
    """004 Fig. 6: throughput grew with a 100-Mbit/s server's threads; over our 10-Mbit/s
    uplink, a link already busy 97% of the run at one write slot is the measured reason more
    slots added nothing, and no reason below that."""
    paper = load_paper("004")
    _published(tmp_path, "004", "write-concurrency")
    claim = "size-independent: byte throughput at write concurrency "
    # The most slots both policies have published (128 once the campaign is whole).
    most = re.match(r"(\d+) /", _the_row(paper, tmp_path, "write-concurrency", claim).claim[len(claim):]).group(1)

    def with_link_busy(share: float) -> Row:
        for path in (tmp_path / "004" / "write-concurrency" / "size-independent-write_concurrency=1").glob(
                "*/summary.json"):
            path.write_text(json.dumps({**json.loads(path.read_text()), "link_utilization": share}))
        for path in (tmp_path / "004" / "write-concurrency" / f"size-independent-write_concurrency={most}").glob(
                "*/summary.json"):
            summary = json.loads(path.read_text())
            path.write_text(json.dumps({**summary, "throughput_bps": 0.95 * summary["throughput_bps"]}))
        return _the_row(paper, tmp_path, "write-concurrency", claim)

    row = with_link_busy(0.99)
    assert row.verdict() == "missed" and row.reason() == "measured", row.why_text()
    assert "busy 99.0% of the run already at write concurrency 1" in row.why_text()
    assert with_link_busy(0.8).reason() == "unexplained"


def test_scfs_throughput_no_higher_than_size_independents_is_put_down_to_a_busy_link(tmp_path):
    """004 Fig. 6: SCF "slightly higher throughput" at one write slot; a link busy 97% of
    the run under both policies is the measured reason SCF's was no higher, and not once
    one policy left the link idle a fifth of the time."""
    paper = load_paper("004")
    root = tmp_path / "004" / "write-concurrency"
    shutil.copytree(DOCS / "004" / "write-concurrency", root)
    claim = "SCF / size-independent byte throughput at write concurrency 1"

    def with_link_busy(shares: dict[str, float]) -> Row:
        for policy, share in shares.items():
            for path in (root / f"{policy}-write_concurrency=1").glob("*/summary.json"):
                summary = json.loads(path.read_text())
                bps = json.loads((root / "size-independent-write_concurrency=1" / path.parent.name /
                                  "summary.json").read_text())["throughput_bps"]
                path.write_text(json.dumps({**summary, "link_utilization": share, "throughput_bps": bps}))
        return _the_row(paper, tmp_path, "write-concurrency", claim)

    row = with_link_busy({"size-independent": 0.98, "scf": 0.99})
    assert row.verdict() == "missed" and row.reason() == "measured", row.why_text()
    assert "busy 98.0% (size-independent) and 99.0% (scf) of the run already at write concurrency 1" in row.why_text()
    assert with_link_busy({"scf": 0.8}).reason() == "unexplained"


def test_scfs_gain_at_1400_users_is_put_down_to_write_slots_only_while_fewer_slots_reach_the_papers(tmp_path):
    """004 §5.3: a factor of 4 to 5 at 1400 UEs; ours is about 2 with the `scf` runs' 8 write
    slots. `write-concurrency` (same users) isolates the slots: the measured reason while some
    fewer slots reach the paper's factor within 2x, withdrawn once no fewer slots do."""
    paper = load_paper("004")
    for experiment in ("scf", "write-concurrency"):
        _published(tmp_path, "004", experiment)
    claim = "size-independent / SCF mean response time, 1400 users"
    row = _the_row(paper, tmp_path, "scf", claim)
    assert row.verdict() == "same direction beyond 2x" and row.reason() == "measured", row.why_text()
    assert "the `scf` runs let 8 responses write at once" in row.why_text()
    for run in (tmp_path / "004" / "write-concurrency").glob("size-independent-write_concurrency=*"):
        scf = tmp_path / "004" / "write-concurrency" / run.name.replace("size-independent", "scf")
        for path in run.glob("*/summary.json"):
            if not (scf / path.parent.name / "summary.json").is_file():
                continue
            theirs = json.loads((scf / path.parent.name / "summary.json").read_text())["response_mean"]
            path.write_text(json.dumps({**json.loads(path.read_text()), "response_mean": 1.5 * theirs}))
    row = _the_row(paper, tmp_path, "scf", claim)
    assert row.verdict() == "same direction beyond 2x" and row.reason() == "unexplained"


def test_a_guard_bound_a_spec_loosened_is_stated_in_the_doc_with_the_worst_value_seen(tmp_path):
    """A table judged by a looser fidelity guard says so: the setting, its default and the
    worst value the complete repetitions recorded; with the default setting no line."""
    from sojourn.reproduce.doc import _guard_lines

    paper = load_paper("002")
    _published(tmp_path, "002", "loss")
    assert _guard_lines(paper, Context(paper, tmp_path)) == []
    late = []
    for path in (tmp_path / "002" / "loss").glob("sojourn-*/*/run.json"):
        run = json.loads(path.read_text())
        run["config"]["collect"]["fidelity"]["emulator_late_p99_ms"] = 10.0
        path.write_text(json.dumps(run))
        summary = json.loads((path.parent / "summary.json").read_text())
        late.append(summary["fidelity"]["values"]["emulator_late_p99_s"])
    (line,) = [line for line in _guard_lines(paper, Context(paper, tmp_path)) if line.startswith("- ")]
    assert line.startswith("- `loss`: `collect.fidelity.emulator_late_p99_ms` = 10 (default 1; 0 = not judged)")
    assert f"the worst of its {len(late)} repetitions: {max(late) * 1e3:.3g}" in line


def test_apache_faster_on_short_responses_is_put_down_to_our_write_slots_while_they_were_full(tmp_path):
    """004 Fig. 2: Apache's short responses beat the size-independent server's at 1400 users
    because ours waited for one of its 8 write slots (all held by blocked responses most of
    the run; its request-to-first-byte time the longer) while Apache's waited to be accepted
    (its handshake the longer). Not claimed once the slots were free, or once our wait was
    no longer the longer; at 1000 users the slots were free, both servers' times alike and 1
    inside the interval: noise, until the waits differ. Where `write-concurrency` ran the
    size-independent server with 128 slots at the same users, the reason holds while its short
    responses were no slower than Apache's."""
    paper = load_paper("004")
    _published(tmp_path, "004", "apache")
    busy, quiet = "Apache / size-independent mean response below 10 KiB, 1400 users", \
        "Apache / size-independent mean response below 10 KiB, 1000 users"

    def edit(run: str, change) -> None:
        for path in (tmp_path / "004" / "apache" / run).glob("*/summary.json"):
            summary = json.loads(path.read_text())
            change(summary)
            path.write_text(json.dumps(summary))

    row = _the_row(paper, tmp_path, "apache", busy)
    assert row.verdict() == "missed" and row.reason() == "measured", row.why_text()
    assert "waited at our server for a write slot" in row.why_text() and "8 write slots" in row.why_text()
    row = _the_row(paper, tmp_path, "apache", quiet)
    assert row.reason() == "measured" and "the mean's side of 1 is noise" in row.why_text()

    edit("size-independent-users=1400", lambda s: s.update(server_slots_full_s=0.01 * s["duration_s"]))
    assert _the_row(paper, tmp_path, "apache", busy).reason() == "unexplained"
    edit("size-independent-users=1400", lambda s: s.update(server_slots_full_s=0.9 * s["duration_s"],
                                                          ttfb_mean=s["connect_mean"] + 0.001))
    assert _the_row(paper, tmp_path, "apache", busy).reason() == "unexplained"
    edit("size-independent-users=1000", lambda s: s.update(ttfb_mean=s["connect_mean"] + 0.05))
    assert _the_row(paper, tmp_path, "apache", quiet).reason() == "unexplained"

    # The factor isolated: `write-concurrency` at the same 1400 users with 128 slots.
    edit("size-independent-users=1400", lambda s: s.update(server_slots_full_s=0.9 * s["duration_s"],
                                                          ttfb_mean=s["connect_mean"] + 0.2))
    _published(tmp_path, "004", "write-concurrency")
    apache = [json.loads(p.read_text())["response_mean_small"]
              for p in (tmp_path / "004" / "apache" / "apache-users=1400").glob("*/summary.json")]
    for share, reason, words in ((0.5, "measured", "with 128 write slots at the same users (`write-concurrency`)"),
                                 (2.0, "unexplained", "so the slots are not the whole reason")):
        for path in (tmp_path / "004" / "write-concurrency" / "size-independent-write_concurrency=128").glob(
                "*/summary.json"):
            path.write_text(json.dumps({**json.loads(path.read_text()),
                                        "response_mean_small": share * sum(apache) / len(apache)}))
        row = _the_row(paper, tmp_path, "apache", busy)
        assert row.reason() == reason and words in row.why_text(), row.why_text()


def test_a_longer_transmit_queue_that_never_filled_is_the_measured_reason_it_did_not_hurt(tmp_path):
    """000 footnote 7: 2000 packets were no worse than 1000 because the uplink dropped nothing
    at either and its backlog stayed under 1000 packets (counters.csv); once the longest queue
    drops packets that reason no longer holds and none is claimed."""
    paper = load_paper("000")
    _published(tmp_path, "000", "txqueue")

    longest = "FAIR: mean at the longest queue"
    row = _the_row(paper, tmp_path, "txqueue", longest)
    assert row.verdict() == "missed" and row.reason() == "measured" and "never filled 1000 packets" in row.why_text()
    for path in (tmp_path / "000" / "txqueue").glob("fair-queue_packets=2000/*/summary.json"):
        path.write_text(json.dumps({**json.loads(path.read_text()), "uplink_drops": 12}))
    assert _the_row(paper, tmp_path, "txqueue", longest).reason() == "unexplained"


@pytest.mark.parametrize("experiment, claim, body_run, at, within", [
    # Fig. 12: SRPT's least mean over the workloads (paper 0.15 s), at the workload it falls.
    ("workloads", "SRPT: least mean over the workloads", "srpt-profile={profile}", "under {profile}",
     (0.1, "the second is 0.67x the paper's 0.15, within 2x")),
    # (I): SRPT's mean at 536-byte packets (paper 0.26 s).
    ("mtu", "SRPT mean at 536 bytes per packet", "srpt-mtu=536", "at 536 bytes per packet",
     (0.2, "the second is 0.77x the paper's 0.26, within 2x")),
])
def test_a_mean_below_the_papers_is_explained_when_load_counted_on_bodies_brackets_it_or_comes_within_2x(
        tmp_path, experiment, claim, body_run, at, within):
    """SRPT's mean lies below half the paper's; when the same runs with load counted on bodies
    (`<experiment>-body`) put it above the paper's, or within 2x of it, the row says so as
    its measured reason; a body-counted mean further below than ours claims nothing."""
    paper = load_paper("000")
    body = f"{experiment}-body"
    _published(tmp_path, "000", experiment)
    row = _the_row(paper, tmp_path, experiment, claim)
    assert row.ours.value < row.paper.paper_value / 2 and row.reason() == "unexplained"
    profile = row.ours.at.split("=")[-1]
    shutil.copytree(DOCS / "000" / experiment, tmp_path / "000" / body)
    summaries = list((tmp_path / "000" / body).glob(f"{body_run.format(profile=profile)}/*/summary.json"))
    assert summaries

    def body_mean(seconds: float) -> Row:
        for path in summaries:
            path.write_text(json.dumps({**json.loads(path.read_text()), "response_mean": seconds}))
        return _the_row(paper, tmp_path, experiment, claim)

    row = body_mean(2.5)
    assert row.reason() == "measured" and f"how load is counted {at.format(profile=profile)}" in row.why_text()
    assert f"`{body}`" in row.why_text() and "2.5" in row.why_text() and "lies between" in row.why_text()
    # On the same side as ours but within 2x of the paper's: the basis is the beyond-2x part.
    assert within[1] in body_mean(within[0]).why_text()
    assert body_mean(row.ours.value / 2).reason() == "unexplained"


def test_fair_over_srpt_beyond_the_papers_range_is_told_by_a_longer_fifo_at_that_workload(tmp_path):
    """000 Fig. 12: FAIR / SRPT's largest over the workloads lies beyond the paper's 8. When
    `workloads-handshake` (FAIR with a 1000-packet FIFO at that workload, beside the same SRPT)
    puts the ratio at or below 8, or within 2x of it, FAIR's handshakes are the measured reason;
    a longer FIFO that leaves the ratio beyond 2x of 8 is reported, unexplained."""
    paper = load_paper("000")
    _published(tmp_path, "000", "workloads")
    claim = "largest FAIR / SRPT over the workloads"
    row = _the_row(paper, tmp_path, "workloads", claim)
    assert row.ours.value > 2 * 8 and row.reason() == "unexplained"
    profile = row.ours.at.split("=")[1]
    handshake = tmp_path / "000" / "workloads-handshake"
    shutil.copytree(DOCS / "000" / "workloads", handshake)

    def longer_fifo(fair_over_srpt: float) -> Row:
        for path in handshake.glob(f"fair-profile={profile}/*/run.json"):
            run = json.loads(path.read_text())
            path.write_text(json.dumps({**run, "run": f"fair-queue1000-profile={profile}", "variant": "fair-queue1000"}))
            srpt = json.loads((tmp_path / "000" / "workloads" / f"srpt-profile={profile}" / path.parent.name /
                               "summary.json").read_text())["response_mean"]
            summary = json.loads((path.parent / "summary.json").read_text())
            (path.parent / "summary.json").write_text(json.dumps({**summary, "response_mean": fair_over_srpt * srpt}))
        return _the_row(paper, tmp_path, "workloads", claim)

    row = longer_fifo(5.0)
    assert row.reason() == "measured" and row.why_text().startswith("FAIR's handshakes:")
    assert f"under {profile}, with the same SRPT (`workloads`)" in row.why_text()
    assert "and 5 with a 1000-packet FIFO (" in row.why_text() and "lies between" in row.why_text()
    assert "the second is 1.50x the paper's 8, within 2x" in longer_fifo(12.0).why_text()
    row = longer_fifo(20.0)
    assert row.reason() == "unexplained" and "SRPT was 20 with a 1000-packet FIFO (" in row.why_text()


def test_the_syn_queue_experiment_bounds_fairs_share_of_syns_dropped_and_sets_8192_against_512(tmp_path):
    """§6.1 from syn-queue-w4's own runs: FAIR's share of SYNs dropped under W4 with the
    paper's queue of 512, bounded from both sides from the handshakes counted on the server's
    interface; that a queue of 8192 dropped none; and what it gained. Until it has run each row
    names the command; results from before the counts give no share, and say so."""
    paper = load_paper("000")
    claims = {"least": "FAIR share of SYNs dropped under W4, at least (baseline",
              "most": "FAIR share of SYNs dropped under W4, at most (baseline",
              "none": "FAIR's SYN drops under W4 with a SYN queue of 8192 (baseline",
              "gain": "FAIR with a SYN queue of 8192 / with 512 (baseline"}
    for claim in claims.values():
        row = _the_row(paper, tmp_path, "syn-queue-w4", claim)
        assert row.verdict() == "no result" and "--only syn-queue-w4" in row.ours.absent
    # Both runs made of the published FAIR under W4 (with no handshake counts), 8192 as fast.
    target = tmp_path / "000" / "syn-queue-w4"
    target.mkdir(parents=True)
    shutil.copy(DOCS / "000" / "workloads" / "meta.json", target / "meta.json")
    for variant in ("fair", "fair-synq8192"):
        for rep in sorted((DOCS / "000" / "workloads").glob("fair-profile=W4/*")):
            shutil.copytree(rep, target / variant / rep.name)
            run = json.loads((rep / "run.json").read_text())
            (target / variant / rep.name / "run.json").write_text(json.dumps({**run, "run": variant, "variant": variant}))
    row = _the_row(paper, tmp_path, "syn-queue-w4", claims["least"])
    assert row.verdict() == "no result" and "results from before 28 Nov 2026" in row.ours.absent
    assert _the_row(paper, tmp_path, "syn-queue-w4", claims["gain"]).ours.value == pytest.approx(1.0)
    none = _the_row(paper, tmp_path, "syn-queue-w4", claims["none"])
    assert none.ours.value > 0 and none.verdict() == "missed"
    # With the counts: 14-27% of the SYNs dropped, beyond the paper's 1% on both sides.
    for path in target.glob("fair/*/summary.json"):
        path.write_text(json.dumps({**json.loads(path.read_text()), "syn_drop_share_min": 0.14,
                                    "syn_drop_share_max": 0.27, "syns_received": 250_000}))
    least, most = (_the_row(paper, tmp_path, "syn-queue-w4", claims[side]) for side in ("least", "most"))
    assert (least.ours.value, most.ours.value) == (pytest.approx(0.14), pytest.approx(0.27))
    assert least.verdict() == most.verdict() == "same direction beyond 2x"
    assert "ListenOverflows" in least.note and "every drop a SYN" in most.note
    # Where the drops fell, from the counters once they count the SYNs received.
    import pandas as pd
    for path in target.glob("fair/*/counters.csv"):
        counters = pd.read_csv(path)
        counters["syns_received"] = range(len(counters))
        counters.to_csv(path, index=False)
    least = _the_row(paper, tmp_path, "syn-queue-w4", claims["least"])
    assert least.reason() == "measured" and least.why_text().startswith("at a full SYN queue, not at the server")
    # The same drops counted as accept-queue overflows: the counters, not the set-up, name the queue.
    for path in target.glob("fair/*/counters.csv"):
        counters = pd.read_csv(path)
        counters["listen_overflows"] = counters["listen_drops"]
        counters.to_csv(path, index=False)
    least = _the_row(paper, tmp_path, "syn-queue-w4", claims["least"])
    assert least.reason() == "measured" and least.why_text().startswith("mostly at the full accept queue")
    # 8192's gain is measured when the time it saved is its handshakes'.
    for path in target.glob("fair-synq8192/*/summary.json"):
        summary = json.loads(path.read_text())
        path.write_text(json.dumps({**summary, "response_mean": summary["response_mean"] - 0.3,
                                    "connect_mean": summary["connect_mean"] - 0.28}))
    gain = _the_row(paper, tmp_path, "syn-queue-w4", claims["gain"])
    assert gain.verdict() == "missed" and gain.reason() == "measured"
    assert gain.why_text().startswith("the gain is the handshakes'") and "(the paper: 1%)" in gain.why_text()


def test_srpts_syn_drops_under_a_workload_are_told_by_when_they_fell_and_the_accept_queue(tmp_path):
    """§6.1: SRPT drops no SYN under any workload. Where one does, the row tells from the
    counters how long after an overload began the latest drop came (W3: overloads are the
    second 50 s of each 100-s cycle), how full the accept queue was and how many of the
    server's connections were established."""
    import pandas as pd

    paper = load_paper("000")
    _published(tmp_path, "000", "workloads")
    claim = "SRPT: most SYN drops over the workloads"
    for path in (tmp_path / "000" / "workloads").glob("srpt-profile=*/*/summary.json"):
        path.write_text(json.dumps({**json.loads(path.read_text()), "syn_drops": 0}))
    assert _the_row(paper, tmp_path, "workloads", claim).verdict() == "met"
    reps = sorted((tmp_path / "000" / "workloads" / "srpt-profile=W3").glob("[0-9]*"))

    def drops_in(start_s: float, end_s: float) -> Row:
        for rep in reps:
            counters = pd.read_csv(rep / "counters.csv")
            falling = ((counters["t_s"] >= start_s) & (counters["t_s"] < end_s)).astype(int) * 10
            counters["listen_drops"] = falling.cumsum()
            counters["accept_queue"] = falling * 50
            counters.to_csv(rep / "counters.csv", index=False)
            summary = json.loads((rep / "summary.json").read_text())
            (rep / "summary.json").write_text(json.dumps({**summary, "syn_drops": int(falling.sum())}))
        return _the_row(paper, tmp_path, "workloads", claim)

    row = drops_in(60, 70)
    assert row.verdict() == "missed" and row.reason() == "measured"
    assert row.why_text().startswith("the drops came in W3's overloads (50 s at rho 1.6) and after them, the "
                                     "latest 19 s after one began")
    assert "the accept queue filled (peak 500, its length 512)" in row.why_text()
    assert "the latest 69 s after one began" in drops_in(110, 120).why_text()


def test_srpts_largest_requests_beyond_the_bound_are_set_against_the_ideal_schedules(tmp_path):
    """§5.2: SRPT's largest 1% never more than 10% above FAIR's. A miss is the workload's own
    (measured) when the ideal fluid SRPT of the same arrivals already puts them above PS's by
    more than that; otherwise the row says it is not the workload's, and how far each policy
    was from its ideal."""
    paper = load_paper("000")
    _published(tmp_path, "000", "workloads")
    claim = "SRPT / FAIR mean of the largest 1%, W3"
    fair = _the_row(paper, tmp_path, "workloads", claim).ours.value  # met: about 1
    srpt_summaries = list((tmp_path / "000" / "workloads").glob("srpt-profile=W3/*/summary.json"))

    def with_ideal(srpt_s: float, ps_s: float) -> Row:
        for path in srpt_summaries:
            summary = json.loads(path.read_text())
            summary["response_largest_1pct_mean"] = 2 * summary["response_largest_1pct_mean"] / fair
            summary["ideal"] = {"srpt": {"response_largest_1pct_mean": srpt_s}, "ps": {"response_largest_1pct_mean": ps_s}}
            path.write_text(json.dumps(summary))
        return _the_row(paper, tmp_path, "workloads", claim)

    row = with_ideal(6.0, 5.0)
    assert row.verdict() == "missed" and row.reason() == "measured"
    assert row.why_text().startswith("the workload's own:") and "(1.20;" in row.why_text()
    row = with_ideal(5.0, 10.0)
    assert row.reason() == "unexplained" and row.why_text().startswith("not the workload's:")
    # `workloads-largest`: application-level SRPT at W3 brings them to 0.9 times FAIR's.
    largest = tmp_path / "000" / "workloads-largest"
    shutil.copytree(DOCS / "000" / "workloads", largest)
    for path in largest.glob("srpt-profile=W3/*/run.json"):
        run = json.loads(path.read_text())
        path.write_text(json.dumps({**run, "run": "srpt-app-profile=W3", "variant": "srpt-app"}))
        summary = json.loads((path.parent / "summary.json").read_text())
        fair_s = json.loads((tmp_path / "000" / "workloads" / "fair-profile=W3" / path.parent.name /
                             "summary.json").read_text())["response_largest_1pct_mean"]
        (path.parent / "summary.json").write_text(json.dumps({**summary, "response_largest_1pct_mean": 0.9 * fair_s}))
    row = _the_row(paper, tmp_path, "workloads", claim)
    assert row.reason() == "measured" and "with application-level SRPT (every size in order) 0.90x FAIR's" in \
        row.why_text()


def _the_row(paper, docs, experiment: str, claim: str) -> Row:
    """The one row of ``experiment`` whose claim starts with ``claim``, from the results under ``docs``."""
    (row,) = [r for r in paper.claims(Context(paper, docs)) if r.experiment == experiment and r.claim.startswith(claim)]
    return row


def test_points_shorter_than_the_papers_are_compressed_and_say_so(tmp_path):
    """002's capacity levels ran 20 s (5 s warm-up) and were called the paper's scale for their
    three repetitions; Waspclient's points ran 10 minutes after a 30-s warm-up (002 §3.5). A
    run shorter than its entry's TimeScale is `compressed`, in its rows and in the doc, which
    names the keys; one that ran the paper's timing is at the paper's scale."""
    paper = load_paper("002")
    _published(tmp_path, "002", "loss")
    row = partial(_the_row, paper, tmp_path, "loss", "sojourn: capacity at 9% / at 0% loss")
    assert row().scale == "compressed"
    ctx = Context(paper, tmp_path)
    assert ctx.shorter_than_paper("loss") == [("level_s", 20.0, 630.0), ("warmup_s", 5.0, 30.0)]
    assert "- `loss`: workload.level_s 20 s against 630, workload.warmup_s 5 s against 30; the paper: Waspclient" \
        in markdown(paper, ctx, paper.claims(ctx))
    for run_json in (tmp_path / "002" / "loss").glob("*/*/run.json"):
        run = json.loads(run_json.read_text())
        run["config"]["workload"].update(level_s=630.0, warmup_s=30.0)
        run_json.write_text(json.dumps(run))
    assert row().scale == "paper" and Context(paper, tmp_path).shorter_than_paper("loss") == []
    assert Context(paper, tmp_path).run_length("loss") == "levels of 630 s (30 s warm-up)"


def test_the_doc_counts_the_attempts_the_guard_ran_again(tmp_path):
    """000 (J): FAIR's repetition 0 took three recorded attempts the emulator made late before
    a valid one; the doc says how many attempts of how many repetitions, and which bounds they
    broke, and says nothing of an experiment none of whose repetitions were run again."""
    paper = load_paper("000")
    _published(tmp_path, "000", "realistic")
    text = markdown(paper, Context(paper, tmp_path), [])
    (line,) = [line for line in text.splitlines() if line.startswith("- `realistic`: ")]
    records = sorted((tmp_path / "000" / "realistic").glob("*/*/attempts.json"))
    attempts = sum(len(json.loads(path.read_text())) for path in records)
    assert f"{attempts} attempt(s) of {len(records)} of its 6 repetitions" in line and "emulator_late_p99_s" in line
    for path in records:
        path.unlink()
    assert "Attempts the fidelity guard" not in markdown(paper, Context(paper, tmp_path), [])


def test_the_doc_names_the_repetitions_an_experiment_shares_with_another(tmp_path):
    """A repetition measured once and published in two experiments is named in the doc with
    the experiment and run it ran as, so it is not read as independent evidence twice."""
    from sojourn.reproduce import SHARED

    paper = load_paper("000")
    _published(tmp_path, "000", "rtt-loss")
    assert "measured once and published in two experiments" not in markdown(paper, Context(paper, tmp_path), [])
    for rep in ("0", "1"):
        (tmp_path / "000" / "rtt-loss" / "fair" / rep / SHARED).write_text(json.dumps(
            {"experiment": "rtt-loss-grid", "run": "fair-loss5-rtt_ms=100", "repetition": int(rep), "from": "x"}))
    text = markdown(paper, Context(paper, tmp_path), [])
    assert "- `rtt-loss`: 2 of its 6 repetitions: 2 of `rtt-loss-grid`'s fair-loss5-rtt_ms=100" in text


def test_the_doc_names_the_machines_an_experiments_repetitions_ran_on(tmp_path):
    """002's CPU-bound capacities of one session were 0.6x those of another: the doc says on
    how many machines (boot ids) an experiment's repetitions ran, how far apart their speeds
    were, and how many repetitions predate the record; nothing where none has one."""
    from sojourn.testbed.host import FILE

    paper = load_paper("002")
    _published(tmp_path, "002", "sack")
    assert "The machines the repetitions ran on" not in markdown(paper, Context(paper, tmp_path), [])
    reps = sorted((tmp_path / "002" / "sack").glob("*/*/status.json"))
    for n, (boot_id, trip) in enumerate([("a", 16.0), ("a", 17.0), ("b", 24.0)]):
        reps[n].with_name(FILE).write_text(json.dumps({"boot_id": boot_id, "speed": {
            "loopback_round_trip_cpu_us": trip, "interpreter_step_ns": 40.0}}))
    text = markdown(paper, Context(paper, tmp_path), [])
    assert (f"- `sack`: 3 repetition(s) on 2 machine(s), a loopback round trip 16.0-24.0 CPU µs (slowest / fastest "
            f"1.50); {len(reps) - 3} without a record") in text


def test_a_publication_is_restored_for_a_spec_given_a_new_variant(tmp_path):
    """A campaign whose spec gained a variant goes on from its publication: the published
    repetitions of the unchanged runs are restored (and --list counts them); a run whose
    configuration changed is neither restored nor counted, and its results are set aside."""
    from sojourn.reproduce.publish import published_reps, restore_published, set_aside_other_version
    from sojourn.runner import layout

    spec = tmp_path / "e.toml"
    spec.write_text('name = "e"\n[workload]\nrho = 0.5\n[variants.a]\nserver.policy = "fair"\n')
    first = load_spec(spec)
    published = tmp_path / "published"
    (published / "a" / "0").mkdir(parents=True)
    layout.mark(published / "a" / "0", "complete")
    layout.write_json(published / "a" / "0" / "run.json", {"run": "a", "config": first.runs[0].config})
    (published / "spec.toml").write_text(first.text)
    (published / "meta.json").write_text(json.dumps({"scale": "full"}))
    spec.write_text(spec.read_text() + '[variants.b]\nserver.policy = "srpt"\n')
    grown = load_spec(spec)
    assert [p.parent.name for p in published_reps(grown, published, False)] == ["a"]
    results = tmp_path / "results"
    assert restore_published(grown, published, results, quick=False) == 1
    assert (results / "e" / "spec.toml").read_text() == grown.text
    assert set_aside_other_version(results / "e", grown) is None
    spec.write_text(spec.read_text().replace("rho = 0.5", "rho = 0.6"))
    changed = load_spec(spec)
    assert published_reps(changed, published, False) == []
    aside = set_aside_other_version(results / "e", changed)
    assert aside is not None and aside.runs == ["a"] and not (results / "e" / "a").exists()
    assert layout.is_complete(aside.directory / "a" / "0") and (aside.directory / "spec.toml").read_text() == grown.text


def test_a_run_configured_otherwise_is_run_again_and_the_others_keep_their_results(tmp_path):
    """000's srpt-slots2000 was corrected (the paper's SRPT, not the application's order)
    beside five runs it left alike: only its repetitions are set aside (with the spec they ran
    from) and not restored from the publication; the others' are restored and counted."""
    from sojourn.reproduce.publish import published_reps, restore_published, set_aside_other_version
    from sojourn.runner import layout

    spec = tmp_path / "e.toml"
    spec.write_text('name = "e"\n[workload]\nrho = 0.5\n[variants.a]\nserver.policy = "fair"\n'
                    '[variants.b]\nserver.policy = "srpt"\n')
    first = load_spec(spec)
    published, results = tmp_path / "published", tmp_path / "results"
    for where in (published, results / "e"):
        for run in first.runs:
            for rep in ("0", "1"):
                (where / run.name / rep).mkdir(parents=True)
                layout.mark(where / run.name / rep, "complete")
                layout.write_json(where / run.name / rep / "run.json", {"run": run.name, "config": run.config})
        (where / "spec.toml").write_text(first.text)
    (published / "meta.json").write_text(json.dumps({"scale": "full"}))
    spec.write_text(spec.read_text().replace('policy = "srpt"', 'policy = "fair"'))
    corrected = load_spec(spec)
    assert [f"{p.parent.name}/{p.name}" for p in published_reps(corrected, published, False)] == ["a/0", "a/1"]
    aside = set_aside_other_version(results / "e", corrected)
    assert aside is not None and aside.runs == ["b"] and sorted(p.name for p in aside.directory.iterdir()) == ["b", "spec.toml"]
    assert layout.is_complete(aside.directory / "b" / "1") and (aside.directory / "spec.toml").read_text() == first.text
    assert layout.is_complete(results / "e" / "a" / "1") and not (results / "e" / "b").exists()
    assert set_aside_other_version(results / "e", corrected) is None
    shutil.rmtree(results / "e" / "a")
    assert restore_published(corrected, published, results, quick=False) == 2
    assert layout.is_complete(results / "e" / "a" / "0") and not (results / "e" / "b").exists()


def test_a_key_the_schema_gained_since_a_run_keeps_its_results_only_at_its_default(tmp_path):
    """A run made before network.tcp.rto_max_ms existed ran with Linux's own cap, which the
    key's default (0) keeps: its results stay; a new key set otherwise, a key the run had
    and the spec lost, or any other change, sets them aside."""
    from sojourn.runner.layout import mark, write_json
    from sojourn.runner.spec import changed_runs, configured_alike

    spec = tmp_path / "e.toml"
    spec.write_text('name = "e"\n[workload]\nrho = 0.5\n')
    now = json.loads(json.dumps(load_spec(spec).runs[0].config, default=str))
    before = json.loads(json.dumps(now))
    del before["network"]["tcp"]["rto_max_ms"]
    assert configured_alike(now, before)
    results = tmp_path / "results"
    run = load_spec(spec).runs[0].name
    (results / run / "0").mkdir(parents=True)
    mark(results / run / "0", "complete")
    write_json(results / run / "0" / "run.json", {"run": run, "config": before})
    (results / "spec.toml").write_text("an older text")
    assert changed_runs(results, load_spec(spec)) == []
    spec.write_text(spec.read_text() + '[network.tcp]\nrto_max_ms = 3000\n')
    assert changed_runs(results, load_spec(spec)) == [f"{run} rep 0"]
    assert not configured_alike(now, {**before, "lost": 2})
    assert not configured_alike(now, {**before, "workload": {**before["workload"], "rho": 0.6}})


def _set_summaries(run: Path, **values) -> None:
    """Sets summary.json keys in every repetition of a published run."""
    for path in run.glob("*/summary.json"):
        path.write_text(json.dumps({**json.loads(path.read_text()), **values}))


def test_a_costlier_clamp_is_put_down_to_the_part_of_a_response_that_carries_its_rise(tmp_path):
    """001 Fig. 18 for nonpersistent connections: when even the best clamp raises the mean, the
    reason is the part of a response that carries at least half the rise: the handshake with
    more SYNs dropped, or, for a clamp below Linux's initial window of 10 segments, the transfer
    after the first byte; with neither, none is claimed."""
    paper = load_paper("001")
    _published(tmp_path, "001", "cwnd")
    runs = tmp_path / "001" / "cwnd"
    for run in runs.glob("nonpersistent-cwnd_clamp=*"):
        _set_summaries(run, response_mean=0.05, ttfb_mean=0.049, connect_mean=0.0003, syn_drops=100)
    _set_summaries(runs / "nonpersistent-cwnd_clamp=0", response_mean=0.004, ttfb_mean=0.0039)
    clamped = runs / "nonpersistent-cwnd_clamp=2"
    claim = "nonpersistent: mean latency unclamped / with the best clamp (2 segments)"

    _set_summaries(clamped, response_mean=0.006, ttfb_mean=0.0044)
    row = _the_row(paper, tmp_path, "cwnd", claim)
    assert row.verdict() == "missed" and row.reason() == "measured", row.why_text()
    assert "Linux opens at 10 segments" in row.why_text() and "75% of the mean's rise" in row.why_text()

    _set_summaries(clamped, ttfb_mean=0.0059, connect_mean=0.0015, syn_drops=900)
    row = _the_row(paper, tmp_path, "cwnd", claim)
    assert row.reason() == "measured" and "lost the time in their handshakes" in row.why_text(), row.why_text()
    assert "900 SYNs dropped" in row.why_text()

    _set_summaries(clamped, connect_mean=0.0004)
    assert _the_row(paper, tmp_path, "cwnd", claim).reason() == "unexplained"


def test_the_clamps_trade_and_the_empty_link_are_said_only_while_the_published_parts_show_them(tmp_path):
    """001 §6.3: the paper's trade (small responses start sooner, the largest transfer longer)
    is stated only while the summaries show both, and the link as no place of waiting only
    while its sampled backlog stayed under a packet with no drop."""
    from sojourn.reproduce import paper001

    _published(tmp_path, "001", "cwnd")
    runs = tmp_path / "001" / "cwnd"
    for run in runs.glob("persistent-cwnd_clamp=*"):
        _set_summaries(run, response_mean=0.05, uplink_drops=0)
    _set_summaries(runs / "persistent-cwnd_clamp=0", response_mean=0.007, ttfb_mean=0.0068,
                   response_largest_1pct_mean=0.012, ttfb_largest_1pct_mean=0.007)
    best = runs / "persistent-cwnd_clamp=2"
    _set_summaries(best, response_mean=0.004, ttfb_mean=0.0034, response_largest_1pct_mean=0.018,
                   ttfb_largest_1pct_mean=0.0035)
    for counters in runs.glob("persistent-cwnd_clamp=[02]/*/counters.csv"):
        table = pd.read_csv(counters)
        table["q1_10_backlog_bytes"] = 100
        table.to_csv(counters, index=False)

    def persistent_item() -> str:
        (item,) = [i for i in paper001._cwnd_differences(Context(load_paper("001"), tmp_path))
                   if "persistent connections" in i and "nonpersistent" not in i]
        return item

    item = persistent_item()
    assert "6.80 against 3.40 ms" in item and "That is the paper's trade" in item and "did not wait at the link" in item
    _set_summaries(best, uplink_drops=3)
    assert "did not wait at the link" not in persistent_item()
    _set_summaries(best, ttfb_mean=0.0069)
    assert "That is the paper's trade" not in persistent_item()


def _capacity_published_as_events(tmp_path: Path) -> Path:
    """001's capacity publication (60-s levels, before `events` held them for 30 minutes)
    copied as the `events` experiment: a run of the same load at a shorter level."""
    events = tmp_path / "001" / "events"
    shutil.copytree(DOCS / "001" / "capacity", events)
    return events


def test_a_row_with_a_timing_of_its_own_is_compressed_at_a_shorter_level(tmp_path):
    """001 §6.1 counted the ready events per epoll_wait over half an hour, so a 60-s level makes
    that row compressed, its note saying against what; the capacity rows, which have no timing
    in the paper, are at the paper's scale with 60-s levels."""
    paper = load_paper("001")
    _published(tmp_path, "001", "capacity")
    _capacity_published_as_events(tmp_path)
    events = _the_row(paper, tmp_path, "events", "sojourn: mean ready events per epoll_wait")
    assert events.scale == "compressed"
    assert "compressed: workload.level_s 60 s against 1800; the paper: Figs. 13-14's events" in events.note
    assert _the_row(paper, tmp_path, "capacity", "sojourn / apache2 infinite-demand capacity").scale == "paper"


def test_a_saturated_event_loop_explains_its_batches_only_while_its_worker_is_saturated(tmp_path):
    """001 §6.1: at infinite demand sojourn's waits returned about 200 events (the fixed Flash
    1.6), its one worker CPU-bound: the measured reason; no longer so once it had half a CPU
    to spare."""
    paper = load_paper("001")
    events = _capacity_published_as_events(tmp_path)
    claim = "sojourn: mean ready events per epoll_wait at infinite demand"
    row = _the_row(paper, tmp_path, "events", claim)
    assert row.verdict() == "same direction beyond 2x" and row.reason() == "measured"
    assert "saturated, it found ready at each wait" in row.why_text()
    for rep in events.glob("sojourn/*/"):
        _in_counters(lambda c: c.__setitem__("server_cpu", 0.5))(rep)
    row = _the_row(paper, tmp_path, "events", claim)
    assert row.verdict() == "same direction beyond 2x" and row.reason() == "unexplained"


def _as_if_run_with_the_spec_now(published: Path, spec: Path) -> None:
    """Rewrites a copied publication's spec.toml and each repetition's run.json config as the
    spec at ``spec`` resolves them now (its summaries and records untouched)."""
    experiment = load_spec(spec)
    (published / "spec.toml").write_text(experiment.text)
    configs = {run.name: run.config for run in experiment.runs}
    for run_json in published.glob("*/*/run.json"):
        run = json.loads(run_json.read_text())
        run["config"] = json.loads(json.dumps(configs[run_json.parent.parent.name], default=str))
        run_json.write_text(json.dumps(run))


def test_a_redraw_draws_a_capacity_experiment_from_its_publication_alone(tmp_path):
    """002 Figs. 9-14 and 17-20: a capacity probe's figures come from the levels in the
    summaries a publication keeps, so `--redraw` (nothing run, no per-request records here)
    draws every run, where the report drew an empty response-time-vs-loss figure and the doc
    said all runs were missing from it; the tables stay as they were. An experiment whose
    figures need records that are not here is refused, its publication untouched."""
    docs = tmp_path / "docs"
    shutil.copytree(DOCS / "002", docs / "002")
    paper = load_paper("002")
    # The publications ran an older text of their specs (20-s levels): redraw refuses those, so
    # each copy is made a publication of the spec as it is now, its summaries as they were.
    for name in ("loss", "sack"):
        _as_if_run_with_the_spec_now(docs / "002" / name, REPO / paper.entry(name).spec)
    before = write_docs(paper, Context(paper, docs))[0].read_text()

    def redraw(name: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "sojourn.cli", "reproduce", "002", "--only", name, "--redraw",
                               "--docs", str(docs), "--results", str(tmp_path / "results")],
                              capture_output=True, text=True, cwd=REPO)

    done = redraw("loss")
    assert done.returncode == 0, done.stdout + done.stderr
    figures = json.loads((docs / "002" / "loss" / "figures.json").read_text())
    assert [f["caption"].split(",")[0] for f in figures] == [
        "Requests/s", "Capacity vs network.groups.0.loss"]
    assert "not_in_figures" not in json.loads((docs / "002" / "loss" / "meta.json").read_text())
    section = lambda text: text.split("(`loss`)")[1].split("###")[0]  # noqa: E731
    rows = lambda text: [line for line in section(text).splitlines() if line.startswith("|")]  # noqa: E731
    after = (docs / "002.md").read_text()
    assert rows(after) == rows(before) and "restored without per-request records" not in section(after)
    sack = sorted(path.read_bytes() for path in (docs / "002" / "sack").rglob("*") if path.is_file())
    refused = redraw("sack")
    assert refused.returncode == 2 and "sack: cannot redraw: 2 run(s) have no per-request records here" in \
        " ".join(refused.stdout.split())
    assert sorted(path.read_bytes() for path in (docs / "002" / "sack").rglob("*") if path.is_file()) == sack
    from sojourn.analysis import swept_users

    one_level = json.loads(next((DOCS / "001" / "latency").glob("*/0/summary.json")).read_text())
    assert not swept_users(one_level), "a load level after a probe draws no probe figures"


def test_a_capacity_ratio_with_one_repetition_short_of_its_quota_is_read_in_the_others(tmp_path):
    """002 loss at the paper's scale: sojourn at 9% loss used 65% of its quota at its capacity in
    one repetition of three, so the mean (0.88) said "not CPU-bound" and the ratio had no
    reason. The reason now reads the ratio and a request's cost in the repetitions in which
    both servers were CPU-bound, and names the short one with its counters: measured when they
    show the emulator at a whole core, unexplained when they show no limit. The premise's bound
    is ours (0.90), so 0.88 no longer rounds up to meet it."""
    paper = load_paper("002")
    _published(tmp_path, "002", "loss")
    loss = tmp_path / "002" / "loss"

    def set_reps(run: str, shares: list[float], emulator_cpu: list[float]) -> None:
        for rep, (share, cpu) in enumerate(zip(shares, emulator_cpu)):
            summary = json.loads((loss / run / str(rep) / "summary.json").read_text())
            at_capacity = next(level for level in summary["levels"] if level["users"] == summary["capacity_users"])
            at_capacity["server_cpu"] = share * summary["server_cpu"]["cpus"]
            (loss / run / str(rep) / "summary.json").write_text(json.dumps(summary))
            counters = pd.read_csv(loss / run / str(rep) / "counters.csv")
            counters["router_cpu"], counters["listen_drops"] = cpu, 0
            counters.to_csv(loss / run / str(rep) / "counters.csv", index=False)

    set_reps("sojourn-loss=0", [0.97] * 3, [0.3] * 3)
    set_reps("sojourn-loss=0.09", [0.97, 0.65, 0.97], [0.3] * 3)
    ratio = _the_row(paper, tmp_path, "loss", "sojourn: capacity at 9% / at 0% loss")
    premise = _the_row(paper, tmp_path, "loss", "sojourn: server CPU at its capacity / its CPU quota, 9% loss")
    assert premise.ours.value == pytest.approx(0.863, abs=1e-3) and premise.verdict() == "missed"
    for row in (ratio, premise):
        assert "in repetition 1 sojourn-loss=0.09 used 65% of its CPU quota" in row.why.text
        assert "what held it is unexplained" in row.why.text and not row.why.measured
    assert ratio.why.text.startswith("in repetition(s) 0, 2 both were CPU-bound at their capacity")
    set_reps("sojourn-loss=0.09", [0.97, 0.65, 0.97], [0.3, 1.0, 0.3])
    ratio = _the_row(paper, tmp_path, "loss", "sojourn: capacity at 9% / at 0% loss")
    assert ratio.why.measured and "while the emulator ran at 1.00 CPU" in ratio.why.text
    # The premise's reason is the same repetition's, measured too (it was forced unexplained).
    premise = _the_row(paper, tmp_path, "loss", "sojourn: server CPU at its capacity / its CPU quota, 9% loss")
    assert premise.why.measured and "while the emulator ran at 1.00 CPU" in premise.why.text


def _publish_as(source: Path, experiment_dir: Path, run: str, **summary_values):
    """A published repetition of ``run`` made from a real one of another experiment, with
    some summary values replaced: a run not made yet, standing in for a reason's premise."""
    rep = experiment_dir / run / "0"
    shutil.copytree(source, rep)
    for name, values in (("summary.json", summary_values), ("run.json", {"run": run, "variant": run, "repetition": 0})):
        data = json.loads((rep / name).read_text())
        data.update(values)
        (rep / name).write_text(json.dumps(data))


def _meta_as(source: Path, experiment_dir: Path) -> None:
    """``experiment_dir``'s meta.json made from the published experiment ``source``'s: a
    publication of 000's experiment of that directory's name, not made yet."""
    meta = json.loads((source / "meta.json").read_text())
    (experiment_dir / "meta.json").write_text(json.dumps({**meta, "experiment": experiment_dir.name,
                                                          "spec": f"experiments/000/{experiment_dir.name}.toml"}))


def _as_if_time_compressed(published: Path, factor: float = 10.0) -> None:
    """Rewrites a copied publication's run.json configs as if its runs had run time-compressed
    by ``factor`` (workload.time_compression), their summaries untouched."""
    for run_json in published.glob("*/*/run.json"):
        run = json.loads(run_json.read_text())
        run["config"]["workload"]["time_compression"] = factor
        run_json.write_text(json.dumps(run))


def test_loss_misses_are_put_down_to_loss_met_at_both_hosts_only_once_a_run_moves_them_to_the_papers(tmp_path):
    """000 (C): SRPT's mean at 5% loss was 0.411 s against the paper's 0.93 s and at 15% 1.46 s
    against its "more than 4 s" (time-compressed `loss`; 0.461 s and 1.49 s at the paper's time
    scale). The loss met at both hosts (9.75% and 27.75% a direction, `loss-both-hosts`) accounts
    for a row only where its run lands the paper's value between it and ours, or within 2x
    closing half the gap, and only while `loss` ran at the factor run's time scale; a run that
    moved the mean little leaves the row unexplained, with what it moved."""
    paper = load_paper("000")
    _published(tmp_path, "000", "loss")
    _as_if_time_compressed(tmp_path / "000" / "loss")
    at5, at15 = "SRPT mean at 5% loss", "SRPT mean at 15% loss"
    assert [_the_row(paper, tmp_path, "loss", claim).reason() for claim in (at5, at15)] == ["unexplained"] * 2
    why = tmp_path / "000" / "loss-both-hosts"
    srpt_rep = DOCS / "000" / "loss" / "srpt-loss=0.05" / "0"
    _publish_as(srpt_rep, why, "srpt-loss5-both-hosts", response_mean=1.05)
    _publish_as(srpt_rep, why, "srpt-loss15-both-hosts", response_mean=1.6)
    _meta_as(DOCS / "000" / "loss", why)
    row = _the_row(paper, tmp_path, "loss", at5)
    assert row.reason() == "unexplained" and "with the 5% loss met at both hosts, 9.75% a direction" in row.why_text()
    assert "`loss` ran time-compressed and `loss-both-hosts` at the paper's time scale" in row.why_text()
    # The same figures with `loss` at the paper's time scale credit the factor.
    _as_if_run_with_the_spec_now(tmp_path / "000" / "loss", REPO / "experiments" / "000" / "loss.toml")
    row = _the_row(paper, tmp_path, "loss", at5)
    assert row.reason() == "measured" and "`srpt-loss5-both-hosts`: " in row.why_text()
    row = _the_row(paper, tmp_path, "loss", at15)
    assert row.reason() == "unexplained" and "27.75% a direction" in row.why_text()
    assert "none accounts for the miss" in row.why_text()


def test_srpts_fewer_incompletes_in_j_are_put_down_to_the_loss_only_where_its_run_reaches_the_papers(tmp_path):
    """000 (J): 0.09% of SRPT's requests never completed against the paper's "about 0.2%". With
    the 5% loss met at both hosts (`realistic-why`'s srpt-loss-both-hosts) a share whose move
    places the paper's value between the two is the measured reason; one that barely moves
    leaves the row unexplained, saying so."""
    paper = load_paper("000")
    _published(tmp_path, "000", "realistic")
    claim = "SRPT share of requests never completed"
    row = _the_row(paper, tmp_path, "realistic", claim)
    assert row.verdict() == "same direction beyond 2x" and row.reason() == "unexplained"
    assert "no run isolates why their share differs" in row.why_text()
    why = tmp_path / "000" / "realistic-why"
    _publish_as(DOCS / "000" / "realistic" / "srpt" / "1", why, "srpt-loss-both-hosts", incomplete=330, requests=133005)
    _meta_as(DOCS / "000" / "realistic", why)
    row = _the_row(paper, tmp_path, "realistic", claim)
    assert row.reason() == "measured" and "(`realistic-why`, `srpt-loss-both-hosts`) 0.248% never completed" in row.why_text()
    assert "the paper's 0.002 lies between the two" in row.why_text()
    summary = why / "srpt-loss-both-hosts" / "0" / "summary.json"
    summary.write_text(json.dumps({**json.loads(summary.read_text()), "incomplete": 125}))  # 0.094%, as ours
    row = _the_row(paper, tmp_path, "realistic", claim)
    assert row.reason() == "unexplained" and "which does not account for the miss" in row.why_text()


def test_realistic_misses_are_put_down_to_a_factor_only_once_a_run_isolates_it(tmp_path):
    """000 (J): the largest 1% took 8.9 s (FAIR) and 6.9 s (SRPT) against the paper's 2.2-2.3
    s, SRPT's less than FAIR's. Until `realistic-why` runs, the rows say where the time went
    (the first byte of the completed try, then the transfer) and that nothing isolates it;
    patient users within 2x of the paper's, or a 1000-packet FIFO that turns SRPT / FAIR to
    >= 1, make the reason measured, and one that does not leaves it unexplained; so does load
    counted on bodies for SRPT's mean (0.334 s, the paper's 764 ms)."""
    paper = load_paper("000")
    _published(tmp_path, "000", "realistic")
    claims = ("FAIR mean of the largest 1%", "SRPT mean of the largest 1%", "SRPT / FAIR mean of the largest 1%")

    def rows():
        return [_the_row(paper, tmp_path, "realistic", claim) for claim in claims]
    fair, srpt, ratio = rows()
    assert [row.reason() for row in (fair, srpt, ratio)] == ["unexplained"] * 3
    assert "waited 5.87 s for the first byte of the try that completed and took 2.99 s after it" in fair.why_text()
    assert "no run isolates the retries yet" in srpt.why_text()
    assert "FAIR's uplink FIFO dropped 161,286 packets a run against 2,742" in ratio.why_text()
    why = tmp_path / "000" / "realistic-why"
    fair_rep, srpt_rep = (DOCS / "000" / "realistic" / variant / "1" for variant in ("fair", "srpt"))
    _publish_as(fair_rep, why, "fair-patient", response_largest_1pct_mean=3.1)
    _publish_as(srpt_rep, why, "srpt-patient", response_largest_1pct_mean=5.0)
    _publish_as(fair_rep, why, "fair-queue1000", response_largest_1pct_mean=6.0)
    _publish_as(fair_rep, why, "fair-body", response_mean=2.0)
    _publish_as(srpt_rep, why, "srpt-body", response_mean=0.9)
    _meta_as(DOCS / "000" / "realistic", why)
    fair, srpt, ratio = rows()
    assert fair.reason() == "measured" and "with patient users (no abort, `realistic-why`) they took 3.10 s" in fair.why_text()
    assert srpt.reason() == "unexplained"  # 5.0 s is beyond 2x the paper's 2.28 s
    assert ratio.reason() == "measured" and "SRPT / FAIR 1.16" in ratio.why_text()
    # The path alone (load 0.1, patient users): within 2x of the paper's it leaves the server's
    # queue holding the time, unexplained; beyond 2x it puts the miss in the path.
    _publish_as(fair_rep, why, "light-patient", response_largest_1pct_mean=4.0, size_largest_1pct_mean=117_000)
    light_run = why / "light-patient" / "0" / "run.json"
    ran = json.loads(light_run.read_text())
    ran["config"]["workload"].update(profile="", rho=0.1)
    light_run.write_text(json.dumps(ran))
    srpt = _the_row(paper, tmp_path, "realistic", "SRPT mean of the largest 1%")
    assert srpt.reason() == "unexplained"
    assert "with the path alone (load 0.1, patient users, `light-patient`) the largest 1% (117 KB on average) took 4.00 s" \
        in srpt.why_text()
    summary = why / "light-patient" / "0" / "summary.json"
    summary.write_text(json.dumps({**json.loads(summary.read_text()), "response_largest_1pct_mean": 4.7}))
    srpt = _the_row(paper, tmp_path, "realistic", "SRPT mean of the largest 1%")
    assert srpt.reason() == "measured" and "so the miss is in how the path carries them" in srpt.why_text()
    # SRPT's mean (0.334 s against 764 ms) with load counted on bodies: 0.9 s puts the paper's between.
    mean = _the_row(paper, tmp_path, "realistic", "SRPT mean response time")
    assert mean.reason() == "measured" and "how load is counted in (J)" in mean.why_text()
    assert "the paper's 0.764 lies between the two" in mean.why_text()
    # On bodies 0.411 s closes a quarter of the gap: no reason, until the papers' TCP (no
    # RACK-TLP, an initial window of 2) brings it within 2x, closing most of it.
    shutil.rmtree(why / "srpt-body")
    _publish_as(srpt_rep, why, "srpt-body", response_mean=0.411)
    mean = _the_row(paper, tmp_path, "realistic", "SRPT mean response time")
    assert mean.reason() == "unexplained" and "(`srpt-body`) 0.411, 25% of the gap closed" in mean.why_text()
    _publish_as(srpt_rep, why, "srpt-no-rack-tlp", response_mean=0.45)
    _publish_as(srpt_rep, why, "srpt-2000-tcp", response_mean=0.7)
    mean = _the_row(paper, tmp_path, "realistic", "SRPT mean response time")
    assert mean.reason() == "measured" and "`srpt-2000-tcp`: the second is 0.92x the paper's" in mean.why_text()


def test_realistic_largest_1pct_is_set_against_the_ideal_schedule_with_the_path_added(tmp_path):
    """000 (J): FAIR's largest 1% took 8.87 s against the paper's 2.23 s. The ideal fluid PS of
    (J)'s arrivals and sizes keeps them 3.81 s, and the path alone (`light-patient`) took 2.33
    s: 6.14 s together, ours 1.44x that, while the paper's lies below the ideal PS alone. That
    is the measured reason; not once ours is beyond 2x of the sum, nor once the ideal keeps
    them less than the paper's. SRPT / FAIR 0.78 where the paper's was 1.02: the ideal SRPT
    gives the largest 1% 0.42x the ideal PS's, the workload's own; not once it gives more."""
    paper = load_paper("000")
    for experiment in ("realistic", "realistic-why"):
        _published(tmp_path, "000", experiment)
    fair = _the_row(paper, tmp_path, "realistic", "FAIR mean of the largest 1%")
    assert fair.reason() == "measured"
    assert ("the ideal fluid PS of (J)'s arrivals and sizes keeps them 3.81 s (summary.json ideal), 6.14 s with the "
            "path alone's added, ours 1.44x that" in fair.why_text())
    ratio = _the_row(paper, tmp_path, "realistic", "SRPT / FAIR mean of the largest 1%")
    assert ratio.reason() == "measured" and "1.59 s under SRPT and 3.81 s under PS (0.42" in ratio.why_text()

    def ideal(policy: str, seconds: float) -> None:
        for rep in (tmp_path / "000" / "realistic").glob("*/*/"):
            _in_summary(lambda summary: summary["ideal"][policy].update(response_largest_1pct_mean=seconds))(rep)

    ideal("ps", 2.2)  # below the paper's 2.23 s, though ours lies within 2x of the 4.53 s sum
    assert _the_row(paper, tmp_path, "realistic", "FAIR mean of the largest 1%").reason() == "unexplained"
    ideal("ps", 3.81)
    for rep in (tmp_path / "000" / "realistic" / "fair").glob("*/"):  # ours 14 s: 2.28x the 6.14 s
        _in_summary(lambda summary: summary.update(response_largest_1pct_mean=14.0))(rep)
    assert _the_row(paper, tmp_path, "realistic", "FAIR mean of the largest 1%").reason() == "unexplained"
    ideal("srpt", 4.0)  # the ideal SRPT slower than the ideal PS: SRPT's advantage is not the workload's
    assert _the_row(paper, tmp_path, "realistic", "SRPT / FAIR mean of the largest 1%").reason() == "unexplained"


def test_fairs_few_impatient_incompletes_are_put_down_to_the_count_of_tries_only_where_two_tries_reach_5_percent(tmp_path):
    """000 (H): 3.04% of FAIR's requests never completed with abort after 3 s and 2 retries,
    against the paper's "more than 5 percent". With 2 tries in all (`abort-impatient-why`,
    the way (J) counts "retries up to 3 times" as "aborted the full three times") a share
    above 5% is the measured reason; one at or below it leaves the row unexplained, saying so."""
    paper = load_paper("000")
    for experiment in ("abort-impatient", "baseline"):
        _published(tmp_path, "000", experiment)
    claim = "FAIR share of requests never completed, abort after 3 s and 2 retries"
    row = _the_row(paper, tmp_path, "abort-impatient", claim)
    assert row.verdict() == "missed" and row.reason() == "unexplained"
    assert "no run isolates why fewer than 5% failed thrice" in row.why_text()
    why = tmp_path / "000" / "abort-impatient-why"
    _publish_as(DOCS / "000" / "abort-impatient" / "fair" / "0", why, "fair-two-tries", incomplete=9000, requests=130000)
    _meta_as(DOCS / "000" / "abort-impatient", why)
    row = _the_row(paper, tmp_path, "abort-impatient", claim)
    assert row.reason() == "measured" and "(`abort-impatient-why`, `fair-two-tries`" in row.why_text()
    assert "6.92% never completed: more than 5%" in row.why_text()
    summary = why / "fair-two-tries" / "0" / "summary.json"
    summary.write_text(json.dumps({**json.loads(summary.read_text()), "incomplete": 5200}))  # 4.0%
    row = _the_row(paper, tmp_path, "abort-impatient", claim)
    assert row.reason() == "unexplained" and "4.00% never completed, still 5% or fewer" in row.why_text()
