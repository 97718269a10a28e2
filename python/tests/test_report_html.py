"""The report is built from stored results only, is self-contained, marks partial
results, and opens in a real browser (headless Chromium) without console errors."""

from __future__ import annotations

import base64
import json
import re
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from sojourn.analysis.results import summarize_repetition
from sojourn.report.html import build_report
from sojourn.runner.layout import write_json

REPO = Path(__file__).resolve().parents[2]
SCREENSHOTS = REPO / "results" / "test-output"


def write_repetition(directory: Path, run: str, rep: int, slow_factor: float, state: str = "complete",
                     sweep_value=None, variant: str = "", seed: int = 0) -> None:
    """A stored repetition in the runner's layout. Its records are synthetic (made here
    with a seeded generator: a stand-in for a measured run, with every column the load
    generator writes), so the report is tested without a testbed."""
    rng = np.random.default_rng(seed)
    n = 400
    arrival = np.cumsum(rng.exponential(0.05, n))
    size = np.round(np.exp(rng.normal(7.5, 1.2, n))).astype(int) + 41
    service = size * 8 / 10e6
    response = service * (1 + slow_factor * rng.exponential(1.0, n)) + 0.002
    outcome = np.where(rng.random(n) < 0.02, "gave_up", "ok")
    records = pd.DataFrame({
        "request_id": np.arange(n), "attempt": 0, "final": 1, "client": rng.integers(0, 20, n), "session": -1,
        "class": 0, "path": [f"/o/{i:06d}.bin" for i in rng.integers(0, 300, n)], "expected_size": size,
        "bytes": np.where(outcome == "ok", size, 0), "status": np.where(outcome == "ok", 200, np.nan),
        "scheduled_s": arrival, "dispatch_s": arrival, "sent_s": arrival + 0.001,
        "first_byte_s": arrival + 0.001 + response / 3, "last_byte_s": arrival + response, "outcome": outcome,
        "error": "",
    })
    path = directory / run / str(rep)
    path.mkdir(parents=True)
    records.to_csv(path / "records.csv", index=False)
    seconds = np.arange(int(arrival[-1]) + 2)
    pd.DataFrame({"t_s": seconds, "established": rng.integers(0, 30, len(seconds)),
                  "listen_drops": np.cumsum(rng.integers(0, 2, len(seconds))),
                  "uplink_util": rng.uniform(0.2, 1.0, len(seconds))}).to_csv(path / "counters.csv", index=False)
    periods = [{"start_s": 0.0, "end_s": 5.0, "target_rho": 0.2, "achieved_rho": 0.21},
               {"start_s": 5.0, "end_s": 10.0, "target_rho": 1.2, "achieved_rho": 1.18}]
    write_json(path / "run.json", {"run": run, "variant": variant, "repetition": rep, "sweep_value": sweep_value,
                                   "config": {"network": {"link_mbps": 10.0}, "server": {"kind": "sojourn"}},
                                   "inputs": {"periods": periods}})
    write_json(path / "status.json", {"state": state, "reason": "" if state == "complete" else "interrupted (test)"})
    write_json(path / "versions.json", {"kernel": "test", "sojourn_engine": "test"})
    write_json(path / "summary.json", summarize_repetition(path, 10e6))


@pytest.fixture
def policy_results(tmp_path):
    directory = tmp_path / "demo"
    directory.mkdir()
    (directory / "spec.toml").write_text('name = "demo"\ndescription = "stored-results test"\nbaseline = "fair"\n')
    for rep in range(2):
        write_repetition(directory, "fair", rep, slow_factor=8.0, seed=rep)
        write_repetition(directory, "srpt", rep, slow_factor=1.0, seed=10 + rep,
                         state="partial" if rep == 1 else "complete")
    return directory


@pytest.fixture
def sweep_results(tmp_path):
    directory = tmp_path / "profile"
    directory.mkdir()
    (directory / "spec.toml").write_text('name = "profile"\n[sweep]\nparameter = "workload.rho"\nvalues = [0.5, 0.9]\n')
    for variant in ("fair", "srpt"):
        for rho in (0.5, 0.9):
            for rep in range(2):
                write_repetition(directory, f"{variant}-rho={rho}", rep, slow_factor=rho * (5 if variant == "fair" else 1),
                                 sweep_value=rho, variant=variant, seed=rep + int(rho * 10))
    return directory


def images(report: Path) -> list[bytes]:
    text = report.read_text()
    return [base64.b64decode(data) for data in re.findall(r'src="data:image/png;base64,([^"]+)"', text)]


def test_report_is_self_contained(policy_results, tmp_path):
    report = build_report(policy_results, export_dir=tmp_path / "figures")
    text = report.read_text()
    # No external references of any kind.
    assert not re.search(r'(src|href)="(?!data:)', text)
    assert "http://" not in text and "https://" not in text
    pngs = images(report)
    # Over time, CCDF, by size, counters, and one decile figure per run.
    assert len(pngs) == 6
    assert all(png.startswith(b"\x89PNG\r\n\x1a\n") for png in pngs)
    exported = [f"figure-0{i}.png" for i in range(1, 7)]
    assert sorted(p.name for p in (tmp_path / "figures").iterdir()) == exported + ["figures.json"]
    index = json.loads((tmp_path / "figures" / "figures.json").read_text())
    assert [f["file"] for f in index] == exported and all(f["caption"] for f in index)
    assert index[1]["caption"].startswith("Complementary CDF")
    # Summary rows for both runs, the partial one marked, ratios relative to fair.
    assert re.search(r"<td>srpt <span class=\"partial\">\(partial or invalid\)</span></td>", text)
    fair_row = re.search(r"<tr><td>fair</td><td>2</td>(.*?)</tr>", text).group(1)
    assert fair_row.endswith("<td>1</td><td>1</td>")
    assert "stored-results test" in text and "Versions, kernel and parameters" in text


def test_sweep_report_has_range_and_profile_plots(sweep_results):
    report = build_report(sweep_results)
    text = report.read_text()
    assert "Sweep of workload.rho" in text
    assert "Latency profile vs load" in text and "Service inversion vs load" in text
    # 4 runs: over time + CCDF + size + counters + 4 deciles + range + profile + CDFs by load + inversion.
    assert "CDF of response times of the completed requests at each load" in text
    assert len(images(report)) == 12


def test_missing_results_are_reported(tmp_path):
    with pytest.raises(FileNotFoundError, match="holds no run results"):
        build_report(tmp_path)


@pytest.mark.skipif(shutil.which("chromium") is None, reason="chromium not installed")
def test_report_opens_in_chromium(policy_results, tmp_path):
    report = build_report(policy_results)
    expected = len(images(report))
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    screenshot = SCREENSHOTS / "report-chromium.png"
    screenshot.unlink(missing_ok=True)
    common = ["chromium", "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
              "--disable-component-update", "--disable-sync", "--no-first-run", "--enable-logging=stderr", "--v=0"]
    dom = subprocess.run(common + [f"--user-data-dir={tmp_path / 'profile-dom'}", "--virtual-time-budget=5000",
                                   "--dump-dom", report.as_uri()], capture_output=True, text=True, timeout=120)
    assert dom.returncode == 0, dom.stderr[-2000:]
    # Every figure decoded (naturalWidth > 0): the report's load handler counted them.
    match = re.search(r'data-figures="(\d+)"', dom.stdout)
    assert match, dom.stdout[:500]
    assert int(match.group(1)) == expected
    console_errors = [line for line in dom.stderr.splitlines()
                      if "CONSOLE" in line and ("error" in line.lower() or "Uncaught" in line)]
    assert not console_errors, console_errors
    shot = subprocess.run(common + [f"--user-data-dir={tmp_path / 'profile-shot'}", "--window-size=1200,2400",
                                    f"--screenshot={screenshot}", report.as_uri()],
                          capture_output=True, text=True, timeout=120)
    assert shot.returncode == 0, shot.stderr[-2000:]
    assert screenshot.read_bytes().startswith(b"\x89PNG")
    assert screenshot.stat().st_size > 20_000  # a rendered page, not a blank one


MEASURED = Path(__file__).resolve().parent / "data" / "measured" / "smoke"


def test_report_on_measured_results(tmp_path):
    """A stored real run (5 s at rho 0.6 through the testbed: sojourn fair and srpt with
    kernel bands, recorded by `sojourn run`) rebuilds into a report offline."""
    directory = tmp_path / "smoke"
    shutil.copytree(MEASURED, directory)
    report = build_report(directory)
    text = report.read_text()
    assert len(images(report)) == 6
    fair = json.loads((directory / "fair" / "0" / "summary.json").read_text())
    srpt = json.loads((directory / "srpt" / "0" / "summary.json").read_text())
    ratio = srpt["response_mean"] / fair["response_mean"]
    srpt_row = re.search(r"<tr><td>srpt</td><td>1</td>(.*?)</tr>", text).group(1)
    assert f"<td>{ratio:.3g}</td>" in srpt_row
    assert "(partial)" not in text


def test_report_compares_each_run_with_its_ideal(policy_results):
    """Every run gets "measured / ideal" rows against fluid PS and SRPT of its own requests;
    on these records (each response is its transfer time stretched, plus 2 ms) the measured
    mean exceeds both ideals, and FAIR's (stretched 8x more) exceeds them by more."""
    text = build_report(policy_results).read_text()
    # Without the section the size figure's caption carries _ideal's note: why the ideal
    # references were unavailable or failed.
    captions = [c for c in re.findall(r"<figcaption>(.*?)</figcaption>", text, re.S) if "size" in c]
    assert "<h2>Measured against ideal</h2>" in text, captions
    section = text[text.index("<h2>Measured against ideal</h2>"):]
    section = section[:section.index("</table>")]
    rows = [re.findall(r"<td>(.*?)</td>", row) for row in re.findall(r"<tr>(.*?)</tr>", section, re.S)]
    ratio = {(cells[0], cells[1]): float(cells[-1]) for cells in rows if cells}
    assert sorted(ratio) == [("fair", "PS"), ("fair", "SRPT"), ("srpt", "PS"), ("srpt", "SRPT")]
    assert all(value > 1 for value in ratio.values()), ratio
    assert ratio["fair", "SRPT"] > ratio["srpt", "SRPT"], ratio


def test_a_sweep_over_named_points_is_drawn_in_the_specs_order():
    """workload.profile W1..W10 (000 Fig. 12) is a sweep of names, not numbers."""
    import pandas as pd

    from sojourn.report import figures

    table = pd.DataFrame({"variant": ["fair", "fair", "srpt", "srpt"], "sweep_value": ["W2", "W10", "W2", "W10"],
                          "response_mean": [1.0, 2.0, 0.1, 0.2], "response_mean_lo": [0.9, 1.9, 0.1, 0.2],
                          "response_mean_hi": [1.1, 2.1, 0.1, 0.2]})
    figure = figures.range_figure(table, "workload.profile", "response_mean", "mean (s)")
    axis = figure.axes[0]
    assert [tick.get_text() for tick in axis.get_xticklabels()] == ["W2", "W10"]
    assert list(axis.lines[0].get_xdata()) == [0, 1]
