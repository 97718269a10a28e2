//! Descriptors that std does not create or wait on: poll(2) over a few of them (the WAN
//! emulator's loop, which has only its TUN device and timer) and pipes.

use std::fs::File;
use std::io;
use std::os::fd::{FromRawFd, RawFd};

use crate::check;

/// Waits until one of `fds` is readable (or a signal arrives), or returns at once when
/// `wait` is false; returns the readiness of each fd (none after a signal).
pub fn poll_readable<const N: usize>(fds: [RawFd; N], wait: bool) -> io::Result<[bool; N]> {
    let mut pollfds = fds.map(|fd| libc::pollfd { fd, events: libc::POLLIN, revents: 0 });
    // SAFETY: `pollfds` is a valid, writable array of N pollfd structs.
    match check(unsafe { libc::poll(pollfds.as_mut_ptr(), N as libc::nfds_t, if wait { -1 } else { 0 }) }) {
        Ok(_) => Ok(pollfds.map(|p| p.revents & (libc::POLLIN | libc::POLLERR) != 0)),
        Err(err) if err.kind() == io::ErrorKind::Interrupted => Ok([false; N]),
        Err(err) => Err(err),
    }
}

/// A pipe, as (read end, write end), both close-on-exec.
pub fn pipe() -> io::Result<(File, File)> {
    let mut fds = [0; 2];
    // SAFETY: `fds` is a valid array of two ints for pipe2 to write.
    check(unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) })?;
    // SAFETY: both descriptors were just created by pipe2 and are owned by nothing else.
    Ok(unsafe { (File::from_raw_fd(fds[0]), File::from_raw_fd(fds[1])) })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Read, Write};
    use std::os::fd::AsRawFd;

    #[test]
    fn a_pipe_is_readable_once_written() {
        let (mut read_end, mut write_end) = pipe().unwrap();
        assert_eq!(poll_readable([read_end.as_raw_fd()], false).unwrap(), [false]);
        write_end.write_all(b"x").unwrap();
        assert_eq!(poll_readable([read_end.as_raw_fd(), write_end.as_raw_fd()], true).unwrap(), [true, false]);
        let mut byte = [0];
        read_end.read_exact(&mut byte).unwrap();
        assert_eq!(&byte, b"x");
    }
}
