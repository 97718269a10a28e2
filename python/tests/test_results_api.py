"""Results as data: Parquet copies with the documented column types, the result format
version (format-1 results still read), the notebook API (sojourn.results.open) and the
report reading the ideal schedules stored when the repetition finished."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pyarrow.parquet as pq
import pytest

import sojourn.results
from sojourn.analysis.records import DTYPES, INTERVAL_DTYPES, STORED_INTEGERS, read_intervals, read_records
from sojourn.analysis.results import FORMAT_VERSION, format_version
from sojourn.runner.derived import write_derived
from sojourn.report.html import build_report
from test_report_html import write_repetition


def write_intervals(path, seconds: int = 20) -> None:
    rng = np.random.default_rng(seconds)
    pd.DataFrame({"t_s": np.arange(seconds), "issued": rng.integers(0, 30, seconds), "completed": rng.integers(0, 30, seconds),
                  "bytes": rng.integers(0, 10**6, seconds), "in_flight": rng.integers(0, 9, seconds),
                  "errors": np.zeros(seconds, int), "connections_open": rng.integers(0, 9, seconds)}).to_csv(path, index=False)


@pytest.fixture
def sweep(tmp_path):
    directory = tmp_path / "profile"
    directory.mkdir()
    (directory / "spec.toml").write_text('name = "profile"\n[sweep]\nparameter = "workload.rho"\nvalues = [0.5, 0.9]\n')
    for variant in ("fair", "srpt"):
        for rho in (0.5, 0.9):
            for rep in range(2):
                run = f"{variant}-rho={rho}"
                write_repetition(directory, run, rep, slow_factor=rho * (5 if variant == "fair" else 1),
                                 sweep_value=rho, variant=variant, seed=rep + int(rho * 10))
                write_intervals(directory / run / str(rep) / "intervals.csv")
    return directory


def test_parquet_copies_keep_values_and_documented_types(sweep):
    rep = sweep / "fair-rho=0.5" / "0"
    assert format_version(rep) == 1
    assert write_derived(rep, 10e6) == []
    assert format_version(rep) == FORMAT_VERSION == 2
    from_csv, from_parquet = read_records(rep / "records.csv"), read_records(rep / "records.parquet")
    stored = pd.read_parquet(rep / "records.parquet")
    assert {c: str(t) for c, t in stored.dtypes.items() if c in DTYPES} == \
        {c: str(pd.Series(dtype=t).dtype) for c, t in {**DTYPES, **STORED_INTEGERS}.items()}
    # Integers, not floats, with unknown values as nulls (an attempt with no response head).
    assert stored["status"].dtype == "UInt16" and stored["bytes"].dtype == "UInt64"
    pd.testing.assert_frame_equal(from_csv, from_parquet)
    intervals = pd.read_parquet(rep / "intervals.parquet")
    assert dict(intervals.dtypes.astype(str)) == INTERVAL_DTYPES
    pd.testing.assert_frame_equal(read_intervals(rep / "intervals.csv"), intervals)
    assert pd.read_parquet(rep / "ideal.parquet")["policy"].unique().tolist() == ["ps", "srpt"]
    assert pq.ParquetFile(rep / "records.parquet").metadata.row_group(0).column(0).compression == "ZSTD"


def test_notebook_api_over_mixed_format_versions(sweep):
    # Half the repetitions are format 2, half format 1 (CSV only): both read the same.
    for rep_dir in sorted(sweep.glob("*/0")):
        write_derived(rep_dir, 10e6)
    exp = sojourn.results.open(sweep)
    assert exp.runs == ["fair-rho=0.5", "fair-rho=0.9", "srpt-rho=0.5", "srpt-rho=0.9"]
    records = exp.records()
    assert list(records.columns[:4]) == ["run", "variant", "sweep_value", "rep"]
    assert len(records) == 8 * 400
    assert records.groupby(["variant", "sweep_value", "rep"]).size().tolist() == [400] * 8
    assert {r.format_version for r in exp.repetitions} == {1, 2}
    intervals = exp.intervals()
    assert len(intervals) == 8 * 20 and intervals["completed"].dtype == np.int64
    assert set(exp.ideal()["rep"]) == {0}  # only the format-2 repetitions have stored ideals
    table = exp.table(baseline="fair-rho=0.5")
    assert table.loc[table["run"] == "fair-rho=0.5", "mean_ratio"].item() == 1.0
    assert len(exp.summaries()) == 8


def test_report_reads_stored_ideal_and_says_when_it_simulates(sweep, monkeypatch):
    for rep_dir in sweep.glob("*/*"):
        write_derived(rep_dir, 10e6)
    # With no engine at all the report still has the ideal comparison: it only reads.
    monkeypatch.setenv("SOJOURN_ENGINE", str(sweep / "no-engine-here"))
    text = build_report(sweep).read_text()
    assert "<h2>Measured against ideal</h2>" in text and "simulated while rendering" not in text
    for ideal in sweep.glob("*/*/ideal.parquet"):
        ideal.unlink()
    for fmt in sweep.glob("*/*/format.json"):
        fmt.unlink()
    monkeypatch.delenv("SOJOURN_ENGINE")
    text = build_report(sweep).read_text()
    assert "simulated while rendering" in text and "predates ideal.parquet" in text


def test_the_first_periods_load_is_read_from_the_uplinks_counters_inside_it(tmp_path):
    """000 §2.3 measured load as the uplink's utilization in a period that starts on an empty
    system: the bytes sent between the first period's first and last counter samples, over
    the link rate; nothing without a shaped trace (no periods in run.json) or two samples."""
    from sojourn.analysis.results import first_period_load, trace_periods

    (tmp_path / "run.json").write_text(json.dumps(
        {"inputs": {"periods": [{"start_s": 0.0, "end_s": 10.0, "target_rho": 0.9},
                                {"start_s": 10.0, "end_s": 20.0, "target_rho": 0.5}]}}))
    periods = trace_periods(tmp_path)
    assert [p["target_rho"] for p in periods] == [0.9, 0.5]
    # 10 Mbit/s link: 11.25 MB in the first 10 s is 0.9 of it; the second period's bytes do not count.
    counters = pd.DataFrame({"t_s": [0.0, 5.0, 10.0, 15.0], "uplink_tx_bytes": [0, 5_625_000, 11_250_000, 90_000_000]})
    load = first_period_load(counters, periods, link_bps=10e6)
    assert load == {"first_period_target_rho": 0.9, "first_period_wire_rho": pytest.approx(0.9)}
    assert first_period_load(counters, trace_periods(tmp_path / "absent"), 10e6) == {}
    assert first_period_load(counters.iloc[:1], periods, 10e6) == {}


def test_a_redrawn_repetition_is_summarized_by_the_current_analysis_keeping_its_fidelity(tmp_path):
    """`sojourn reproduce --redraw` rewrites a repetition's summary.json from its saved files
    (a figure added to the analysis since it ran reaches its publication), keeping the fidelity
    record its run made; a repetition with classes of sessions gets their summary too."""
    import json

    from sojourn.reproduce.publish import resummarize
    from sojourn.runner.layout import write_json

    write_repetition(tmp_path, "fair", 0, slow_factor=1.0)
    rep = tmp_path / "fair" / "0"
    write_json(rep / "summary.json", {"response_mean": -1.0, "fidelity": {"valid": True, "violations": []}})
    resummarize(rep)
    summary = json.loads((rep / "summary.json").read_text())
    assert summary["response_mean"] > 0 and summary["fidelity"] == {"valid": True, "violations": []}
    assert "size_largest_1pct_mean" in summary and "sessions" not in summary
    write_json(rep / "classes.json", {"class_names": ["all"], "delay_bounds_s": [1.0], "address_classes": [0]})
    resummarize(rep)
    sessions = json.loads((rep / "summary.json").read_text())["sessions"]
    assert sessions["class_names"] == ["all"] and sessions["overall"]["requests"] == 400
