//! Linux system interface of the emulator: the TUN device, an absolute
//! CLOCK_MONOTONIC timer (timerfd), the clock, poll, and a stop flag set by
//! SIGINT/SIGTERM. Every syscall goes through `syscall!`, which turns -1 into
//! `io::Error::last_os_error()`.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::sync::atomic::{AtomicBool, Ordering};

macro_rules! syscall {
    ($name:ident($($arg:expr),* $(,)?)) => {{
        // SAFETY: each call site passes valid pointers/lengths for the syscall's
        // contract, documented beside the call.
        let result = unsafe { libc::$name($($arg),*) };
        if result == -1 { Err(io::Error::last_os_error()) } else { Ok(result) }
    }};
}

/// Nanoseconds on CLOCK_MONOTONIC.
pub fn monotonic_now() -> u64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // `ts` is a valid, writable timespec; CLOCK_MONOTONIC always exists on Linux.
    syscall!(clock_gettime(libc::CLOCK_MONOTONIC, &mut ts)).expect("CLOCK_MONOTONIC is always available");
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// Ask for timer wake-ups without the default 50 µs slack.
pub fn minimal_timer_slack() -> io::Result<()> {
    syscall!(prctl(libc::PR_SET_TIMERSLACK, 1 as libc::c_ulong, 0 as libc::c_ulong, 0 as libc::c_ulong, 0 as libc::c_ulong))
        .map(drop)
}

/// Run this (single-threaded) process under SCHED_FIFO at `priority` (1-99),
/// so that timer wake-ups are not queued behind other busy processes.
pub fn realtime_priority(priority: i32) -> io::Result<()> {
    let param = libc::sched_param { sched_priority: priority };
    // `param` is a valid sched_param; pid 0 is this thread.
    syscall!(sched_setscheduler(0, libc::SCHED_FIFO, &param)).map(drop)
}

/// A TUN device (IFF_TUN | IFF_NO_PI: each read or write is one IP packet,
/// preceded by a `virtio_net_hdr` when opened with vnet headers).
pub struct Tun {
    fd: OwnedFd,
}

// include/uapi/linux/if_tun.h
const TUNSETIFF: libc::c_ulong = 0x4004_54ca;
const TUNSETOFFLOAD: libc::c_ulong = 0x4004_54d0;
const IFF_VNET_HDR: libc::c_int = 0x4000;
const TUN_F_CSUM: libc::c_uint = 0x01;
const TUN_F_TSO4: libc::c_uint = 0x02;

#[repr(C)]
struct IfReq {
    name: [libc::c_char; libc::IFNAMSIZ],
    flags: libc::c_short,
    _pad: [u8; 22],
}

impl Tun {
    /// Attach to (or create) the TUN device `name`, non-blocking. With
    /// `vnet_headers`, each packet carries a `virtio_net_hdr` and the device
    /// takes partial checksums and TCPv4 GSO packets (TUNSETOFFLOAD), so a
    /// sender's segments cross it as one buffer of up to 64 KiB.
    pub fn open(name: &str, vnet_headers: bool) -> io::Result<Tun> {
        if name.is_empty() || name.len() >= libc::IFNAMSIZ {
            return Err(io::Error::new(io::ErrorKind::InvalidInput, format!("TUN name {name:?}: 1-15 bytes")));
        }
        // The path is a NUL-terminated C string literal.
        let fd = syscall!(open(c"/dev/net/tun".as_ptr(), libc::O_RDWR | libc::O_NONBLOCK | libc::O_CLOEXEC))?;
        // SAFETY: `fd` was just returned by open and is owned by nothing else.
        let fd = unsafe { OwnedFd::from_raw_fd(fd) };
        let vnet = if vnet_headers { IFF_VNET_HDR } else { 0 };
        let flags = (libc::IFF_TUN | libc::IFF_NO_PI | vnet) as libc::c_short;
        let mut req = IfReq { name: [0; libc::IFNAMSIZ], flags, _pad: [0; 22] };
        for (dst, src) in req.name.iter_mut().zip(name.bytes()) {
            *dst = src as libc::c_char;
        }
        // `req` is a valid struct ifreq layout (name, flags, padding to 40 bytes).
        syscall!(ioctl(fd.as_raw_fd(), TUNSETIFF as _, &mut req as *mut IfReq))?;
        // The offload flags are passed by value; without vnet headers none are set,
        // so the kernel segments and checksums before handing packets over.
        let offload = if vnet_headers { TUN_F_CSUM | TUN_F_TSO4 } else { 0 };
        syscall!(ioctl(fd.as_raw_fd(), TUNSETOFFLOAD as _, offload as libc::c_ulong))?;
        Ok(Tun { fd })
    }

    /// Read one packet; `Ok(None)` when none is waiting.
    pub fn recv(&self, buf: &mut [u8]) -> io::Result<Option<usize>> {
        // `buf` is valid for `buf.len()` writable bytes.
        match syscall!(read(self.fd.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len())) {
            Ok(n) => Ok(Some(n as usize)),
            Err(err) if err.kind() == io::ErrorKind::WouldBlock => Ok(None),
            Err(err) => Err(err),
        }
    }

    /// Write one packet into the kernel.
    pub fn send(&self, packet: &[u8]) -> io::Result<()> {
        // `packet` is valid for `packet.len()` readable bytes.
        syscall!(write(self.fd.as_raw_fd(), packet.as_ptr().cast(), packet.len())).map(drop)
    }

    pub fn raw_fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }
}

/// A CLOCK_MONOTONIC timerfd armed with absolute deadlines.
pub struct Timer {
    fd: OwnedFd,
    armed_at: Option<u64>,
}

impl Timer {
    pub fn new() -> io::Result<Timer> {
        let fd = syscall!(timerfd_create(libc::CLOCK_MONOTONIC, libc::TFD_NONBLOCK | libc::TFD_CLOEXEC))?;
        // SAFETY: `fd` was just returned by timerfd_create and is owned by nothing else.
        Ok(Timer { fd: unsafe { OwnedFd::from_raw_fd(fd) }, armed_at: None })
    }

    /// Fire at absolute monotonic time `deadline_ns` (re-arming only on change).
    pub fn arm(&mut self, deadline_ns: u64) -> io::Result<()> {
        if self.armed_at == Some(deadline_ns) {
            return Ok(());
        }
        // A zero it_value would disarm the timer: deadlines in the past fire at once via 1 ns.
        let at = deadline_ns.max(1);
        let spec = libc::itimerspec {
            it_interval: libc::timespec { tv_sec: 0, tv_nsec: 0 },
            it_value: libc::timespec { tv_sec: (at / 1_000_000_000) as i64, tv_nsec: (at % 1_000_000_000) as i64 },
        };
        // `spec` is a valid itimerspec; the old value is not requested (null).
        syscall!(timerfd_settime(self.fd.as_raw_fd(), libc::TFD_TIMER_ABSTIME, &spec, std::ptr::null_mut()))?;
        self.armed_at = Some(deadline_ns);
        Ok(())
    }

    /// Consume an expiry (after poll said the fd is readable).
    pub fn clear(&mut self) {
        let mut expirations = 0u64;
        // Reading 8 bytes into a u64 is the timerfd read contract; EAGAIN is fine.
        let _ = syscall!(read(self.fd.as_raw_fd(), (&mut expirations as *mut u64).cast(), 8));
        self.armed_at = None;
    }

    pub fn raw_fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }
}

/// Wait until one of `fds` is readable (or a signal arrives), or return at once
/// when `wait` is false; returns the readiness of each fd.
pub fn poll_readable<const N: usize>(fds: [RawFd; N], wait: bool) -> io::Result<[bool; N]> {
    let mut pollfds = fds.map(|fd| libc::pollfd { fd, events: libc::POLLIN, revents: 0 });
    // `pollfds` is a valid array of N pollfd structs.
    match syscall!(poll(pollfds.as_mut_ptr(), N as libc::nfds_t, if wait { -1 } else { 0 })) {
        Ok(_) => Ok(pollfds.map(|p| p.revents & (libc::POLLIN | libc::POLLERR) != 0)),
        Err(err) if err.kind() == io::ErrorKind::Interrupted => Ok([false; N]),
        Err(err) => Err(err),
    }
}

static STOP: AtomicBool = AtomicBool::new(false);

extern "C" fn request_stop(_signal: libc::c_int) {
    STOP.store(true, Ordering::SeqCst);
}

/// Make SIGINT and SIGTERM set the stop flag (poll then returns EINTR).
pub fn install_stop_handlers() -> io::Result<()> {
    for signal in [libc::SIGINT, libc::SIGTERM] {
        // SAFETY: a zeroed sigaction with a handler that only stores an atomic
        // is async-signal-safe; no SA_RESTART, so poll is interrupted.
        let mut action: libc::sigaction = unsafe { std::mem::zeroed() };
        action.sa_sigaction = request_stop as extern "C" fn(libc::c_int) as usize;
        syscall!(sigaction(signal, &action, std::ptr::null_mut()))?;
    }
    Ok(())
}

pub fn stop_requested() -> bool {
    STOP.load(Ordering::SeqCst)
}
