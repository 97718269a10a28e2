"""Every input a fuzzer found to break a parser (python/tests/data/fuzz/<target>/), replayed
through the same target (fuzz/python/targets.py) so it stays fixed; plus the trace file's
round trip of paths CSV must quote (issue 15: `"GET /a\\"quoted\\".html` stopped an import)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sojourn.workloads import io as trace_io

REPO = Path(__file__).resolve().parents[2]
spec = importlib.util.spec_from_file_location("fuzz_targets", REPO / "fuzz" / "python" / "targets.py")
targets = importlib.util.module_from_spec(spec)
spec.loader.exec_module(targets)

CASES = sorted((REPO / "python" / "tests" / "data" / "fuzz").glob("*/*"))


@pytest.mark.parametrize("case", CASES, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_fuzzer_findings_stay_fixed(case):
    targets.TARGETS[case.parent.name](case.read_bytes())


def test_an_escaped_quote_in_a_logged_request_imports_percent_encoded():
    from sojourn.workloads.importers import import_clf

    frame, report = import_clf(REPO / "python/tests/data/fuzz/clf/escaped-quote-ipv6-post-dash-size.log")
    assert sorted(frame["path"]) == ["/a%22quoted%22.html", "/b"] and report.skipped == 0


# Paths as a trace may hold them: no comma or whitespace (docs/formats.md), anything else.
PATHS = st.text(st.characters(blacklist_characters=", \t\r\n", blacklist_categories=("Cs", "Zs", "Zl", "Zp", "Cc")),
                max_size=30).map(lambda s: "/" + s)


@settings(max_examples=60, deadline=None)
@given(st.lists(PATHS, min_size=1, max_size=8))
def test_trace_paths_round_trip_through_the_file(tmp_path_factory, paths):
    frame = pd.DataFrame({"arrival_s": [float(i) for i in range(len(paths))], "client": [0] * len(paths),
                          "path": paths, "size": [1] * len(paths)})
    written = trace_io.write_trace(frame, tmp_path_factory.mktemp("trace") / "trace.csv")
    assert list(trace_io.read_trace(written)["path"]) == paths
