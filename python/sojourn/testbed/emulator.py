"""Running ``sojourn-engine wan`` in the router namespace and routing through it.

The router namespace holds a persistent TUN device ``<prefix>t``. Policy rules
send every packet that arrives from the server link or the clients' link to the
TUN device (table 100); the emulator reads it, applies the group's pipeline and
writes it back, and packets arriving from the TUN device use the main table, so
they leave on the right link. If the emulator dies, the TUN device has no reader
and traffic stops: a broken emulator can never silently become a plain wire.

The TOML written here is the emulator's config contract (crates/wan/src/config.rs).
"""

from __future__ import annotations

import json
import os
import select
import subprocess
from pathlib import Path
from typing import Callable

import tomli_w

from sojourn.engine import engine_path

from . import sysnet
from .config import TestbedConfig, WanGroup

ROUTE_TABLE = "100"
# Packets the kernel holds for the emulator while it is busy or stalled (default 500 is
# 50 ms at 10k packets/s); overflow is counted (``tun_drops``), never silent.
TUN_QUEUE_PACKETS = 5000
READY_TIMEOUT_S = 10.0
# SCHED_FIFO priority of the emulator: above normal processes (load generator,
# server, builds) and peers run under chrt at lower real-time priorities, so
# emulated delays do not absorb their CPU contention.
REALTIME_PRIORITY = 50
COUNTERS_FILE = "wan_counters.csv"
SUMMARY_FILE = "wan_summary.json"


def direction(group: WanGroup) -> dict:
    """One direction's pipeline parameters: half the RTT each way; an unset rate or
    queue is left out (the emulator's default: no rate limit, a queue from the BDP)."""
    return {key: value for key, value in {
        "delay-ms": group.rtt_ms / 2,
        "jitter-ms": group.jitter_ms / 2,
        "reorder": group.reorder,
        "loss": group.loss,
        "loss-model": group.loss_model,
        "conditional-loss": group.conditional_loss,
        "rate-bps": group.rate_bps,
        "queue-bytes": group.queue_bytes,
        "queue-packets": group.queue_packets,
    }.items() if value is not None}


def emulator_config(cfg: TestbedConfig, addrs: dict[str, list[str]], workdir: Path | None = None) -> dict:
    """The ``sojourn-engine wan --config`` document for ``cfg``: the links and, with
    ``workdir``, how the program runs (its counters and summary there, once a second,
    at ``REALTIME_PRIORITY``)."""
    document = {
        "tun": cfg.dev("t"),
        "seed": cfg.seed,
        "groups": [
            {"name": g.name, "addrs": addrs[g.name], "mtu": g.mtu, "down": direction(g), "up": direction(g)}
            for g in cfg.groups
        ],
    }
    if workdir is not None:
        document |= {"counters": str(workdir / COUNTERS_FILE), "summary": str(workdir / SUMMARY_FILE), "interval": 1.0,
                     "realtime": REALTIME_PRIORITY, "no-offload": not cfg.emulator_offload}
    return document


class Emulator:
    """The emulator process of one testbed."""

    def __init__(self, cfg: TestbedConfig, workdir: Path):
        self.cfg = cfg
        self.ns = cfg.ns("rtr")
        self.tun = cfg.dev("t")
        self.config_path = workdir / "wan.toml"
        self.counters_path = workdir / COUNTERS_FILE
        self.summary_path = workdir / SUMMARY_FILE
        self.log_path = workdir / "wan.log"
        self.document = emulator_config(cfg, cfg.group_addrs(), workdir)
        self.proc: subprocess.Popen | None = None

    def start(self, spawn: Callable[..., subprocess.Popen]) -> subprocess.Popen:
        """Create the TUN device, start the emulator on it, wait until it is ready."""
        self.config_path.write_text(tomli_w.dumps(self.document))
        sysnet.ip(self.ns, "tuntap", "add", "dev", self.tun, "mode", "tun")
        sysnet.ip(self.ns, "link", "set", "dev", self.tun, "txqueuelen", str(TUN_QUEUE_PACKETS), "up")
        sysnet.set_sysctls(self.ns, {f"net.ipv4.conf.{self.tun}.rp_filter": "0"})
        if self.cfg.emulator_rps:
            self.steer_to_every_cpu()
        argv = [str(engine_path()), "wan", "--config", str(self.config_path)]
        with open(self.log_path, "w") as log:
            self.proc = spawn(self.ns, argv, stdout=subprocess.PIPE, stderr=log, text=True)
        ready, _, _ = select.select([self.proc.stdout], [], [], READY_TIMEOUT_S)
        line = self.proc.stdout.readline() if ready else ""
        # Nothing else is printed on stdout: closing our end cannot block the emulator.
        self.proc.stdout.close()
        if line.strip() != "ready":
            self.proc.kill()
            self.proc.wait()
            raise sysnet.NetError(f"`{' '.join(argv)}` did not report ready within {READY_TIMEOUT_S} s "
                                  f"(exit status {self.proc.returncode}): {self.log_path.read_text().strip()}")
        return self.proc

    def rps_path(self) -> str:
        return f"/sys/class/net/{self.tun}/queues/rx-0/rps_cpus"

    def steer_to_every_cpu(self) -> None:
        """RPS on the TUN device's receive queue: a packet the emulator writes is handed, by
        its flow's hash, to a CPU's backlog, and routed and received there (the veth hop and
        the receiving host's TCP), not in the emulator's write(): at 400 ms RTT and 8192
        users that path was 64% of the emulator's time (perf, 002 delay). Packets hashed to
        the emulator's own CPU still run inline; the others wait for that CPU's softirq, as
        a real host's receive path would run on its own CPU. A softirq is charged to the task
        it interrupts, so a server under a CPU quota then pays for receive work (its capacity
        fell 20% at 002 delay's 400 ms, docs/testbed.md)."""
        mask = format((1 << (os.cpu_count() or 1)) - 1, "x")
        sysnet.run(sysnet.in_ns(self.ns, ["sh", "-c", f"echo {mask} > {self.rps_path()}"]))

    def route_through(self, *links: str) -> None:
        """Send everything arriving on ``links`` through the TUN device."""
        sysnet.ip(self.ns, "route", "add", "default", "dev", self.tun, "table", ROUTE_TABLE)
        for pref, link in enumerate(links, start=100):
            sysnet.ip(self.ns, "rule", "add", "pref", str(pref), "iif", link, "lookup", ROUTE_TABLE)

    def tun_drops(self) -> int:
        """Packets the kernel dropped because the emulator did not read the TUN
        device fast enough (its queue was full): a sign the machine was overloaded."""
        out = sysnet.ip(self.ns, "-s", "-j", "link", "show", "dev", self.tun)
        return json.loads(out)[0]["stats64"]["tx"]["dropped"]

    def stop(self) -> None:
        """SIGTERM the emulator so it writes its final counters."""
        if self.proc and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()

    def describe(self) -> dict:
        return {"config": self.document, "counters": str(self.counters_path), "summary": str(self.summary_path),
                "tun_queue_drops": self.tun_drops()}
