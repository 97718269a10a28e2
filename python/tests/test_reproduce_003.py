"""003 §5 end to end at small scale: the section5 spec (closed-loop session users in three
classes, DWFS vs FIFO on the stage pool) run through `sojourn run` for a few seconds at
one sweep point, published as `sojourn reproduce` does, and read back by paper 003's
claims, so every §5 row the full run would fill is computed from a real result."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from host_noise import HOST_NOISE_FIDELITY_LINES
from sojourn.reproduce import REPO, Context, load_paper
from sojourn.reproduce.publish import publish

pytestmark = [pytest.mark.netns, pytest.mark.skipif(os.geteuid() != 0, reason="needs root for network namespaces")]

TINY = f"""
base = "{REPO / 'experiments' / '003' / 'section5.toml'}"
name = "003-section5-tiny"
repetitions = 1
[workload]
duration_s = 4
sessions = {{ users = 40, exit = 0.1, think_s = 1.0, delay_bound_s = 2.0 }}
[sweep]
parameter = "workload.sessions.users"
values = [40]
[collect.fidelity]
""" + HOST_NOISE_FIDELITY_LINES  # the host's noise is not what this test checks


def test_section5_runs_and_its_claims_are_computed(tmp_path):
    spec = tmp_path / "tiny.toml"
    spec.write_text(TINY)
    done = subprocess.run([sys.executable, "-m", "sojourn.cli", "run", str(spec), "--results", str(tmp_path / "results"),
                           "--prefix", "sjs5", "--no-report"], capture_output=True, text=True, timeout=240)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    source = tmp_path / "results" / "003-section5-tiny"
    for run in ("fifo-users=40", "dwfs-users=40"):
        summary = json.loads((source / run / "0" / "summary.json").read_text())["sessions"]
        assert [row["name"] for row in summary["classes"]] == ["gold", "silver", "bronze"]
        assert sum(row["requests"] for row in summary["classes"]) == summary["overall"]["requests"] > 40
        assert {row["stage"] for row in summary["anatomy"]} == {"MM", "CO", "SR", "BR"}
        if run.startswith("fifo"):
            assert all(row["drop_rate"] == 0 for row in summary["classes"])  # Apache's FIFO drops nothing
    paper = load_paper("003")
    docs = tmp_path / "docs"
    publish(paper, paper.entry("section5"), source, docs / "003" / "section5", quick=True, wall_s=1.0)
    # The same claims of the experiments not run here are rows too, without a result.
    rows = {row.claim: row for row in paper.claims(Context(paper, docs)) if row.experiment == "section5"}
    ratio = rows["DWFS gold / FIFO mean response time, 40 clients"]
    assert ratio.ours.repetitions == 1 and ratio.ours.ok and ratio.ours.value > 0
    assert rows["DWFS gold request timeout (drop) rate, 40 clients"].ours.value >= 0
    fifo = rows["FIFO mean response time, 60 / 40 clients"]  # no 60-client run here
    assert fifo.verdict() == "no result" and "fifo-users=60" in fifo.why_text()
    # The same result published as the demand-cost experiment (issue 13): its claims and the
    # note's per-point and drop-rate-against-k tables are filled from it.
    publish(paper, paper.entry("section5-demand"), source, docs / "003" / "section5-demand", quick=True, wall_s=1.0)
    ctx = Context(paper, docs)
    rows = {(row.experiment, row.claim): row for row in paper.claims(ctx)}
    drop = rows[("section5-demand", "DWFS gold request timeout (drop) rate, 40 clients")]
    assert drop.ours.repetitions == 1 and drop.ours.value >= 0
    note = paper.notes(ctx)
    assert "### §5 with the stage costs as CPU demand (issue 13)" in note
    assert "| 10 | 2 / k | section5-demand (quick, 1) | 40 |" in note
    assert "| 1 | 2 / k | section5 (quick, 1) | 40 |" in note
