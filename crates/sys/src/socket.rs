//! The socket calls that neither std nor mio nor socket2 offer: `sendfile`, `SO_PRIORITY`,
//! `TCP_NOTSENT_LOWAT`, `TCP_RTO_MAX_MS`, `IP_BIND_ADDRESS_NO_PORT`, reads that say when their bytes
//! reached the host (`SO_TIMESTAMPNS`), and the peer's receive window (`TCP_INFO`).

use std::io;
use std::os::fd::RawFd;
use std::time::{Duration, SystemTime};

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

/// TCP_RTO_MAX_MS (linux/tcp.h, Linux 6.15), which libc does not name.
const TCP_RTO_MAX_MS: libc::c_int = 44;

/// Sets `TCP_RTO_MAX_MS`: the most exponential backoff (RFC 6298 (5.5)) may take the
/// socket's retransmission timeout to, 1000 to 120000 ms (Linux's default is 120 s).
/// Connections accepted from a listener inherit its value. Kernels before 6.15 refuse it.
pub fn set_rto_max(socket: RawFd, ms: u32) -> io::Result<()> {
    set_int_option(socket, libc::IPPROTO_TCP, TCP_RTO_MAX_MS, ms.min(i32::MAX as u32) as libc::c_int)
}

/// The receive window the peer last advertised, in bytes (`TCP_INFO`'s `tcpi_snd_wnd`,
/// Linux 5.4): 0 when the peer's receive buffer is full, i.e. its application reads nothing.
/// Unsent bytes behind an open window wait in this host instead (a full or higher-priority
/// uplink queue, the congestion window).
pub fn peer_window(socket: RawFd) -> io::Result<u32> {
    // SAFETY: an all-zero tcp_info is valid; the kernel writes at most `len` bytes of it
    // and says in `len` how many it wrote.
    let mut info: libc::tcp_info = unsafe { std::mem::zeroed() };
    let mut len = std::mem::size_of::<libc::tcp_info>() as libc::socklen_t;
    check(unsafe { libc::getsockopt(socket, libc::IPPROTO_TCP, libc::TCP_INFO, (&mut info as *mut libc::tcp_info).cast(), &mut len) })?;
    let end_of_field = std::mem::offset_of!(libc::tcp_info, tcpi_snd_wnd) + std::mem::size_of::<u32>();
    if (len as usize) < end_of_field {
        return Err(io::Error::new(io::ErrorKind::Unsupported, "TCP_INFO has no tcpi_snd_wnd (Linux < 5.4)"));
    }
    Ok(info.tcpi_snd_wnd)
}

/// IP_BIND_ADDRESS_NO_PORT (linux/in.h, Linux 4.2), which libc does not name.
const IP_BIND_ADDRESS_NO_PORT: libc::c_int = 24;

/// Sets `IP_BIND_ADDRESS_NO_PORT`: bind() takes the address now and the port is chosen
/// at connect(), against the whole 4-tuple. Kernels before 4.2 refuse it.
pub fn bind_address_no_port(socket: RawFd) -> io::Result<()> {
    set_int_option(socket, libc::IPPROTO_IP, IP_BIND_ADDRESS_NO_PORT, 1)
}

/// Sets `SO_TIMESTAMPNS`: [`recv_stamped`] then says when the bytes it read were received
/// by the host. Accepted sockets inherit it from their listener (the flag is copied with the
/// socket), so bytes that waited in the accept queue carry their arrival time too. The first
/// such socket of the system turns stamping on from a work queue, so bytes received in the
/// next few milliseconds may come without a stamp.
pub fn set_receive_timestamps(socket: RawFd) -> io::Result<()> {
    set_int_option(socket, libc::SOL_SOCKET, libc::SO_TIMESTAMPNS, 1)
}

/// Reads into `buf` like `read`, and returns with the count when the last byte read was
/// received by the host (the kernel's receive timestamp, CLOCK_REALTIME; TCP hands it over
/// since Linux 4.13, `tcp_recv_timestamp`), `None` without `SO_TIMESTAMPNS` or a stamp.
pub fn recv_stamped(socket: RawFd, buf: &mut [u8]) -> io::Result<(usize, Option<SystemTime>)> {
    // Room for one cmsghdr and its timespec, aligned as the kernel writes them.
    let mut control = [0u64; 8];
    let mut iov = libc::iovec { iov_base: buf.as_mut_ptr().cast(), iov_len: buf.len() };
    // SAFETY: an all-zero msghdr is valid (no name, no buffers) before the fields are set.
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_iov = &mut iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control.as_mut_ptr().cast();
    msg.msg_controllen = std::mem::size_of_val(&control) as _;
    // SAFETY: `msg` points at `iov` (over `buf`) and `control`, which outlive the call; the
    // kernel writes at most their given lengths.
    let read = check(unsafe { libc::recvmsg(socket, &mut msg, 0) })? as usize;
    let mut stamp = None;
    // SAFETY: the CMSG_* walk stays within `msg_controllen`, which the kernel set; a
    // SCM_TIMESTAMPNS message holds one timespec, read unaligned.
    unsafe {
        let mut cmsg = libc::CMSG_FIRSTHDR(&msg);
        while !cmsg.is_null() {
            if (*cmsg).cmsg_level == libc::SOL_SOCKET && (*cmsg).cmsg_type == libc::SCM_TIMESTAMPNS {
                let ts: libc::timespec = std::ptr::read_unaligned(libc::CMSG_DATA(cmsg).cast());
                if ts.tv_sec > 0 {
                    stamp = Some(SystemTime::UNIX_EPOCH + Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32));
                }
            }
            cmsg = libc::CMSG_NXTHDR(&msg, cmsg);
        }
    }
    Ok((read, stamp))
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

    #[test]
    fn an_accepted_connection_inherits_the_listeners_rto_cap() {
        let get = |socket: RawFd| {
            let (mut value, mut len) = (0 as libc::c_int, std::mem::size_of::<libc::c_int>() as libc::socklen_t);
            // SAFETY: the kernel writes at most `len` bytes into `value`.
            check(unsafe { libc::getsockopt(socket, libc::IPPROTO_TCP, TCP_RTO_MAX_MS, (&mut value as *mut libc::c_int).cast(), &mut len) }).unwrap();
            value
        };
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        assert_eq!(get(listener.as_raw_fd()), 120_000, "Linux's default, unless this namespace's sysctl says otherwise");
        set_rto_max(listener.as_raw_fd(), 3000).unwrap();
        let client = TcpStream::connect(listener.local_addr().unwrap()).unwrap();
        let (accepted, _) = listener.accept().unwrap();
        assert_eq!(get(accepted.as_raw_fd()), 3000);
        assert_eq!(get(client.as_raw_fd()), 120_000);
        assert_eq!(set_rto_max(accepted.as_raw_fd(), 999).unwrap_err().raw_os_error(), Some(libc::EINVAL));
    }

    #[test]
    fn a_stamped_read_says_when_the_bytes_arrived_also_after_the_accept_queue() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        set_receive_timestamps(listener.as_raw_fd()).unwrap();
        // The first such socket turns the kernel's receive stamping on from a work queue
        // (net_enable_timestamp): packets in the next moments may go unstamped.
        std::thread::sleep(Duration::from_millis(100));
        let mut sender = TcpStream::connect(listener.local_addr().unwrap()).unwrap();
        sender.write_all(b"GET / HTTP/1.1\r\n\r\n").unwrap();
        let sent = SystemTime::now();
        // The connection and its request wait in the accept queue.
        std::thread::sleep(Duration::from_millis(200));
        let (receiver, _) = listener.accept().unwrap();
        let mut buf = [0; 64];
        let (n, stamp) = recv_stamped(receiver.as_raw_fd(), &mut buf).unwrap();
        assert_eq!(&buf[..n], b"GET / HTTP/1.1\r\n\r\n");
        let stamp = stamp.expect("the accepted socket inherits SO_TIMESTAMPNS");
        let waited = SystemTime::now().duration_since(stamp).unwrap();
        assert!(waited >= Duration::from_millis(200), "stamped {waited:?} before the read");
        assert!(stamp.duration_since(sent).unwrap_or_default() < Duration::from_millis(100), "stamped long after it was sent");
        // Without the option, no stamp.
        let plain = TcpListener::bind("127.0.0.1:0").unwrap();
        let mut sender = TcpStream::connect(plain.local_addr().unwrap()).unwrap();
        sender.write_all(b"x").unwrap();
        let (receiver, _) = plain.accept().unwrap();
        std::thread::sleep(Duration::from_millis(10));
        assert_eq!(recv_stamped(receiver.as_raw_fd(), &mut buf).unwrap(), (1, None));
    }

    #[test]
    fn the_peer_window_closes_when_the_peer_reads_nothing_and_opens_when_it_reads() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let mut sender = TcpStream::connect(listener.local_addr().unwrap()).unwrap();
        let (mut receiver, _) = listener.accept().unwrap();
        assert!(peer_window(sender.as_raw_fd()).unwrap() > 0, "a fresh connection has an open window");
        // Fill the receiver's buffer and ours: the receiver reads nothing.
        sender.set_nonblocking(true).unwrap();
        let chunk = vec![7u8; 1 << 16];
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        while peer_window(sender.as_raw_fd()).unwrap() > 0 {
            assert!(std::time::Instant::now() < deadline, "the window never closed");
            match sender.write(&chunk) {
                Ok(_) => {}
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => std::thread::sleep(Duration::from_millis(10)),
                Err(e) => panic!("{e}"),
            }
        }
        // Once the receiver reads, it advertises room again (a window update).
        let mut buf = vec![0u8; 1 << 20];
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        while peer_window(sender.as_raw_fd()).unwrap() == 0 {
            assert!(std::time::Instant::now() < deadline, "the window never reopened");
            let _ = receiver.read(&mut buf).unwrap();
        }
    }
}
