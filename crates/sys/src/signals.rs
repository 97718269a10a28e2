//! The one way sojourn's programs stop on SIGINT (Ctrl-C) or SIGTERM: the signal sets a
//! process-wide flag which their loops check between turns, so they end cleanly (records
//! and files written) instead of being killed. The handler is installed with SA_RESTART, so
//! blocking calls resume after it; poll(2) and epoll_wait(2) are never restarted, so a
//! loop asleep in them on the signalled thread wakes at once with EINTR. Other threads see
//! the flag at their next turn.

use std::io;
use std::sync::atomic::{AtomicBool, Ordering};

use crate::check;

/// What a second SIGINT/SIGTERM does while the program is still stopping.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SecondSignal {
    /// Nothing more: the program finishes stopping (its records must all be written).
    KeepsStopping,
    /// Ends the process at once with status 1, as an impatient second Ctrl-C during a
    /// server's graceful shutdown expects.
    ExitsAtOnce,
}

static STOP_REQUESTED: AtomicBool = AtomicBool::new(false);
static EXIT_ON_SECOND_SIGNAL: AtomicBool = AtomicBool::new(false);

extern "C" fn on_stop_signal(_signal: libc::c_int) {
    // Only lock-free atomics and _exit here: both are async-signal-safe.
    let already_requested = STOP_REQUESTED.swap(true, Ordering::SeqCst);
    if already_requested && EXIT_ON_SECOND_SIGNAL.load(Ordering::SeqCst) {
        // SAFETY: _exit ends the process without running anything else, which is what a
        // signal handler may do.
        unsafe { libc::_exit(1) };
    }
}

/// Makes SIGINT and SIGTERM set the flag [`stop_requested`] reads instead of killing the
/// process; `second` says what a signal after the first does.
pub fn stop_on_sigint_sigterm(second: SecondSignal) -> io::Result<()> {
    EXIT_ON_SECOND_SIGNAL.store(second == SecondSignal::ExitsAtOnce, Ordering::SeqCst);
    // SAFETY: sigaction is a plain C struct, for which all zeroes is a valid value (no
    // flags, an empty mask).
    let mut action: libc::sigaction = unsafe { std::mem::zeroed() };
    action.sa_sigaction = on_stop_signal as extern "C" fn(libc::c_int) as libc::sighandler_t;
    action.sa_flags = libc::SA_RESTART;
    for signal in [libc::SIGINT, libc::SIGTERM] {
        // SAFETY: `action` is a valid sigaction whose handler is async-signal-safe; the old
        // action is not asked for (null).
        check(unsafe { libc::sigaction(signal, &action, std::ptr::null_mut()) })?;
    }
    Ok(())
}

/// Whether SIGINT or SIGTERM has arrived since [`stop_on_sigint_sigterm`].
pub fn stop_requested() -> bool {
    STOP_REQUESTED.load(Ordering::SeqCst)
}
