"""Benchmark of the counters' socket census (sojourn.testbed.sockdiag), run as root:
``.venv/bin/python bench/counters/bench_counters.py [--case ESTABLISHED,TIME_WAIT,ELSEWHERE ...] [--out bench/out/counters.json]``.

Helpers in a testbed's server namespace hold ESTABLISHED TCP sockets (loopback
connections, each end) and leave TIME_WAIT more (connections opened and closed just
before), while ELSEWHERE established sockets are held in the client namespace. Under
000 §4's persistent overload a server namespace held 12,000-13,700 sockets, 99% in
TIME_WAIT, with an admission policy refusing (27 Nov 2026). Each way of taking the
census is timed (median of 5, wall and the process's own system time), against two
peers on the same sockets:

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
pairs, closed = int(sys.argv[2]), int(sys.argv[3])
resource.setrlimit(resource.RLIMIT_NOFILE, (2 * pairs + 64, resource.getrlimit(resource.RLIMIT_NOFILE)[1]))
server = socket.create_server((sys.argv[1], 0), backlog=4096)  # a free port: the client's ephemeral range is wide
for _ in range(closed):  # the accepted end closes first and waits in TIME_WAIT for 60 s
    client = socket.create_connection(server.getsockname())
    server.accept()[0].close()
    client.close()
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


def hold(tb: Testbed, ns: str, address: str, sockets: int, time_wait: int = 0) -> subprocess.Popen:
    """Helpers in ``ns`` holding ``sockets`` established sockets, at most 16,000 each (the
    testbed's processes may not raise their descriptor limit past its hard 20,000), the
    first leaving ``time_wait`` sockets in TIME_WAIT; the first helper."""
    helpers = []
    for first in range(0, max(sockets, 1), 16000):
        share = min(16000, sockets - first)
        helper = tb.popen(ns, [sys.executable, "-c", HOLD, address, str(share // 2), str(0 if helpers else time_wait)],
                          stdout=subprocess.PIPE, text=True, stderr=subprocess.PIPE)
        if helper.stdout.readline().strip() != "ready":
            raise RuntimeError(f"a helper in {ns} did not open its sockets: {helper.stderr.read()[-500:]}")
        helpers.append(helper)
    return helpers[0]


def measure(established: int, time_wait: int, elsewhere: int) -> dict:
    with Testbed(TestbedConfig(prefix="sjbcn")) as tb:
        helper = hold(tb, tb.server_ns, tb.server_addr, established, time_wait)
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
            figures = {"established": established, "time_wait": time_wait, "elsewhere": elsewhere,
                       "established_counted": counted["established"],
                       "proc": timed(proc), "ss": timed(ss), "sockdiag": timed(diag.census)}
        finally:
            diag.close()
    figures["proc_over_sockdiag"] = figures["proc"]["wall_s"] / figures["sockdiag"]["wall_s"]
    figures["ss_over_sockdiag"] = figures["ss"]["wall_s"] / figures["sockdiag"]["wall_s"]
    return figures


def case(text: str) -> tuple[int, int, int]:
    try:
        established, time_wait, elsewhere = (int(part) for part in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r}: want ESTABLISHED,TIME_WAIT,ELSEWHERE, e.g. 12000,0,60000") from None
    return established, time_wait, elsewhere


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--case", type=case, nargs="+", metavar="E,T,O",
                        default=[(4000, 0, 0), (12000, 0, 0), (12000, 0, 60000), (100, 12000, 0)],
                        help="established and TIME_WAIT sockets in the server namespace, established ones in the "
                             "client namespace (default: %(default)s)")
    parser.add_argument("--out", default="bench/out/counters.json")
    args = parser.parse_args()
    if os.geteuid() != 0:
        print("bench_counters: needs root for the testbed's namespaces", file=sys.stderr)
        return 1
    results = []
    for established, time_wait, elsewhere in args.case:
        figures = measure(established, time_wait, elsewhere)
        results.append(figures)
        print(f"{established} established and {time_wait} TIME_WAIT sockets, {elsewhere} in another namespace: "
              f"/proc/net/tcp {figures['proc']['wall_s'] * 1e3:.1f} ms (system {figures['proc']['system_s'] * 1e3:.1f}), "
              f"ss -tanoi {figures['ss']['wall_s'] * 1e3:.1f} ms, sockdiag census {figures['sockdiag']['wall_s'] * 1e3:.1f} ms "
              f"(system {figures['sockdiag']['system_s'] * 1e3:.1f}); /proc {figures['proc_over_sockdiag']:.1f}x, "
              f"ss {figures['ss_over_sockdiag']:.1f}x the census")
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(results, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
