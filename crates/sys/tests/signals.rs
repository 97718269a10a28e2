//! SIGINT/SIGTERM handling, each case in a child process running this binary again: the
//! handlers are process-wide, and the case of a second signal ends its process.

use std::os::fd::AsRawFd;
use std::os::unix::thread::JoinHandleExt;
use std::process::{Command, ExitStatus};

use sojourn_sys::fd::{pipe, poll_readable};
use sojourn_sys::signals::{stop_on_sigint_sigterm, stop_requested, SecondSignal};

/// The environment variable naming the case a child runs.
const CASE: &str = "SOJOURN_SYS_SIGNAL_CASE";

fn run_case(case: &str) -> ExitStatus {
    let exe = std::env::current_exe().unwrap();
    Command::new(exe).args(["child_runs_its_case", "--exact", "--nocapture"]).env(CASE, case).status().unwrap()
}

fn raise(signal: libc::c_int) {
    // SAFETY: raise sends a signal to the calling thread; its handler has run when it returns.
    assert_eq!(unsafe { libc::raise(signal) }, 0);
}

/// A thread asleep in poll with nothing to read, as the WAN emulator and the load
/// generator's loops sleep, ends once a signal sent to it sets the flag.
fn signal_wakes_a_sleeping_loop(signal: libc::c_int) {
    let sleeper = std::thread::spawn(|| {
        let (read_end, _write_end) = pipe().unwrap();
        while !stop_requested() {
            poll_readable([read_end.as_raw_fd()], true).unwrap();
        }
    });
    std::thread::sleep(std::time::Duration::from_millis(50));
    // SAFETY: the thread is joined below, so its pthread_t is still valid.
    assert_eq!(unsafe { libc::pthread_kill(sleeper.as_pthread_t(), signal) }, 0);
    sleeper.join().unwrap();
}

#[test]
fn child_runs_its_case() {
    match std::env::var(CASE).as_deref() {
        Ok("keeps-stopping") => {
            stop_on_sigint_sigterm(SecondSignal::KeepsStopping).unwrap();
            assert!(!stop_requested());
            signal_wakes_a_sleeping_loop(libc::SIGINT);
            assert!(stop_requested());
            raise(libc::SIGTERM);
            raise(libc::SIGINT);
            assert!(stop_requested(), "the process lives on, stopping");
        }
        Ok("exits-at-once") => {
            stop_on_sigint_sigterm(SecondSignal::ExitsAtOnce).unwrap();
            raise(libc::SIGTERM);
            assert!(stop_requested());
            raise(libc::SIGINT);
            panic!("the second signal should have ended the process");
        }
        Ok(other) => panic!("unknown case {other:?}"),
        Err(_) => {} // Run by `cargo test` itself, not as a child: nothing to do.
    }
}

#[test]
fn a_first_signal_sets_the_flag_and_later_ones_leave_the_process_stopping() {
    assert!(run_case("keeps-stopping").success());
}

#[test]
fn a_second_signal_exits_at_once_when_asked() {
    assert_eq!(run_case("exits-at-once").code(), Some(1));
}
