//! The socket calls that neither std nor mio nor socket2 offer: `sendfile`, `SO_PRIORITY`,
//! `TCP_NOTSENT_LOWAT` and `IP_BIND_ADDRESS_NO_PORT`.

use std::io;
use std::os::fd::RawFd;

use crate::check;

fn set_int_option(socket: RawFd, level: libc::c_int, name: libc::c_int, value: libc::c_int) -> io::Result<()> {
    // SAFETY: `value` lives across the call and its exact size is passed; the kernel
    // only reads it. A bad fd or option is reported through errno.
    check(unsafe {
        libc::setsockopt(socket, level, name, (&value as *const libc::c_int).cast(), std::mem::size_of::<libc::c_int>() as libc::socklen_t)
    })
    .map(drop)
}

/// Sets `SO_PRIORITY`, which classifies the socket's packets into an HTB class
/// (see the server's `qdisc::so_priority`). Values above 6 need CAP_NET_ADMIN.
pub fn set_priority(socket: RawFd, priority: u32) -> io::Result<()> {
    set_int_option(socket, libc::SOL_SOCKET, libc::SO_PRIORITY, priority as libc::c_int)
}

/// Sets `TCP_NOTSENT_LOWAT`: the socket reports writable only while fewer than
/// `bytes` unsent bytes are queued, so the kernel holds little the scheduler has
/// already committed to.
pub fn set_notsent_lowat(socket: RawFd, bytes: u32) -> io::Result<()> {
    set_int_option(socket, libc::IPPROTO_TCP, libc::TCP_NOTSENT_LOWAT, bytes.min(i32::MAX as u32) as libc::c_int)
}

/// IP_BIND_ADDRESS_NO_PORT (linux/in.h, Linux 4.2), which libc does not name.
const IP_BIND_ADDRESS_NO_PORT: libc::c_int = 24;

/// Sets `IP_BIND_ADDRESS_NO_PORT`: bind() takes the address now and the port is chosen
/// at connect(), against the whole 4-tuple. Kernels before 4.2 refuse it.
pub fn bind_address_no_port(socket: RawFd) -> io::Result<()> {
    set_int_option(socket, libc::IPPROTO_IP, IP_BIND_ADDRESS_NO_PORT, 1)
}

/// Sends up to `count` bytes of `file` from `*offset` to `socket` and advances
/// `*offset`; the file's own position is untouched, so one descriptor can serve
/// many responses at once.
pub fn sendfile(socket: RawFd, file: RawFd, offset: &mut u64, count: usize) -> io::Result<usize> {
    let mut off = *offset as libc::off_t;
    // SAFETY: `off` is a valid off_t the kernel reads and updates; bad descriptors are
    // reported through errno.
    let sent = check(unsafe { libc::sendfile(socket, file, &mut off, count) })?;
    *offset = off as u64;
    Ok(sent as usize)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Read, Write};
    use std::net::{TcpListener, TcpStream};
    use std::os::fd::AsRawFd;

    #[test]
    fn sendfile_sends_from_the_offset_and_advances_it() {
        let path = std::env::temp_dir().join(format!("sojourn-sys-sendfile-{}", std::process::id()));
        std::fs::File::create(&path).unwrap().write_all(b"0123456789").unwrap();
        let file = std::fs::File::open(&path).unwrap();
        std::fs::remove_file(&path).unwrap();
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let sender = TcpStream::connect(listener.local_addr().unwrap()).unwrap();
        let (mut receiver, _) = listener.accept().unwrap();
        set_notsent_lowat(sender.as_raw_fd(), 16 * 1024).unwrap();
        set_priority(sender.as_raw_fd(), 0).unwrap();
        let mut offset = 3;
        assert_eq!(sendfile(sender.as_raw_fd(), file.as_raw_fd(), &mut offset, 4).unwrap(), 4);
        assert_eq!(offset, 7);
        let mut received = [0; 4];
        receiver.read_exact(&mut received).unwrap();
        assert_eq!(&received, b"3456");
    }
}
