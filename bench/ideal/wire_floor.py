"""Ideal SRPT on the wire's own bytes, per run of an experiment (docs/analysis.md):

    .venv/bin/python bench/ideal/wire_floor.py results/srpt-ideal

The ideal of against_ideal.py is fluid SRPT over the response bodies (framed at 1448/1514,
1460/1514 without TCP timestamps): a request costs nothing but its body. On the testbed's wire each request also
costs its response head and the connection's packets that carry no body (SYN-ACK, the ACK
of the request, FIN, the ACK of the client's FIN), all sent by the server, so all on the
uplink. This script measures that cost from each run's own counters (bytes the uplink's
classes sent, minus the bodies and the headers of the body packets, per request) and
computes ideal fluid SRPT of the same arrivals with every request that much larger, at the
raw link rate: what no scheduler on that wire can beat. It prints, per size bin (000 §3
cutoffs): measured, ideal and wire-ideal means and the ratios, for each repetition of each run
(for runs with several, the ratios over all requests in each, and their mean and range), and
writes bench/out/<experiment>-wire-floor.json. With --components it also
prints the wire ideal of the first run with each part of the cost alone.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np
import pandas as pd

from each_run import print_spread, repetitions, write_out
from sojourn.analysis.decompose import by_size_bin
from sojourn.analysis.results import server_metric_totals
from sojourn.theory import bounds

def _packets(size: np.ndarray, head: float, mss: int) -> np.ndarray:
    return np.ceil((size + head) / mss)


def _wire_ideal(requests: pd.DataFrame, size: np.ndarray, head: float, per_request: float, link_bps: float,
                mss: int) -> pd.DataFrame:
    # Each packet also carries Ethernet, IP and TCP headers: the frame less its payload.
    wire = size + head + (bounds.FRAME_BYTES - mss) * _packets(size, head, mss) + per_request
    frame = requests.copy()
    frame["expected_size"] = wire
    frame["bytes"] = wire
    out = bounds.ideal(frame, link_bps=link_bps, policies=("srpt",))
    return out[["request_id", "response_s"]].rename(columns={"response_s": "wire_ideal_s"})


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("results", type=Path, help="an experiment's results directory")
    parser.add_argument("--components", action="store_true", help="also the wire ideal with each part of the cost alone")
    args = parser.parse_args()
    out, floors, over_floors = {}, {}, {}
    first = True
    for rep, key in repetitions(args.results):
        link_bps = float(rep.config["network"]["link_mbps"]) * 1e6
        mss = bounds.segment_payload(rep.config["network"].get("tcp", {}).get("timestamps", True))
        frame_headers = bounds.FRAME_BYTES - mss
        counters = rep.table("counters.csv")
        sent = sum(counters[c].iloc[-1] - counters[c].iloc[0] for c in counters.columns
                   if c.startswith("q1_") and c.endswith("_sent_bytes"))
        records = rep.requests()
        requests = records[["request_id", "scheduled_s", "expected_size", "bytes"]].drop_duplicates("request_id")
        size = requests["expected_size"].fillna(requests["bytes"]).astype(float).to_numpy()
        # Everything the uplink sent that is neither a body byte nor a body packet's header
        # (the head, the connection's body-less packets, retransmissions), per request.
        per_request = (sent - size.sum() - frame_headers * _packets(size, 0, mss).sum()) / len(size)
        # The mean head, from what the server says it sent (254 bytes with --head-fields full).
        served = server_metric_totals((rep.directory / "server_metrics.txt").read_text())
        head = (served["server_bytes_sent"] - records["bytes"].sum()) / served["server_responses"]
        connection = per_request - head - frame_headers * (_packets(size, head, mss) - _packets(size, 0, mss)).mean()
        ideal = rep.ideal()
        ideal = ideal[ideal["policy"] == "srpt"][["request_id", "response_s"]].rename(columns={"response_s": "ideal_s"})
        wire = _wire_ideal(requests, size, head, connection, link_bps, mss)
        joined = ideal.merge(wire, on="request_id").merge(
            records[["request_id", "response_s", "size"]].drop_duplicates("request_id"), on="request_id")
        rows = []
        for label, group in by_size_bin(joined):
            measured, ideal_mean, wire_mean = group["response_s"].mean(), group["ideal_s"].mean(), group["wire_ideal_s"].mean()
            rows.append({"size_bin": label, "requests": len(group), "measured_mean_s": measured, "ideal_mean_s": ideal_mean,
                         "wire_ideal_mean_s": wire_mean, "measured_over_ideal": measured / ideal_mean,
                         "wire_ideal_over_ideal": wire_mean / ideal_mean, "measured_over_wire_ideal": measured / wire_mean})
        table = pd.DataFrame(rows)
        every = table[table["size_bin"] == "all"].iloc[0]
        floors.setdefault(rep.run, []).append(float(every["wire_ideal_over_ideal"]))
        over_floors.setdefault(rep.run, []).append(float(every["measured_over_wire_ideal"]))
        out[key] = {"per_request_bytes": per_request, "head_bytes": head, "connection_bytes": connection,
                        "bins": table.to_dict(orient="records")}
        print(f"\n{key}: {per_request:.0f} bytes per request besides the bodies' packets "
              f"(head {head:.0f}, connection packets {connection:.0f})")
        print(table.to_string(index=False, float_format="%.4g"))
        if args.components and first:
            base = joined["ideal_s"].mean()
            print("\nthe wire ideal with each part of the cost (mean, over the ideal's):")
            for head_part, conn, label in [(0, 0, "body packets only (whole packets)"), (head, 0, "+ response head"),
                                           (0, connection, "+ connection packets"), (head, connection, "both (the wire)")]:
                mean = _wire_ideal(requests, size, head_part, conn, link_bps, mss)["wire_ideal_s"].mean()
                print(f"  {label:36s} {mean:.4f} s  x{mean / base:.3f}")
        first = False
    print()
    spread = {"wire_ideal_over_ideal": print_spread("wire ideal / ideal", floors),
              "measured_over_wire_ideal": print_spread("measured / wire ideal", over_floors)}
    if spread["wire_ideal_over_ideal"]:
        out["repetitions"] = spread
    write_out(args.results, "wire-floor", out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
