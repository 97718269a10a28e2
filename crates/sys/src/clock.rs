//! The two clocks the programs read: CLOCK_MONOTONIC, which the [`crate::timer`] deadlines
//! are on, and the calling thread's CPU time, which measures work whatever else runs.

use std::time::Duration;

fn now(clock: libc::clockid_t) -> Duration {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: `ts` is a valid, writable timespec.
    crate::check(unsafe { libc::clock_gettime(clock, &mut ts) })
        // Both clocks exist on every Linux sojourn runs on (2.6.12 and later).
        .expect("CLOCK_MONOTONIC and CLOCK_THREAD_CPUTIME_ID are always available");
    Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32)
}

/// Nanoseconds on CLOCK_MONOTONIC (the clock of [`crate::timer::Timer`] deadlines).
pub fn monotonic_ns() -> u64 {
    now(libc::CLOCK_MONOTONIC).as_nanos() as u64
}

/// CPU time the calling thread has consumed so far.
pub fn thread_cpu_time() -> Duration {
    now(libc::CLOCK_THREAD_CPUTIME_ID)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn monotonic_never_goes_back() {
        let mut last = monotonic_ns();
        for _ in 0..100_000 {
            let now = monotonic_ns();
            assert!(now >= last, "{now} after {last}");
            last = now;
        }
    }

    #[test]
    fn thread_cpu_time_advances_while_busy_and_not_while_asleep() {
        let start = thread_cpu_time();
        let give_up = monotonic_ns() + 10_000_000_000;
        let mut x = 1u64;
        while thread_cpu_time() - start < Duration::from_millis(20) {
            x = std::hint::black_box(x.wrapping_mul(6364136223846793005).wrapping_add(1));
            assert!(monotonic_ns() < give_up, "20 ms of CPU not reached in 10 s of busy loop");
        }
        let before_sleep = thread_cpu_time();
        std::thread::sleep(Duration::from_millis(50));
        assert!(thread_cpu_time() - before_sleep < Duration::from_millis(25));
    }
}
