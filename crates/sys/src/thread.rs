//! Settings and counters of the calling thread (Linux keeps them per thread, so each
//! loop thread sets its own).

use std::io;
use std::time::Duration;

use crate::check;

/// Lets the kernel fire the thread's timers at most `slack` late (default 50 µs), so a
/// pacing loop wakes close to its deadline. Zero would restore the default: at least 1 ns.
pub fn set_timer_slack(slack: Duration) -> io::Result<()> {
    let nanos = slack.as_nanos().clamp(1, libc::c_ulong::MAX as u128) as libc::c_ulong;
    // SAFETY: prctl(PR_SET_TIMERSLACK) takes integers only and touches no memory of ours.
    check(unsafe { libc::prctl(libc::PR_SET_TIMERSLACK, nanos, 0 as libc::c_ulong, 0 as libc::c_ulong, 0 as libc::c_ulong) }).map(drop)
}

fn set_scheduler(policy: libc::c_int, priority: libc::c_int) -> io::Result<()> {
    let param = libc::sched_param { sched_priority: priority };
    // SAFETY: `param` is a valid sched_param the kernel only reads; pid 0 is the calling thread.
    check(unsafe { libc::sched_setscheduler(0, policy, &param) }).map(drop)
}

/// Runs the thread under SCHED_FIFO at `priority` (1-99), so its timer wake-ups are not
/// queued behind other busy processes (needs CAP_SYS_NICE).
pub fn set_realtime_priority(priority: i32) -> io::Result<()> {
    set_scheduler(libc::SCHED_FIFO, priority)
}

/// Runs the thread under normal scheduling (SCHED_OTHER), whatever its process runs under.
pub fn set_normal_scheduling() -> io::Result<()> {
    set_scheduler(libc::SCHED_OTHER, 0)
}

/// Times the thread was preempted (involuntary context switches); None if getrusage fails.
pub fn involuntary_switches() -> Option<u64> {
    // SAFETY: rusage is a plain C struct, for which all zeroes is a valid value.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: `usage` is a valid rusage for getrusage to write.
    check(unsafe { libc::getrusage(libc::RUSAGE_THREAD, &mut usage) }).ok()?;
    Some(usage.ru_nivcsw as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn thread_settings_are_accepted_and_switches_counted() {
        std::thread::spawn(|| {
            set_timer_slack(Duration::from_micros(1)).unwrap();
            set_normal_scheduling().unwrap();
            assert!(involuntary_switches().is_some());
        })
        .join()
        .unwrap();
    }
}
