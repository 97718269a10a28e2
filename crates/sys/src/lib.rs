//! OS calls that more than one of sojourn's programs make, written once (as mio keeps
//! its platform code under `src/sys`): the open-file limit, which both the load generator
//! and the server raise before opening thousands of sockets, and the SIGPIPE disposition
//! of the commands that print.

use std::io;

/// The most descriptors the kernel lets one process have (`fs.nr_open`), where a
/// privileged process may raise its hard limit to.
fn kernel_nofile_ceiling() -> Option<u64> {
    std::fs::read_to_string("/proc/sys/fs/nr_open").ok()?.trim().parse().ok()
}

/// Raises the soft RLIMIT_NOFILE to the hard limit (first raising the hard limit to
/// `fs.nr_open` when the process may, i.e. has CAP_SYS_RESOURCE: a testbed run as root
/// should not stop at a login shell's 20,000) and returns the soft limit in force
/// afterwards (unchanged if raising failed; the caller says what that means for it).
pub fn raise_nofile_limit() -> io::Result<u64> {
    let mut limit = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
    // SAFETY: getrlimit writes a valid rlimit struct we own.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) } != 0 {
        return Err(io::Error::last_os_error());
    }
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
        let mut limit = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
        // SAFETY: as above.
        assert_eq!(unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) }, 0);
        assert_eq!((raised, limit.rlim_cur), (limit.rlim_max, limit.rlim_max));
    }
}
