"""Import speed and peak memory of `sojourn trace import clf` on synthetic Common Log
Format files, beside a plain read of the same bytes with pyarrow's CSV reader (one column
per line: the least any reader of the file does). Each measurement is its own process
under GNU time (wall seconds, peak RSS). Run through bench/import/run.sh."""

import argparse
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import polars as pl

HOSTS, PATHS = 20_000, 5_000
START = 804_571_200  # 1 July 1995, as the NASA log
# Each child prints, last, the seconds its work took after start-up and imports.
PLAIN_READ = """
import sys, time, pyarrow as pa, pyarrow.csv as csv
start = time.perf_counter()
table = csv.read_csv(sys.argv[1], read_options=csv.ReadOptions(column_names=["line"], block_size=16 << 20),
                     parse_options=csv.ParseOptions(delimiter="\\x1f", quote_char=False),
                     convert_options=csv.ConvertOptions(column_types={"line": pa.string()}))
print(time.perf_counter() - start)
"""
SOJOURN_IMPORT = """
import sys, time
from sojourn import cli
import sojourn.workloads.cli  # the subcommand's modules, imported lazily by cli.main
start = time.perf_counter()
assert cli.main(["trace", "import", "clf", sys.argv[1], "-o", sys.argv[2]]) == 0
print(time.perf_counter() - start)
"""


def synthetic(path: Path, lines: int, seed: int = 1) -> None:
    """NASA-like lines: 3 days, 20000 hosts, 5000 paths by Zipf popularity, 90 % 200."""
    rng = np.random.default_rng(seed)
    with open(path, "wb") as out:
        for start in range(0, lines, 1_000_000):
            n = min(1_000_000, lines - start)
            seconds = START + np.sort(rng.integers(0, 3 * 86400, n))
            status = rng.choice(np.array([200, 304, 404]), n, p=[0.9, 0.08, 0.02])
            size = np.where(status == 200, rng.integers(100, 100_000, n).astype(str), "-")
            frame = pl.DataFrame({
                "host": rng.integers(0, HOSTS, n), "path": np.minimum(rng.zipf(1.3, n), PATHS),
                "time": pl.from_epoch(pl.Series(seconds - 4 * 3600), time_unit="s"), "status": status, "size": size})
            frame.select(pl.concat_str(
                pl.lit("host"), pl.col("host"), pl.lit(".example.com - - ["),
                pl.col("time").dt.strftime("%d/%b/%Y:%H:%M:%S -0400"), pl.lit('] "GET /shuttle/missions/sts-'),
                pl.col("path"), pl.lit('/mission.html HTTP/1.0" '), pl.col("status"), pl.lit(" "), pl.col("size"),
            )).write_csv(out, include_header=False, quote_style="never")


def timed(command: list[str]) -> tuple[float, float, float]:
    """Seconds of work (after start-up), wall seconds and peak RSS (MiB) of one process."""
    result = subprocess.run(["/usr/bin/time", "-f", "%e %M", *command], capture_output=True, text=True, check=True)
    wall, rss_kib = result.stderr.strip().splitlines()[-1].split()
    return float(result.stdout.strip().splitlines()[-1]), float(wall), int(rss_kib) / 1024


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--lines", type=int, nargs="+", default=[1_000_000, 4_000_000])
    parser.add_argument("--out", type=Path, default=Path("bench/out/import"))
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    rows = []
    for lines in args.lines:
        log = args.out / f"clf-{lines}.log"
        if not log.is_file():
            synthetic(log, lines)
        sojourn = timed([sys.executable, "-c", SOJOURN_IMPORT, str(log), str(args.out / "trace.csv")])
        plain = timed([sys.executable, "-c", PLAIN_READ, str(log)])
        rows.append({"lines": lines, "mb": round(log.stat().st_size / 1e6),
                     "sojourn_s": sojourn[0], "sojourn_wall_s": sojourn[1], "sojourn_rss_mib": round(sojourn[2]),
                     "pyarrow_s": plain[0], "pyarrow_wall_s": plain[1], "pyarrow_rss_mib": round(plain[2])})
        (args.out / "trace.csv").unlink()
    print("seconds of work after start-up (wall of the whole process in brackets), peak RSS of the process")
    print(f"{'lines':>9} {'MB':>4} | {'sojourn s':>14} {'lines/s':>9} {'RSS MiB':>7} | {'pyarrow s':>12} {'lines/s':>9} "
          f"{'RSS MiB':>7} | {'time x':>6} {'RSS x':>5}")
    for r in rows:
        print(f"{r['lines']:>9} {r['mb']:>4} | {r['sojourn_s']:>6.2f} ({r['sojourn_wall_s']:>5.2f}) "
              f"{r['lines'] / r['sojourn_s']:>9.0f} {r['sojourn_rss_mib']:>7} | {r['pyarrow_s']:>5.2f} ({r['pyarrow_wall_s']:>4.2f}) "
              f"{r['lines'] / r['pyarrow_s']:>9.0f} {r['pyarrow_rss_mib']:>7} | {r['sojourn_s'] / r['pyarrow_s']:>6.2f} "
              f"{r['sojourn_rss_mib'] / r['pyarrow_rss_mib']:>5.2f}")
    (args.out / "result.json").write_text(json.dumps(rows, indent=2) + "\n")


if __name__ == "__main__":
    main()
