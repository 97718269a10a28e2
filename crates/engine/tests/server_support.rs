//! Helpers for the `serve` integration tests: a docroot in a temp dir, the real
//! binary started on a free port (stopped on drop, also when a test fails), and
//! raw HTTP/1.1 exchanges. Included by the server_*.rs tests with `#[path]`.
#![allow(dead_code)] // each test file uses a different subset

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

pub const ENGINE: &str = env!("CARGO_BIN_EXE_sojourn-engine");

/// A temporary directory removed on drop.
pub struct TempDir(pub PathBuf);

impl TempDir {
    pub fn new(tag: &str) -> TempDir {
        let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().subsec_nanos();
        let path = std::env::temp_dir().join(format!("sjsrv-{tag}-{}-{nanos}", std::process::id()));
        std::fs::create_dir_all(&path).unwrap();
        TempDir(path)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Deterministic content of `len` bytes.
pub fn content(len: usize) -> Vec<u8> {
    (0..len).map(|i| (i % 251) as u8).collect()
}

pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

/// A running `sojourn-engine serve`.
pub struct Server {
    pub child: Child,
    pub addr: SocketAddr,
    pub stderr_path: PathBuf,
}

impl Server {
    /// Starts `prefix... sojourn-engine serve --listen addr args...` and waits until it accepts.
    pub fn start_with(prefix: &[&str], addr: SocketAddr, args: &[&str], stderr_path: &Path) -> Server {
        let (program, rest) = match prefix.split_first() {
            Some((program, rest)) => (program.to_string(), rest.iter().map(|s| s.to_string()).chain([ENGINE.to_string()]).collect::<Vec<_>>()),
            None => (ENGINE.to_string(), Vec::new()),
        };
        let child = Command::new(program)
            .args(rest)
            .arg("serve")
            .arg("--listen")
            .arg(addr.to_string())
            .args(args)
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(stderr_path).unwrap())
            .spawn()
            .expect("start sojourn-engine");
        let server = Server { child, addr, stderr_path: stderr_path.to_path_buf() };
        server.wait_ready(prefix);
        server
    }

    pub fn start(root: &Path, args: &[&str]) -> Server {
        let addr: SocketAddr = format!("127.0.0.1:{}", free_port()).parse().unwrap();
        let stderr_path = root.with_extension(format!("{}.stderr", addr.port()));
        Server::start_with(&[], addr, &[&["--root", root.to_str().unwrap()], args].concat(), &stderr_path)
    }

    fn wait_ready(&self, prefix: &[&str]) {
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            let ready = if prefix.is_empty() {
                TcpStream::connect_timeout(&self.addr, Duration::from_millis(200)).is_ok()
            } else {
                // In another namespace: the server says when it listens.
                std::fs::read_to_string(&self.stderr_path).unwrap_or_default().contains("on http://")
            };
            if ready {
                return;
            }
            assert!(Instant::now() < deadline, "server did not start: {}", self.stderr());
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    pub fn stderr(&self) -> String {
        std::fs::read_to_string(&self.stderr_path).unwrap_or_default()
    }

    pub fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.addr)
    }

    pub fn connect(&self) -> TcpStream {
        let stream = TcpStream::connect(self.addr).unwrap();
        stream.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        stream
    }

    /// Sends SIGTERM and waits for the exit status.
    pub fn terminate(&mut self) -> std::process::ExitStatus {
        let _ = Command::new("kill").arg("-TERM").arg(self.child.id().to_string()).status();
        self.child.wait().unwrap()
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_file(&self.stderr_path);
    }
}

/// One parsed response.
#[derive(Debug)]
pub struct Response {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl Response {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(n, _)| n.eq_ignore_ascii_case(name)).map(|(_, v)| v.as_str())
    }
}

/// Reads one response from `stream`; `head_only` for HEAD and 304 (no body follows).
/// Bytes read past the response stay in `pending`.
pub fn read_response(stream: &mut TcpStream, pending: &mut Vec<u8>, head_only: bool) -> Option<Response> {
    let mut chunk = [0u8; 65536];
    let head_end = loop {
        if let Some(at) = pending.windows(4).position(|w| w == b"\r\n\r\n") {
            break at + 4;
        }
        let n = stream.read(&mut chunk).ok()?;
        if n == 0 {
            return None;
        }
        pending.extend_from_slice(&chunk[..n]);
    };
    let head = String::from_utf8_lossy(&pending[..head_end]).into_owned();
    let mut lines = head.split("\r\n");
    let status = lines.next()?.split(' ').nth(1)?.parse().ok()?;
    let headers: Vec<(String, String)> =
        lines.filter_map(|l| l.split_once(':')).map(|(n, v)| (n.trim().to_string(), v.trim().to_string())).collect();
    let length: usize = if head_only || status == 304 {
        0
    } else {
        headers.iter().find(|(n, _)| n.eq_ignore_ascii_case("content-length")).map_or(0, |(_, v)| v.parse().unwrap())
    };
    pending.drain(..head_end);
    while pending.len() < length {
        let n = stream.read(&mut chunk).ok()?;
        if n == 0 {
            return None;
        }
        pending.extend_from_slice(&chunk[..n]);
    }
    let body = pending.drain(..length).collect();
    Some(Response { status, headers, body })
}

/// Sends raw bytes on a new connection and reads one response.
pub fn exchange(server: &Server, raw: &[u8]) -> Response {
    let mut stream = server.connect();
    stream.write_all(raw).unwrap();
    let head_only = raw.starts_with(b"HEAD");
    read_response(&mut stream, &mut Vec::new(), head_only).unwrap_or_else(|| panic!("no response to {:?}", String::from_utf8_lossy(raw)))
}

/// GET `path` with extra header lines (each ending in \r\n) on a new connection.
pub fn get(server: &Server, path: &str, headers: &str) -> Response {
    exchange(server, format!("GET {path} HTTP/1.1\r\nHost: t\r\n{headers}\r\n").as_bytes())
}

/// Whether the peer closed the connection (EOF) within the read timeout.
pub fn closed(stream: &mut TcpStream) -> bool {
    let mut byte = [0u8; 1];
    matches!(stream.read(&mut byte), Ok(0)) || matches!(stream.read(&mut byte), Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset)
}
