//! A CLOCK_MONOTONIC timerfd armed with absolute deadlines: a descriptor that an epoll
//! (mio) or poll loop waits on beside its sockets, so the loop sleeps until the next
//! scheduled instant and no later. Absolute deadlines (`TFD_TIMER_ABSTIME`) do not drift
//! with the time the loop took to arm them.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

use crate::check;

/// A non-blocking timerfd on CLOCK_MONOTONIC, which remembers its pending deadline so
/// re-arming it with the same one costs no system call.
pub struct Timer {
    fd: OwnedFd,
    armed_at: Option<u64>,
}

impl Timer {
    pub fn new() -> io::Result<Timer> {
        // SAFETY: timerfd_create takes only integer flags.
        let fd = check(unsafe { libc::timerfd_create(libc::CLOCK_MONOTONIC, libc::TFD_NONBLOCK | libc::TFD_CLOEXEC) })?;
        // SAFETY: `fd` was just returned by timerfd_create and is owned by nothing else.
        Ok(Timer { fd: unsafe { OwnedFd::from_raw_fd(fd) }, armed_at: None })
    }

    /// Fire at `deadline_ns` on [`crate::clock::monotonic_ns`], replacing a pending deadline.
    pub fn arm(&mut self, deadline_ns: u64) -> io::Result<()> {
        if self.armed_at == Some(deadline_ns) {
            return Ok(());
        }
        self.set(deadline_ns)
    }

    /// Fire at `deadline_ns` or earlier: an earlier pending deadline is kept. The loop then
    /// wakes a little early and arms again, which costs less than one `timerfd_settime`
    /// per turn while its next deadline keeps moving later.
    pub fn arm_no_later_than(&mut self, deadline_ns: u64) -> io::Result<()> {
        if self.armed_at.is_some_and(|armed| armed <= deadline_ns) {
            return Ok(());
        }
        self.set(deadline_ns)
    }

    fn set(&mut self, deadline_ns: u64) -> io::Result<()> {
        // A zero it_value would disarm the timer: a deadline of 0 (long past) fires at once at 1 ns.
        let at = deadline_ns.max(1);
        let spec = libc::itimerspec {
            it_interval: libc::timespec { tv_sec: 0, tv_nsec: 0 },
            it_value: libc::timespec { tv_sec: (at / 1_000_000_000) as libc::time_t, tv_nsec: (at % 1_000_000_000) as libc::c_long },
        };
        // SAFETY: `spec` is a valid itimerspec the kernel only reads; the old value is not asked for (null).
        check(unsafe { libc::timerfd_settime(self.fd.as_raw_fd(), libc::TFD_TIMER_ABSTIME, &spec, std::ptr::null_mut()) })?;
        self.armed_at = Some(deadline_ns);
        Ok(())
    }

    /// Consumes the expiry once poll has said the descriptor is readable, and returns how
    /// many deadlines passed (0 if none had).
    pub fn clear(&mut self) -> u64 {
        let mut expirations = 0u64;
        // SAFETY: a timerfd read writes exactly 8 bytes, the size of `expirations`; on a
        // non-blocking fd with no expiry it fails with EAGAIN and writes nothing.
        let _ = check(unsafe { libc::read(self.fd.as_raw_fd(), (&mut expirations as *mut u64).cast(), 8) });
        self.armed_at = None;
        expirations
    }
}

impl AsRawFd for Timer {
    fn as_raw_fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::clock::monotonic_ns;
    use crate::fd::poll_readable;

    const MS: u64 = 1_000_000;

    /// Waits until the timer fires; returns when (on the monotonic clock) it did.
    fn wait_for(timer: &mut Timer) -> u64 {
        while poll_readable([timer.as_raw_fd()], true).unwrap() != [true] {}
        let fired = monotonic_ns();
        assert_eq!(timer.clear(), 1);
        fired
    }

    #[test]
    fn fires_at_its_deadline_and_not_before() {
        let mut timer = Timer::new().unwrap();
        let deadline = monotonic_ns() + 100 * MS;
        timer.arm(deadline).unwrap();
        assert_eq!(poll_readable([timer.as_raw_fd()], false).unwrap(), [false]);
        assert!(wait_for(&mut timer) >= deadline);
        assert_eq!(timer.clear(), 0, "one deadline fires once");
    }

    #[test]
    fn fires_again_each_time_it_is_armed() {
        let mut timer = Timer::new().unwrap();
        let mut deadline = monotonic_ns();
        for _ in 0..5 {
            deadline += 5 * MS;
            timer.arm(deadline).unwrap();
            assert!(wait_for(&mut timer) >= deadline);
        }
    }

    #[test]
    fn a_deadline_in_the_past_fires_at_once() {
        let mut timer = Timer::new().unwrap();
        let armed = monotonic_ns();
        timer.arm(0).unwrap();
        assert!(wait_for(&mut timer) - armed < 1_000 * MS);
    }

    #[test]
    fn arm_replaces_a_pending_deadline_and_arm_no_later_than_keeps_an_earlier_one() {
        let mut timer = Timer::new().unwrap();
        let now = monotonic_ns();
        timer.arm(now + 10 * MS).unwrap();
        timer.arm(now + 30 * MS).unwrap();
        assert!(wait_for(&mut timer) >= now + 30 * MS);

        let now = monotonic_ns();
        timer.arm_no_later_than(now + 10 * MS).unwrap();
        timer.arm_no_later_than(now + 1_000 * MS).unwrap();
        let fired = wait_for(&mut timer);
        assert!((now + 10 * MS..now + 1_000 * MS).contains(&fired), "fired {} ms after arming", (fired - now) / MS);

        let now = monotonic_ns();
        timer.arm_no_later_than(now + 1_000 * MS).unwrap();
        timer.arm_no_later_than(now + 10 * MS).unwrap();
        assert!(wait_for(&mut timer) < now + 1_000 * MS);
    }
}
