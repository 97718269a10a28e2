"""Property tests (hypothesis) for the workload invariants that every input must keep."""

import numpy as np
import pandas as pd
from hypothesis import given, settings
from hypothesis import strategies as st

from sojourn.workloads import docroot, io, models, shaping


@given(path=st.text(alphabet="abcdefghijklmnopqrstuvwxyz0123456789/._-%", min_size=1, max_size=30), offset=st.integers(0, 5000), length=st.integers(0, 3000))
def test_content_slices_agree(path, offset, length):
    path = "/" + path
    whole = docroot.content(path, 0, offset + length)
    part = docroot.content(path, offset, length)
    assert part == whole[offset:]
    assert len(part) == length
    if length:
        assert part[0] == (docroot.phase(path) + offset) % 251


@st.composite
def traces(draw):
    n = draw(st.integers(50, 3000))
    seed = draw(st.integers(0, 2**31))
    rng = np.random.default_rng(seed)
    sizes = models.sample(models.wc98(), n, rng)
    gaps = rng.exponential(0.01, n) * draw(st.sampled_from([0.0, 1.0]))  # 0: all at one instant
    return pd.DataFrame({"arrival_s": np.cumsum(gaps), "client": np.zeros(n, np.uint32), "path": [f"/o/{i}" for i in range(n)], "size": sizes})


@settings(max_examples=40, deadline=None)
@given(
    trace=traces(),
    low_s=st.floats(0.5, 20),
    high_s=st.floats(0.5, 20),
    low_rho=st.floats(0.05, 1.0),
    high_rho=st.floats(1.0, 5.0),
    link=st.sampled_from([1e6, 10e6]),
    poisson=st.booleans(),
)
def test_shape_invariants(trace, low_s, high_s, low_rho, high_rho, link, poisson):
    profile = shaping.alternating(low_s, high_s, low_rho, high_rho)
    try:
        shaped, periods = shaping.shape(trace, link, profile=profile, interarrivals="poisson" if poisson else "scaled")
    except ValueError as error:
        assert "longer trace" in str(error)
        return
    io.validate_trace(shaped)
    # Each request at most once; every shaped request comes from the trace.
    assert shaped["path"].is_unique
    assert set(shaped["path"]) <= set(trace["path"])
    assert len(shaped) == periods["requests"].sum()
    # The table describes the shaped trace: requests and bytes per period.
    ends = periods["end_s"].to_numpy()
    bins = np.minimum(np.searchsorted(ends, shaped["arrival_s"].to_numpy(), side="right"), len(periods) - 1)
    assert np.array_equal(np.bincount(bins, minlength=len(periods)), periods["requests"].to_numpy())
    per_bytes = np.bincount(bins, weights=shaped["size"].to_numpy(float), minlength=len(periods))
    np.testing.assert_allclose(per_bytes, periods["bytes"].to_numpy(), rtol=1e-12)
    # Cumulative bytes never drift: each boundary is within one request of its target.
    target = np.cumsum(periods["target_rho"] * link / 8 * (periods["end_s"] - periods["start_s"]))
    achieved = np.cumsum(periods["bytes"])
    assert np.all(np.abs(achieved - target) <= trace["size"].max())


# Any path a trace accepts (docs/formats.md: starts with '/', no ',' or whitespace), quotes
# included, is written (quoted where CSV must) and read back identically.
TRACE_PATHS = st.text(alphabet=st.characters(blacklist_categories=("Cs", "Cc", "Zs", "Zl", "Zp"), blacklist_characters=","),
                      max_size=20).map(lambda tail: "/" + tail)


@settings(max_examples=60, deadline=None)
@given(paths=st.lists(TRACE_PATHS, min_size=1, max_size=5))
def test_trace_paths_round_trip(tmp_path_factory, paths):
    trace = pd.DataFrame({"arrival_s": np.arange(len(paths), dtype=float), "client": np.zeros(len(paths), np.uint32),
                          "path": paths, "size": np.ones(len(paths), np.uint64)})
    back = io.read_trace(io.write_trace(trace, tmp_path_factory.mktemp("rt") / "t.csv"))
    assert list(back["path"]) == paths
