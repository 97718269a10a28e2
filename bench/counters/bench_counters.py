"""Benchmark of the counters' socket census (sojourn.testbed.sockdiag), run as root:
``.venv/bin/python bench/counters/bench_counters.py [--sockets 4000 12000] [--out bench/out/counters.json]``.

A helper in a testbed's server namespace holds N established TCP sockets (N/2
loopback connections, each end), as a FAIR server holds under 000 §4's persistent
overload. Each way of taking their census is timed (median of 5, wall and the
process's own system time), against two peers on the same sockets:

- ``proc``: reading ``/proc/<pid>/net/tcp`` and ``tcp6``, what the sampler did until
  27 Nov 2026 (the text only, no parsing);
- ``ss``: iproute2's ``ss -tanoiH`` in the namespace, the same netlink dump printed;
- ``sockdiag``: ``SocketDiag.census()``, the dump and the census the sampler now takes.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

from sojourn.testbed import Testbed, TestbedConfig
from sojourn.testbed.sockdiag import SocketDiag

HOLD = """
import resource, socket, sys, time
pairs = int(sys.argv[2])
resource.setrlimit(resource.RLIMIT_NOFILE, (2 * pairs + 64, resource.getrlimit(resource.RLIMIT_NOFILE)[1]))
server = socket.create_server((sys.argv[1], 0), backlog=4096)  # a free port: the client's ephemeral range is wide
held = []
for _ in range(pairs):
    held.append(socket.create_connection(server.getsockname()))
    held.append(server.accept()[0])
print("ready", flush=True)
time.sleep(600)
"""


def timed(action, repeats: int = 5) -> dict:
    """Median wall and system seconds of ``action`` (system time of this process and its
    waited-for children)."""
    walls, systems = [], []
    for _ in range(repeats):
        before, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
        start = time.perf_counter()
        action()
        walls.append(time.perf_counter() - start)
        after, children_after = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
        systems.append(after.ru_stime - before.ru_stime + children_after.ru_stime - children.ru_stime)
    return {"wall_s": statistics.median(walls), "system_s": statistics.median(systems)}


def hold(tb: Testbed, ns: str, address: str, sockets: int) -> subprocess.Popen:
    """Helpers in ``ns`` holding ``sockets`` established sockets, at most 16,000 each (the
    testbed's processes may not raise their descriptor limit past its hard 20,000); the first."""
    helpers = []
    for first in range(0, sockets, 16000):
        share = min(16000, sockets - first)
        helper = tb.popen(ns, [sys.executable, "-c", HOLD, address, str(share // 2)],
                          stdout=subprocess.PIPE, text=True, stderr=subprocess.PIPE)
        if helper.stdout.readline().strip() != "ready":
            raise RuntimeError(f"a helper in {ns} did not open its sockets: {helper.stderr.read()[-500:]}")
        helpers.append(helper)
    return helpers[0]


def measure(sockets: int, elsewhere: int) -> dict:
    with Testbed(TestbedConfig(prefix="sjbcn")) as tb:
        helper = hold(tb, tb.server_ns, tb.server_addr, sockets)
        if elsewhere:
            hold(tb, tb.client_ns, tb.client_addrs["g0"][0], elsewhere)

        def proc():
            for table in ("tcp", "tcp6"):
                Path(f"/proc/{helper.pid}/net/{table}").read_text()

        def ss():
            tb.run(tb.server_ns, ["ss", "-tanoiH"], stdout=subprocess.DEVNULL, check=True)

        diag = SocketDiag(helper.pid)
        try:
            counted = diag.census()
            figures = {"sockets": sockets, "sockets_elsewhere": elsewhere, "established_counted": counted["established"],
                       "proc": timed(proc), "ss": timed(ss), "sockdiag": timed(diag.census)}
        finally:
            diag.close()
    figures["proc_over_sockdiag"] = figures["proc"]["wall_s"] / figures["sockdiag"]["wall_s"]
    figures["ss_over_sockdiag"] = figures["ss"]["wall_s"] / figures["sockdiag"]["wall_s"]
    return figures


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sockets", type=int, nargs="+", default=[4000, 12000], help="established sockets held")
    parser.add_argument("--elsewhere", type=int, nargs="+", default=[0, 60000],
                        help="established sockets held at the same time in the client namespace")
    parser.add_argument("--out", default="bench/out/counters.json")
    args = parser.parse_args()
    if os.geteuid() != 0:
        print("bench_counters: needs root for the testbed's namespaces", file=sys.stderr)
        return 1
    results = []
    for sockets, elsewhere in ((s, e) for e in args.elsewhere for s in args.sockets):
        figures = measure(sockets, elsewhere)
        results.append(figures)
        print(f"{sockets} sockets, {elsewhere} in another namespace: /proc/net/tcp {figures['proc']['wall_s'] * 1e3:.1f} ms "
              f"(system {figures['proc']['system_s'] * 1e3:.1f}), ss -tanoi {figures['ss']['wall_s'] * 1e3:.1f} ms, "
              f"sockdiag census {figures['sockdiag']['wall_s'] * 1e3:.1f} ms (system "
              f"{figures['sockdiag']['system_s'] * 1e3:.1f}); /proc {figures['proc_over_sockdiag']:.1f}x, "
              f"ss {figures['ss_over_sockdiag']:.1f}x the census")
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(results, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
