"""Generate and shape a World-Cup-day-sized trace (000 §2.1: 4.5 million requests) and
write it, timing each stage. Run through bench/workloads/run.sh, which adds peak memory."""

import argparse
import json
import resource
import time
from pathlib import Path

from sojourn.workloads import io, models, shaping


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--requests", type=int, default=4_500_000)
    parser.add_argument("--profile", default="W1")
    parser.add_argument("--link-mbps", type=float, default=10.0)
    parser.add_argument("--out", type=Path, default=Path("bench/out/workloads"))
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    link = args.link_mbps * 1e6
    stages = {}
    start = time.perf_counter()
    trace = models.make_trace("wc98", n_requests=args.requests, rho=1.0, link_bps=link, seed=1)
    stages["generate_s"] = time.perf_counter() - start
    mark = time.perf_counter()
    shaped, periods = shaping.shape(trace, link, profile=args.profile)
    stages["shape_s"] = time.perf_counter() - mark
    mark = time.perf_counter()
    io.write_trace(shaped, args.out / "trace.csv")
    stages["write_s"] = time.perf_counter() - mark
    stages["total_s"] = time.perf_counter() - start
    error = (periods["achieved_rho"] / periods["target_rho"] - 1).abs()
    print(json.dumps({
        "requests": len(trace),
        "shaped_requests": len(shaped),
        "periods": len(periods),
        "max_period_rho_error": round(float(error.max()), 5),
        "csv_bytes": (args.out / "trace.csv").stat().st_size,
        **{k: round(v, 2) for k, v in stages.items()},
        "peak_rss_mib": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024),
    }))


if __name__ == "__main__":
    main()
