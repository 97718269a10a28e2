"""Size models hit their published statistics (fixed seeds, stated tolerances);
catalogues, arrivals and make_trace are deterministic by seed."""

import math

import numpy as np
import pandas as pd
import pytest

from sojourn.workloads import models, stats

N = 1_000_000


def sample_stats(model, seed=1, n=N):
    sizes = np.sort(models.sample(model, n, np.random.default_rng(seed)))
    return sizes, {
        "mean": sizes.mean(),
        "min": int(sizes[0]),
        "max": int(sizes[-1]),
        "median": float(np.median(sizes)),
        "p90": float(np.quantile(sizes, 0.9)),
        "top1": stats.top_share(sizes, 0.01),
        "top2.5": stats.top_share(sizes, 0.025),
        "top3": stats.top_share(sizes, 0.03),
    }


def test_wc98_matches_000_section_2_1():
    sizes, s = sample_stats(models.wc98())
    assert s["mean"] == pytest.approx(5000, rel=0.06)  # "mean ... is 5K bytes"
    assert s["min"] >= 41 and s["min"] <= 45  # "minimum ... 41 byte"
    assert 1.9e6 <= s["max"] <= 2.02e6  # "maximum ... 2.02 MB"
    assert np.mean(sizes < 1024) >= 0.50  # "50% of files have size less than 1K"
    assert np.mean(sizes < 1024) <= 0.55
    assert np.mean(sizes < 9300) == pytest.approx(0.90, abs=0.01)  # "90% ... less than 9.3K"
    assert s["top3"] > 0.50  # "largest < 3% of the requests make up > 50% of the total"
    assert s["top3"] < 0.56
    assert models.wc98().alpha < 1.5  # "Pareto ... alpha-parameter less than 1.5"
    assert stats.tail_alpha(sizes) < 1.5


def test_nasa_matches_000_appendix():
    sizes, s = sample_stats(models.nasa())
    assert s["mean"] == pytest.approx(19000, rel=0.05)  # "mean file size of 19 Kbytes"
    assert 50 <= s["min"] <= 55  # "minimum file size is 50 bytes"
    assert 1.8e6 <= s["max"] <= 1.93e6  # "maximum file size is 1.93 Mbytes"
    assert s["top2.5"] == pytest.approx(0.50, abs=0.03)  # "largest 2.5% ... make up 50%"


def test_surge_is_004_table_1_exactly():
    model = models.surge()
    assert (model.mu, model.sigma, model.cutoff, model.alpha, model.maximum) == (7.630, 1.001, 9020.0, 1.0, 1e10)
    # The table's two densities carry 0.9300 and 0.0700 of the probability.
    assert model.tail_weight == pytest.approx(0.0700, abs=0.0005)
    assert model.mean == pytest.approx(11108, rel=0.001)  # 004 §4.1: "the mean ... is 11108"
    sizes, s = sample_stats(model)
    assert np.mean(sizes >= 9020) == pytest.approx(model.tail_weight, abs=0.002)
    assert np.mean(sizes < 5000) > 0.5  # "most files are small -- less than 5000 bytes"
    body = np.log(sizes[sizes < 9020].astype(float))
    # Body is the lognormal(7.630, 1.001) truncated at 9020: its median is exp(mu) shifted by the truncation.
    expected_median = math.exp(7.630 + 1.001 * _ndtri(0.5 * _ndtr((math.log(9020) - 7.630) / 1.001)))
    assert math.exp(np.median(body)) == pytest.approx(expected_median, rel=0.01)


def test_surge_tail_is_bounded_pareto_alpha_1():
    model = models.surge()
    sizes, _ = sample_stats(model)
    tail = sizes[sizes >= 9020].astype(float)
    # Pareto(alpha=1) above 9020: Pr{X > x | X >= 9020} = 9020 / x (p = 1e10 is far away).
    for x in (2e4, 1e5, 1e6):
        assert np.mean(tail > x) == pytest.approx(9020 / x, rel=0.06)


def test_specweb99_classes_and_directories():
    model = models.specweb99(data_set_bytes=3.3e9)
    assert model.directories == 660
    sizes, s = sample_stats(model)
    shares = [np.mean((sizes >= lo) & (sizes <= hi)) for lo, hi in ((100, 900), (1000, 9000), (10000, 90000), (100000, 900000))]
    assert shares == pytest.approx([0.35, 0.50, 0.14, 0.01], abs=0.003)
    assert s["mean"] == pytest.approx(14675, rel=0.02)  # 001 §2.4: "roughly 14 KB"
    catalogue = models.build_catalogue(model, None, 1.0, np.random.default_rng(0))
    assert len(catalogue) == 660 * 36
    assert catalogue.paths[0] == "/specweb/dir00000/class0_0" and catalogue.sizes[0] == 100
    # Directories Zipf(1): directory 0 is requested twice as often as directory 1.
    per_directory = catalogue.popularity.reshape(660, 36).sum(axis=1)
    assert per_directory[0] / per_directory[1] == pytest.approx(2.0)


def test_bounded_pareto_and_exponential_means():
    bp = models.bounded_pareto(k=1000, p=1e7, alpha=1.1)
    sizes = models.sample(bp, N, np.random.default_rng(2)).astype(float)
    assert sizes.min() >= 1000 and sizes.max() <= 1e7
    assert np.mean(sizes > 1e4) == pytest.approx((1000 / 1e4) ** 1.1, rel=0.03)
    ex = models.exponential(mean=5000)
    assert models.sample(ex, N, np.random.default_rng(2)).mean() == pytest.approx(5000, rel=0.01)
    assert ex.mean == 5000


@pytest.mark.parametrize("bad", [dict(k=0, p=10, alpha=1), dict(k=10, p=5, alpha=1), dict(k=1, p=5, alpha=-1)])
def test_bounded_pareto_rejects_bad_parameters(bad):
    with pytest.raises(ValueError, match="bounded_pareto"):
        models.bounded_pareto(**bad)


def test_unknown_model_names_the_accepted_ones():
    with pytest.raises(ValueError, match="accepted: wc98, nasa"):
        models.model_by_name("apache")


def test_catalogue_requests_follow_the_model_and_objects_repeat():
    trace = models.make_trace("wc98", n_requests=600_000, rate=1000, seed=7)
    sizes = np.sort(trace["size"].to_numpy())
    assert trace["path"].nunique() < 20_000  # objects repeat
    assert trace["path"].value_counts().iloc[0] > 0.05 * len(trace)  # Zipf(1): the top object is hot
    # Request-weighted sizes follow the model within the largest popularity share (~10 %).
    assert np.mean(sizes < 1024) == pytest.approx(0.5, abs=0.1)
    assert np.mean(sizes < 9300) == pytest.approx(0.9, abs=0.02)
    assert sizes.mean() == pytest.approx(5000, rel=0.08)
    assert stats.top_share(sizes, 0.03) > 0.5
    # Hot objects (> 0.1 % of requests) stay below the 90th percentile.
    share = trace["path"].value_counts(normalize=True)
    hot_sizes = trace.drop_duplicates("path").set_index("path")["size"][share[share > 0.001].index]
    assert hot_sizes.max() <= models.wc98().quantile(np.array([0.9]))[0]
    # A path always has the same size.
    assert (trace.groupby("path")["size"].nunique() == 1).all()


def test_same_seed_same_trace_other_seed_other_trace():
    a = models.make_trace("nasa", n_requests=20_000, rho=0.8, link_bps=10e6, seed=3, arrivals="onoff", locality=0.2)
    b = models.make_trace("nasa", n_requests=20_000, rho=0.8, link_bps=10e6, seed=3, arrivals="onoff", locality=0.2)
    c = models.make_trace("nasa", n_requests=20_000, rho=0.8, link_bps=10e6, seed=4, arrivals="onoff", locality=0.2)
    pd.testing.assert_frame_equal(a, b)
    assert not a["path"].equals(c["path"])


def test_rho_sets_the_rate_from_the_model_mean():
    trace = models.make_trace(models.exponential(10_000), n_requests=200_000, rho=0.8, link_bps=8e6, seed=1)
    # rate = rho * link / 8 / mean = 0.8 * 1e6 / 1e4 = 80 requests/s
    assert len(trace) / trace["arrival_s"].iloc[-1] == pytest.approx(80, rel=0.01)
    offered = trace["size"].sum() * 8 / trace["arrival_s"].iloc[-1] / 8e6
    assert offered == pytest.approx(0.8, rel=0.03)


def test_duration_and_clients():
    trace = models.make_trace("surge", duration_s=50, rate=200, clients=7, seed=1)
    assert trace["arrival_s"].iloc[-1] < 50
    assert len(trace) == pytest.approx(10_000, rel=0.05)
    assert set(trace["client"].unique()) == set(range(7))


def test_on_off_arrivals_keep_the_mean_rate_and_are_burstier():
    rng = np.random.default_rng(5)
    times = models.on_off_arrivals(1_000_000, rate=100, on_s=2, off_s=3, rng=rng)
    assert np.all(np.diff(times) >= 0)
    assert len(times) / times[-1] == pytest.approx(100, rel=0.05)
    counts = np.bincount(times.astype(int))
    poisson = np.bincount(models.poisson_arrivals(1_000_000, 100, np.random.default_rng(5)).astype(int))
    assert counts.var() / counts.mean() > 10 * poisson.var() / poisson.mean()


def test_locality_repeats_recent_objects_and_keeps_the_popularity():
    rng = np.random.default_rng(1)
    objects = rng.integers(0, 100_000, 100_000)
    local = models.apply_locality(objects, probability=0.5, mean_distance=20, rng=np.random.default_rng(2))
    recent = lambda o: np.mean([o[i] in o[max(0, i - 100) : i] for i in range(1000, 3000)])
    assert recent(local) > 0.4 > recent(objects) + 0.3
    assert set(np.unique(local)) <= set(np.unique(objects))


@pytest.mark.parametrize(
    "kwargs, message",
    [
        (dict(n_requests=10), "rate"),
        (dict(n_requests=10, duration_s=5, rate=1), "exactly one"),
        (dict(n_requests=10, rate=1, rho=1), "either rate or rho"),
        (dict(n_requests=10, rate=-1), "rate must be > 0"),
        (dict(n_requests=10, rate=1, arrivals="weibull"), "accepted: poisson, onoff"),
        (dict(n_requests=10, rate=1, clients=0), "clients"),
    ],
)
def test_make_trace_rejects_bad_arguments(kwargs, message):
    with pytest.raises(ValueError, match=message):
        models.make_trace("wc98", **kwargs)


def _ndtr(x):
    return 0.5 * math.erfc(-x / math.sqrt(2))


def _ndtri(p):
    from scipy.special import ndtri

    return float(ndtri(p))
