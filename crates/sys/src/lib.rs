//! Every OS call of sojourn's programs that std, mio and socket2 do not wrap, written once
//! behind safe functions (as mio keeps its platform code under `src/sys`): this crate holds
//! every `unsafe` block of the workspace (tests/unsafe_only_here.rs checks it).
//!
//! - [`clock`]: CLOCK_MONOTONIC and the calling thread's CPU time;
//! - [`timer`]: a timerfd armed with absolute deadlines, for epoll/poll loops;
//! - [`signals`]: SIGINT/SIGTERM turned into a stop flag;
//! - [`thread`]: timer slack, scheduling policy and preemptions of the calling thread;
//! - [`socket`]: socket options and `sendfile`;
//! - [`fd`]: `poll` and pipes;
//! - [`tun`]: the TUN device of the WAN emulator;
//! - here: the open-file limit and the SIGPIPE disposition of the printing commands.

use std::io;

pub mod clock;
pub mod fd;
pub mod signals;
pub mod socket;
pub mod thread;
pub mod timer;
pub mod tun;

/// Turns the C convention of a system call's result (-1 and `errno`) into an `io::Result`.
fn check<T: Copy + PartialEq + From<i8>>(result: T) -> io::Result<T> {
    if result == T::from(-1) {
        Err(io::Error::last_os_error())
    } else {
        Ok(result)
    }
}

/// The most descriptors the kernel lets one process have (`fs.nr_open`), where a
/// privileged process may raise its hard limit to.
fn kernel_nofile_ceiling() -> Option<u64> {
    std::fs::read_to_string("/proc/sys/fs/nr_open").ok()?.trim().parse().ok()
}

fn nofile_limit() -> io::Result<libc::rlimit> {
    let mut limit = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
    // SAFETY: getrlimit writes a valid rlimit struct we own.
    check(unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) })?;
    Ok(limit)
}

/// Raises the soft RLIMIT_NOFILE to the hard limit (first raising the hard limit to
/// `fs.nr_open` when the process may, i.e. has CAP_SYS_RESOURCE: a testbed run as root
/// should not stop at a login shell's 20,000) and returns the soft limit in force
/// afterwards (unchanged if raising failed; the caller says what that means for it).
pub fn raise_nofile_limit() -> io::Result<u64> {
    let mut limit = nofile_limit()?;
    if let Some(ceiling) = kernel_nofile_ceiling().filter(|&c| c > limit.rlim_max) {
        let raised = libc::rlimit { rlim_cur: ceiling, rlim_max: ceiling };
        // SAFETY: setrlimit reads a valid rlimit struct; EPERM (unprivileged) leaves it as it was.
        if unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &raised) } == 0 {
            limit = raised;
        }
    }
    if limit.rlim_cur < limit.rlim_max {
        let raised = libc::rlimit { rlim_cur: limit.rlim_max, rlim_max: limit.rlim_max };
        // SAFETY: setrlimit reads a valid rlimit struct.
        if unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &raised) } == 0 {
            limit = raised;
        }
    }
    Ok(limit.rlim_cur)
}

/// Lets SIGPIPE end the process quietly, as it does Unix filters: for commands whose output
/// goes to stdout (`sojourn-engine stages --json | head -1`). Rust ignores SIGPIPE by
/// default, which turns a closed pipe into a panic in `println!`. Not for programs that
/// write to sockets: sendfile(2) has no MSG_NOSIGNAL, so a peer's reset would kill them.
pub fn exit_quietly_on_closed_stdout() {
    // SAFETY: restoring the default disposition of a signal has no preconditions.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_soft_limit_ends_at_the_hard_limit() {
        let raised = raise_nofile_limit().unwrap();
        let limit = nofile_limit().unwrap();
        assert_eq!((raised, limit.rlim_cur), (limit.rlim_max, limit.rlim_max));
    }

    #[test]
    fn check_turns_minus_one_into_errno() {
        assert_eq!(check(3i32).unwrap(), 3);
        // SAFETY: closing a descriptor that is not open only sets errno (EBADF).
        let closed = check(unsafe { libc::close(-1) });
        assert_eq!(closed.unwrap_err().raw_os_error(), Some(libc::EBADF));
    }
}
