//! A TUN device (IFF_TUN | IFF_NO_PI: each read or write is one IP packet, preceded by a
//! `virtio_net_hdr` when opened with vnet headers), the WAN emulator's link to the kernel.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

use crate::check;

pub struct Tun {
    fd: OwnedFd,
}

// include/uapi/linux/if_tun.h
const TUNSETIFF: libc::c_ulong = 0x4004_54ca;
const TUNSETOFFLOAD: libc::c_ulong = 0x4004_54d0;
const IFF_VNET_HDR: libc::c_int = 0x4000;
const TUN_F_CSUM: libc::c_uint = 0x01;
const TUN_F_TSO4: libc::c_uint = 0x02;

#[repr(C)]
struct IfReq {
    name: [libc::c_char; libc::IFNAMSIZ],
    flags: libc::c_short,
    _pad: [u8; 22],
}

impl Tun {
    /// Attach to (or create) the TUN device `name`, non-blocking. With
    /// `vnet_headers`, each packet carries a `virtio_net_hdr` and the device
    /// takes partial checksums and TCPv4 GSO packets (TUNSETOFFLOAD), so a
    /// sender's segments cross it as one buffer of up to 64 KiB.
    pub fn open(name: &str, vnet_headers: bool) -> io::Result<Tun> {
        if name.is_empty() || name.len() >= libc::IFNAMSIZ {
            return Err(io::Error::new(io::ErrorKind::InvalidInput, format!("TUN name {name:?}: 1-15 bytes")));
        }
        // SAFETY: the path is a NUL-terminated C string literal.
        let fd = check(unsafe { libc::open(c"/dev/net/tun".as_ptr(), libc::O_RDWR | libc::O_NONBLOCK | libc::O_CLOEXEC) })?;
        // SAFETY: `fd` was just returned by open and is owned by nothing else.
        let fd = unsafe { OwnedFd::from_raw_fd(fd) };
        let vnet = if vnet_headers { IFF_VNET_HDR } else { 0 };
        let flags = (libc::IFF_TUN | libc::IFF_NO_PI | vnet) as libc::c_short;
        let mut req = IfReq { name: [0; libc::IFNAMSIZ], flags, _pad: [0; 22] };
        for (dst, src) in req.name.iter_mut().zip(name.bytes()) {
            *dst = src as libc::c_char;
        }
        // SAFETY: `req` is a valid struct ifreq layout (name, flags, padding to 40 bytes).
        check(unsafe { libc::ioctl(fd.as_raw_fd(), TUNSETIFF as _, &mut req as *mut IfReq) })?;
        // Without vnet headers no offload is set, so the kernel segments and checksums
        // before handing packets over.
        let offload = if vnet_headers { TUN_F_CSUM | TUN_F_TSO4 } else { 0 };
        // SAFETY: the offload flags are passed by value; no memory is shared.
        check(unsafe { libc::ioctl(fd.as_raw_fd(), TUNSETOFFLOAD as _, offload as libc::c_ulong) })?;
        Ok(Tun { fd })
    }

    /// Read one packet; `Ok(None)` when none is waiting.
    pub fn recv(&self, buf: &mut [u8]) -> io::Result<Option<usize>> {
        // SAFETY: `buf` is valid for `buf.len()` writable bytes.
        match check(unsafe { libc::read(self.fd.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len()) }) {
            Ok(n) => Ok(Some(n as usize)),
            Err(err) if err.kind() == io::ErrorKind::WouldBlock => Ok(None),
            Err(err) => Err(err),
        }
    }

    /// Write one packet into the kernel.
    pub fn send(&self, packet: &[u8]) -> io::Result<()> {
        // SAFETY: `packet` is valid for `packet.len()` readable bytes.
        check(unsafe { libc::write(self.fd.as_raw_fd(), packet.as_ptr().cast(), packet.len()) }).map(drop)
    }
}

impl AsRawFd for Tun {
    fn as_raw_fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_name_the_kernel_cannot_take_is_refused_before_opening() {
        for name in ["", "a-name-of-16-chr"] {
            assert_eq!(Tun::open(name, false).err().map(|e| e.kind()), Some(io::ErrorKind::InvalidInput), "{name:?}");
        }
    }
}
