"""The initial TCP retransmission timeout of one testbed side, set by cgroup BPF.

Linux fixes the initial RTO at 1 s (RFC 6298 §2.1, TCP_TIMEOUT_INIT) and offers no sysctl
or route metric for it; 000 Table 2 (F) varies it (0.5-3 s, 3 s in the baseline: the
penalty of every SYN or SYN-ACK lost to a full queue). The one per-socket hook is a
BPF_PROG_TYPE_SOCK_OPS program: tcp_timeout_init() asks it with op
BPF_SOCK_OPS_TIMEOUT_INIT and takes its reply, in jiffies, as the initial RTO of a
connecting socket (the client's SYN) and of a request sock (the server's SYN-ACK, judged
by its listener's cgroup). The program is attached to one side's cgroup of the testbed's
cgroup v2 tree (BPF_CGROUP_SOCK_OPS; sojourn.testbed.cgroups), inside which every process of
that side starts, so the setting follows the processes, not the namespace.

No compiler is needed: the program is six instructions, written out below and loaded
with the bpf(2) syscall through ctypes. The attachment goes when the testbed removes its
cgroups.
"""

from __future__ import annotations

import ctypes
import os
import re
import struct
import time
from pathlib import Path

# linux/bpf.h
BPF_PROG_LOAD = 5
BPF_PROG_ATTACH = 8
BPF_PROG_TYPE_SOCK_OPS = 13
BPF_CGROUP_SOCK_OPS = 3
BPF_SOCK_OPS_TIMEOUT_INIT = 1
SYS_BPF = {"x86_64": 321, "aarch64": 280}
# struct bpf_sock_ops: __u32 op at offset 0, then the union whose first word is reply.
OP_OFFSET, REPLY_OFFSET = 0, 4


class RtoError(RuntimeError):
    """The initial RTO cannot be set here; the message says what is missing."""


def _insn(code: int, dst: int = 0, src: int = 0, off: int = 0, imm: int = 0) -> bytes:
    return struct.pack("<BBhi", code, (src << 4) | dst, off, imm)


def program(timeout_jiffies: int) -> bytes:
    """The sock_ops program: reply ``timeout_jiffies`` to TIMEOUT_INIT, 0 (= the kernel's
    default) to every other op; return 1 (the reply is used)."""
    return b"".join([
        _insn(0x61, dst=2, src=1, off=OP_OFFSET),                 # r2 = ctx->op          (LDX W)
        _insn(0x55, dst=2, off=2, imm=BPF_SOCK_OPS_TIMEOUT_INIT),  # if r2 != 1 goto +2    (JNE K)
        _insn(0xB7, dst=3, imm=timeout_jiffies),                   # r3 = timeout          (MOV64 K)
        _insn(0x63, dst=1, src=3, off=REPLY_OFFSET),              # ctx->reply = r3       (STX W)
        _insn(0xB7, dst=0, imm=1),                                 # r0 = 1                (MOV64 K)
        _insn(0x95),                                               # exit
    ])


def kernel_hz() -> int:
    """The kernel's timer frequency (jiffies per second), measured from /proc/timer_list
    over 0.2 s and rounded to the nearest CONFIG_HZ choice."""
    pattern_now, pattern_jiffies = re.compile(r"now at (\d+) nsecs"), re.compile(r"^jiffies: (\d+)", re.M)

    def sample() -> tuple[int, int]:
        text = Path("/proc/timer_list").read_text()
        now, jiffies = pattern_now.search(text), pattern_jiffies.search(text)
        if not now or not jiffies:
            raise RtoError("cannot read jiffies from /proc/timer_list to learn the kernel's HZ")
        return int(now.group(1)), int(jiffies.group(1))

    try:
        (t0, j0), _, (t1, j1) = sample(), time.sleep(0.2), sample()
    except OSError as err:
        raise RtoError(f"cannot read /proc/timer_list to learn the kernel's HZ: {err}") from None
    measured = (j1 - j0) / ((t1 - t0) / 1e9)
    return min((100, 250, 300, 1000), key=lambda hz: abs(hz - measured))


def _bpf(cmd: int, attr: bytes) -> int:
    number = SYS_BPF.get(os.uname().machine)
    if number is None:
        raise RtoError(f"the bpf(2) syscall number of {os.uname().machine} is not known here")
    libc = ctypes.CDLL(None, use_errno=True)
    buffer = ctypes.create_string_buffer(attr, len(attr))
    result = libc.syscall(number, cmd, buffer, len(attr))
    if result < 0:
        errno = ctypes.get_errno()
        raise OSError(errno, os.strerror(errno))
    return result


def load_program(timeout_jiffies: int) -> int:
    """Loads :func:`program`; returns the program's file descriptor."""
    code = program(timeout_jiffies)
    instructions = ctypes.create_string_buffer(code, len(code))
    license_ = ctypes.create_string_buffer(b"GPL")
    log = ctypes.create_string_buffer(4096)
    # union bpf_attr for BPF_PROG_LOAD: prog_type, insn_cnt, insns, license, log_level,
    # log_size, log_buf (the rest zero).
    attr = struct.pack("<IIQQIIQ", BPF_PROG_TYPE_SOCK_OPS, len(code) // 8, ctypes.addressof(instructions),
                       ctypes.addressof(license_), 1, len(log), ctypes.addressof(log)) + bytes(80)
    try:
        return _bpf(BPF_PROG_LOAD, attr)
    except OSError as err:
        raise RtoError(f"the kernel refused the sock_ops program (bpf BPF_PROG_LOAD: {err}); verifier said: "
                       f"{log.value.decode(errors='replace').strip() or 'nothing'}") from None


class InitialRto:
    """The initial RTO of the sockets of every process in ``cgroup`` (a side of the
    testbed's tree, sojourn.testbed.cgroups): the attachment goes with the cgroup."""

    def __init__(self, cgroup: Path, initial_rto_ms: int):
        if not 1 <= initial_rto_ms <= 120_000:
            raise RtoError(f"initial_rto_ms={initial_rto_ms}, accepted 1..120000")
        self.hz = kernel_hz()
        self.jiffies = max(1, round(initial_rto_ms * self.hz / 1000))
        self.initial_rto_ms = initial_rto_ms
        self.path = cgroup
        prog = load_program(self.jiffies)
        try:
            directory = os.open(self.path, os.O_RDONLY | os.O_DIRECTORY)
            try:
                # BPF_PROG_ATTACH: target_fd, attach_bpf_fd, attach_type, attach_flags.
                _bpf(BPF_PROG_ATTACH, struct.pack("<IIII", directory, prog, BPF_CGROUP_SOCK_OPS, 0) + bytes(48))
            except OSError as err:
                raise RtoError(f"cannot attach the sock_ops program to {self.path} (BPF_PROG_ATTACH: {err})") from None
            finally:
                os.close(directory)
        finally:
            os.close(prog)  # the attachment holds the program

    def describe(self) -> dict:
        return {"initial_rto_ms": self.initial_rto_ms, "kernel_hz": self.hz, "jiffies": self.jiffies,
                "cgroup": str(self.path)}
