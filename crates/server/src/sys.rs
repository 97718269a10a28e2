//! The few Linux calls that neither std nor mio nor socket2 offer: `sendfile`,
//! `SO_PRIORITY` and `TCP_NOTSENT_LOWAT`. Every unsafe block is here.

use std::io;
use std::os::fd::RawFd;

/// Turns a -1 return into the thread's `errno`.
fn check(result: libc::c_long) -> io::Result<usize> {
    if result < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(result as usize)
    }
}

fn set_int_option(fd: RawFd, level: libc::c_int, name: libc::c_int, value: libc::c_int) -> io::Result<()> {
    // SAFETY: `value` lives across the call and its exact size is passed; the kernel
    // only reads it. A bad fd or option is reported through errno.
    let result = unsafe {
        libc::setsockopt(fd, level, name, (&value as *const libc::c_int).cast(), std::mem::size_of::<libc::c_int>() as libc::socklen_t)
    };
    check(result.into()).map(drop)
}

/// Sets `SO_PRIORITY`, which classifies the socket's packets into an HTB class
/// (see `crate::qdisc::so_priority`). Values above 6 need CAP_NET_ADMIN.
pub fn set_priority(socket: RawFd, priority: u32) -> io::Result<()> {
    set_int_option(socket, libc::SOL_SOCKET, libc::SO_PRIORITY, priority as libc::c_int)
}

/// Sets `TCP_NOTSENT_LOWAT`: the socket reports writable only while fewer than
/// `bytes` unsent bytes are queued, so the kernel holds little the scheduler has
/// already committed to.
pub fn set_notsent_lowat(socket: RawFd, bytes: u32) -> io::Result<()> {
    set_int_option(socket, libc::IPPROTO_TCP, libc::TCP_NOTSENT_LOWAT, bytes.min(i32::MAX as u32) as libc::c_int)
}

/// Sends up to `count` bytes of `file` from `*offset` to `socket` and advances
/// `*offset`; the file's own position is untouched, so one descriptor can serve
/// many responses at once.
pub fn sendfile(socket: RawFd, file: RawFd, offset: &mut u64, count: usize) -> io::Result<usize> {
    let mut off = *offset as libc::off_t;
    // SAFETY: `off` is a valid off_t the kernel reads and updates; both descriptors
    // are owned by the caller for the duration of the call.
    let sent = check(unsafe { libc::sendfile(socket, file, &mut off, count) } as libc::c_long)?;
    *offset = off as u64;
    Ok(sent)
}
