//! `sojourn-engine serve` against real clients (raw TCP and curl): keep-alive,
//! pipelining, HEAD, ranges, conditionals, every error status, every traversal
//! form, limits and timeouts, access log, metrics, config file, graceful shutdown.

#[path = "server_support.rs"]
mod support;

use std::io::{Read, Write};
use std::process::Command;
use std::time::Duration;

use support::*;

/// A docroot with small and large files, a directory, and symlinks in and out.
fn docroot(dir: &TempDir) -> std::path::PathBuf {
    let root = dir.0.join("root");
    std::fs::create_dir_all(root.join("sub")).unwrap();
    std::fs::write(root.join("index.html"), b"<h1>home</h1>\n").unwrap();
    std::fs::write(root.join("small.txt"), content(1000)).unwrap();
    std::fs::write(root.join("big.bin"), content(300_000)).unwrap();
    std::fs::write(root.join("sub/index.html"), b"sub\n").unwrap();
    std::fs::write(root.join("%2e%2e"), b"literal name\n").unwrap();
    std::fs::write(dir.0.join("secret.txt"), b"TOP-SECRET\n").unwrap();
    std::os::unix::fs::symlink(dir.0.join("secret.txt"), root.join("leak.txt")).unwrap();
    std::os::unix::fs::symlink(&dir.0, root.join("up")).unwrap();
    std::os::unix::fs::symlink("small.txt", root.join("alias.txt")).unwrap();
    std::os::unix::fs::symlink("loop", root.join("loop")).unwrap();
    root
}

#[test]
fn keep_alive_pipelining_and_head() {
    let dir = TempDir::new("http-ka");
    let root = docroot(&dir);
    let server = Server::start(&root, &["--threads", "2"]);
    let mut stream = server.connect();
    let mut pending = Vec::new();
    // Persistent connection: two requests one after the other.
    for _ in 0..2 {
        stream.write_all(b"GET /small.txt HTTP/1.1\r\nHost: t\r\n\r\n").unwrap();
        let r = read_response(&mut stream, &mut pending, false).unwrap();
        assert_eq!((r.status, r.body.clone()), (200, content(1000)));
        assert_eq!(r.header("Content-Type"), Some("text/plain; charset=utf-8"));
        assert!(r.header("Date").is_some() && r.header("ETag").is_some() && r.header("Last-Modified").is_some());
        assert_eq!(r.header("Connection"), None);
    }
    // Pipelining: three requests in one write, answered in order, the big one in the middle.
    stream
        .write_all(b"GET /sub/ HTTP/1.1\r\nHost: t\r\n\r\nGET /big.bin HTTP/1.1\r\nHost: t\r\n\r\nHEAD /small.txt HTTP/1.1\r\nHost: t\r\n\r\n")
        .unwrap();
    let r = read_response(&mut stream, &mut pending, false).unwrap();
    assert_eq!((r.status, r.body.as_slice()), (200, b"sub\n".as_slice()));
    let r = read_response(&mut stream, &mut pending, false).unwrap();
    assert_eq!(r.status, 200);
    assert!(r.body == content(300_000), "big body differs");
    let r = read_response(&mut stream, &mut pending, true).unwrap();
    assert_eq!((r.status, r.header("Content-Length")), (200, Some("1000")));
    // HEAD sent no body: the next response follows directly.
    stream.write_all(b"GET /index.html HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n").unwrap();
    let r = read_response(&mut stream, &mut pending, false).unwrap();
    assert_eq!((r.status, r.body.as_slice(), r.header("Connection")), (200, b"<h1>home</h1>\n".as_slice(), Some("close")));
    assert!(pending.is_empty() && closed(&mut stream));
    // HTTP/1.0: closes unless keep-alive is asked for.
    let mut stream = server.connect();
    stream.write_all(b"GET /small.txt HTTP/1.0\r\n\r\n").unwrap();
    let r = read_response(&mut stream, &mut Vec::new(), false).unwrap();
    assert_eq!((r.status, r.header("Connection")), (200, Some("close")));
    assert!(closed(&mut stream));
    let mut stream = server.connect();
    stream.write_all(b"GET /small.txt HTTP/1.0\r\nConnection: keep-alive\r\n\r\nGET /small.txt HTTP/1.0\r\n\r\n").unwrap();
    let mut pending = Vec::new();
    let r = read_response(&mut stream, &mut pending, false).unwrap();
    assert_eq!((r.status, r.header("Connection")), (200, Some("keep-alive")));
    let r = read_response(&mut stream, &mut pending, false).unwrap();
    assert_eq!((r.status, r.header("Connection")), (200, Some("close")));
}

#[test]
fn curl_keep_alive_ranges_and_conditionals() {
    let dir = TempDir::new("http-curl");
    let root = docroot(&dir);
    let server = Server::start(&root, &["--cache-file-max", "0"]);
    // curl reuses one connection for both URLs.
    let out = Command::new("curl")
        .args(["-s", "-o", "/dev/null", "-o", "/dev/null", "-w", "%{http_code} %{num_connects}\\n"])
        .args([server.url("/big.bin"), server.url("/small.txt")])
        .output()
        .unwrap();
    assert_eq!(String::from_utf8_lossy(&out.stdout), "200 1\n200 0\n");
    let ranged = Command::new("curl").args(["-s", "-r", "100000-100009", &server.url("/big.bin")]).output().unwrap();
    assert_eq!(ranged.stdout, content(300_000)[100_000..100_010]);

    let r = get(&server, "/big.bin", "Range: bytes=-5\r\n");
    assert_eq!((r.status, r.header("Content-Range")), (206, Some("bytes 299995-299999/300000")));
    assert_eq!(r.body, content(300_000)[299_995..]);
    let r = get(&server, "/big.bin", "Range: bytes=300000-\r\n");
    assert_eq!((r.status, r.header("Content-Range")), (416, Some("bytes */300000")));
    let r = get(&server, "/big.bin", "Range: bytes=0-1,5-6\r\n");
    assert_eq!((r.status, r.body.len()), (200, 300_000), "several ranges: the whole file");

    let full = get(&server, "/small.txt", "");
    let etag = full.header("ETag").unwrap().to_string();
    let modified = full.header("Last-Modified").unwrap().to_string();
    let r = get(&server, "/small.txt", &format!("If-None-Match: {etag}\r\n"));
    assert_eq!((r.status, r.body.len(), r.header("ETag")), (304, 0, Some(etag.as_str())));
    let r = get(&server, "/small.txt", &format!("If-Modified-Since: {modified}\r\n"));
    assert_eq!(r.status, 304);
    let r = get(&server, "/small.txt", "If-Modified-Since: Thu, 01 Jan 1970 00:00:00 GMT\r\n");
    assert_eq!(r.status, 200);
    let r = get(&server, "/big.bin", &format!("Range: bytes=0-3\r\nIf-Range: {etag}\r\n"));
    assert_eq!(r.status, 200, "If-Range with another file's tag: the whole file");
    let curl_304 = Command::new("curl")
        .args(["-s", "-o", "/dev/null", "-w", "%{http_code}", "-H", &format!("If-None-Match: {etag}"), &server.url("/small.txt")])
        .output()
        .unwrap();
    assert_eq!(String::from_utf8_lossy(&curl_304.stdout), "304");
}

#[test]
fn error_statuses() {
    let dir = TempDir::new("http-err");
    let root = docroot(&dir);
    let server = Server::start(&root, &["--header-timeout", "0.5", "--max-head-bytes", "2K", "--max-target-bytes", "1K", "--max-headers", "20"]);
    let cases: Vec<(Vec<u8>, u16)> = vec![
        (b"GET /nothing HTTP/1.1\r\nHost: t\r\n\r\n".to_vec(), 404),
        (b"GET / HTTP/1.1\r\n\r\n".to_vec(), 400),
        (b"GET / HTTP/1.1\r\nHost: t\r\nBad Header\r\n\r\n".to_vec(), 400),
        (b"POST / HTTP/1.1\r\nHost: t\r\nContent-Length: 0\r\n\r\n".to_vec(), 405),
        (b"BREW / HTTP/1.1\r\nHost: t\r\n\r\n".to_vec(), 501),
        (b"GET / HTTP/1.1\r\nHost: t\r\nContent-Length: 4\r\n\r\nbody".to_vec(), 413),
        (format!("GET /{} HTTP/1.1\r\nHost: t\r\n\r\n", "a".repeat(1500)).into_bytes(), 414),
        (format!("GET / HTTP/1.1\r\nHost: t\r\nX: {}\r\n\r\n", "b".repeat(3000)).into_bytes(), 431),
        (format!("GET / HTTP/1.1\r\nHost: t\r\n{}\r\n", "X: y\r\n".repeat(30)).into_bytes(), 431),
        (b"GET /loop HTTP/1.1\r\nHost: t\r\n\r\n".to_vec(), 500),
    ];
    for (raw, status) in cases {
        let r = exchange(&server, &raw);
        assert_eq!(r.status, status, "{:?}", String::from_utf8_lossy(&raw[..raw.len().min(40)]));
        if status == 405 {
            assert_eq!(r.header("Allow"), Some("GET, HEAD"));
        }
        if status != 404 && status != 500 {
            assert_eq!(r.header("Connection"), Some("close"), "{status} closes");
        }
    }
    // 404 keeps the connection: a second request on it works.
    let mut stream = server.connect();
    let mut pending = Vec::new();
    stream.write_all(b"GET /nothing HTTP/1.1\r\nHost: t\r\n\r\nGET /small.txt HTTP/1.1\r\nHost: t\r\n\r\n").unwrap();
    assert_eq!(read_response(&mut stream, &mut pending, false).unwrap().status, 404);
    assert_eq!(read_response(&mut stream, &mut pending, false).unwrap().status, 200);
    // Slowloris: half a head, then silence -> 408 and close.
    let mut stream = server.connect();
    stream.write_all(b"GET /small.txt HTTP/1.1\r\nHost:").unwrap();
    let r = read_response(&mut stream, &mut Vec::new(), false).unwrap();
    assert_eq!((r.status, r.header("Connection")), (408, Some("close")));
    assert!(closed(&mut stream));
}

#[test]
fn idle_timeout_and_max_connections() {
    let dir = TempDir::new("http-max");
    let root = docroot(&dir);
    let server = Server::start(&root, &["--threads", "1", "--max-connections", "2", "--keepalive-timeout", "0.5"]);
    std::thread::sleep(Duration::from_millis(200)); // the readiness probe's connection is gone
    let mut first = server.connect();
    let _second = server.connect();
    std::thread::sleep(Duration::from_millis(100));
    let r = exchange(&server, b"GET /small.txt HTTP/1.1\r\nHost: t\r\n\r\n");
    assert_eq!((r.status, r.header("Connection")), (503, Some("close")));
    // Idle persistent connections are closed after --keepalive-timeout, freeing room.
    assert!(closed(&mut first));
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(exchange(&server, b"GET /small.txt HTTP/1.1\r\nHost: t\r\n\r\n").status, 200);
}

#[test]
fn admission_refuses_with_a_503_counted_by_reason() {
    // size at 8 kbit/s (1000 B/s) with a 1 s deadline: 1000-byte small.txt (plus its head) would
    // take just over 1 s alone, 14-byte index.html plus head well under it.
    let dir = TempDir::new("http-admission");
    let root = docroot(&dir);
    let admin = format!("127.0.0.1:{}", free_port());
    let server = Server::start(&root, &["--threads", "1", "--admin", &admin, "--admission", "size:rate=8kbit,deadline=1s"]);
    let refused = get(&server, "/small.txt", "");
    assert_eq!((refused.status, refused.header("Connection")), (503, Some("close")));
    assert_eq!(get(&server, "/index.html", "").status, 200);
    let metrics = Command::new("curl").args(["-s", &format!("http://{admin}/metrics")]).output().unwrap();
    let metrics = String::from_utf8_lossy(&metrics.stdout).into_owned();
    assert!(metrics.contains("sojourn_admission_refusals_total{admission=\"size\",reason=\"deadline\"} 1\n"), "{metrics}");
    assert!(metrics.contains("sojourn_requests_total{status=\"503\"} 1\n"), "{metrics}");
    let err = Command::new(ENGINE).args(["serve", "--root", "/", "--admission", "size"]).output().unwrap();
    assert!(String::from_utf8_lossy(&err.stderr).contains("--admission: admission size needs rate=RATE"));
}

#[test]
fn admission_counts_the_wait_in_the_accept_queue() {
    // size at 8 kbit/s (1000 B/s), deadline 1 s: index.html with its head takes ~0.2 s alone,
    // in time when read at once, late once it has waited 1.2 s in the accept queue.
    let dir = TempDir::new("http-admission-queue");
    let root = docroot(&dir);
    let admin = format!("127.0.0.1:{}", free_port());
    let server = Server::start(&root, &["--threads", "1", "--accept-limit", "1", "--admin", &admin, "--admission", "size:rate=8kbit,deadline=1s"]);
    std::thread::sleep(Duration::from_millis(200)); // the readiness probe's connection is gone
    let holder = server.connect(); // an idle connection holds the one place
    std::thread::sleep(Duration::from_millis(100));
    let mut waiting = server.connect();
    waiting.write_all(b"GET /index.html HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n").unwrap();
    std::thread::sleep(Duration::from_millis(1200));
    drop(holder);
    waiting.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let late = read_response(&mut waiting, &mut Vec::new(), false).expect("answered once the place was free");
    assert_eq!(late.status, 503, "a request that waited 1.2 s unread was judged as if it had just arrived");
    assert_eq!(get(&server, "/index.html", "").status, 200, "read at once, the same request is in time");
    assert!(metric(&admin, "sojourn_unread_wait_seconds_sum") >= 1.2);
    assert_eq!(metric(&admin, "sojourn_unread_wait_seconds_count"), 2.0);
}

#[test]
fn traversal_never_leaves_the_root() {
    let dir = TempDir::new("http-trav");
    let root = docroot(&dir);
    let server = Server::start(&root, &[]);
    let cases: [(&str, u16); 16] = [
        ("/../secret.txt", 403),
        ("/sub/../../secret.txt", 403),
        ("/%2e%2e/secret.txt", 403),
        ("/%2E%2E%2Fsecret.txt", 403),
        ("/sub/%2e%2e/%2e%2e/secret.txt", 403),
        ("/..%2fsecret.txt", 403),
        ("/%252e%252e/secret.txt", 404), // decoded once: the literal name "%2e%2e"
        ("/..\\secret.txt", 403),
        ("/%5c..%5csecret.txt", 403),
        ("/small.txt%00.html", 403),
        ("/leak.txt", 403),          // symlink to a file outside
        ("/up/secret.txt", 403),     // symlink to a directory outside
        ("/up/secret.txt/", 403),
        ("http://t/../secret.txt", 403),
        ("/alias.txt", 200), // a symlink inside the root is fine
        ("/sub/../small.txt", 200),
    ];
    for (target, status) in cases {
        let r = exchange(&server, format!("GET {target} HTTP/1.1\r\nHost: t\r\n\r\n").as_bytes());
        assert_eq!(r.status, status, "{target}");
        assert!(!String::from_utf8_lossy(&r.body).contains("TOP-SECRET"), "{target} leaked");
    }
    assert_eq!(get(&server, "/%252e%252e", "").body, b"literal name\n", "decoded once, a literal name");
}

#[test]
fn access_log_metrics_config_and_graceful_shutdown() {
    let dir = TempDir::new("http-obs");
    let root = docroot(&dir);
    let log = dir.0.join("access.log");
    let admin = format!("127.0.0.1:{}", free_port());
    let config = dir.0.join("serve.toml");
    let toml = format!(
        "policy = \"srpt\"\nquantum = \"8K\"\nlog-request-time = true\naccess-log = {:?}\nadmin = \"{admin}\"\nshutdown-grace = 5\n",
        log.to_str().unwrap()
    );
    std::fs::write(&config, toml).unwrap();
    let mut server = Server::start(&root, &["--config", config.to_str().unwrap(), "--threads", "1"]);
    assert_eq!(get(&server, "/small.txt", "User-Agent: test-agent\r\nReferer: http://r/\r\n").status, 200);
    assert_eq!(get(&server, "/nothing", "").status, 404);
    std::thread::sleep(Duration::from_millis(100));
    let metrics = Command::new("curl").args(["-s", &format!("http://{admin}/metrics")]).output().unwrap();
    let metrics = String::from_utf8_lossy(&metrics.stdout).into_owned();
    for line in [
        "sojourn_requests_total{status=\"200\"} 1\n",
        "sojourn_requests_total{status=\"404\"} 1\n",
        "sojourn_connections_open 0\n",
        "sojourn_epoll_ready_events_bucket{le=\"+Inf\"}",
        "sojourn_service_time_seconds_count 2\n",
        "sojourn_write_quanta_total{policy=\"srpt\"} 2\n",
        "sojourn_responses_waiting{band=\"0\"} 0\n",
        "sojourn_access_log_lines_dropped_total{policy=\"srpt\"} 0\n",
    ] {
        assert!(metrics.contains(line), "{line:?} missing from\n{metrics}");
    }
    // Graceful shutdown: a response in flight (read slowly) is finished after SIGTERM.
    std::fs::write(root.join("huge.bin"), content(8_000_000)).unwrap();
    let mut stream = server.connect();
    stream.write_all(b"GET /huge.bin HTTP/1.1\r\nHost: t\r\n\r\n").unwrap();
    let mut first = [0u8; 1000];
    let n = stream.read(&mut first).unwrap();
    let mut pending = first[..n].to_vec();
    let _ = Command::new("kill").arg("-TERM").arg(server.child.id().to_string()).status();
    std::thread::sleep(Duration::from_millis(300));
    assert!(server.child.try_wait().unwrap().is_none(), "exited with a response in flight");
    let r = read_response(&mut stream, &mut pending, false).unwrap();
    assert_eq!(r.status, 200);
    assert!(r.body == content(8_000_000), "body after SIGTERM differs");
    assert!(closed(&mut stream), "closed after the last response");
    assert!(server.child.wait().unwrap().success(), "{}", server.stderr());
    let text = std::fs::read_to_string(&log).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 3, "{text}");
    // host - - [time] "request" status bytes "referer" "agent" micros
    let fields: Vec<&str> = lines[0].split('"').collect();
    assert!(lines[0].starts_with("127.0.0.1 - - ["), "{}", lines[0]);
    assert_eq!(fields[1], "GET /small.txt HTTP/1.1");
    assert_eq!(fields[2], " 200 1000 ");
    assert_eq!((fields[3], fields[5]), ("http://r/", "test-agent"));
    assert!(fields[6].trim().parse::<u64>().is_ok(), "request time in µs: {:?}", fields[6]);
    assert!(lines[1].contains("\"GET /nothing HTTP/1.1\" 404 "));
}

#[test]
fn access_log_lines_written_by_the_writer_thread_arrive_in_order_on_shutdown() {
    let dir = TempDir::new("http-log-order");
    let root = docroot(&dir);
    let log = dir.0.join("access.log");
    let mut server = Server::start(&root, &["--threads", "1", "--access-log", log.to_str().unwrap(), "--access-log-block"]);
    let mut stream = server.connect();
    let requests = 3000;
    // Pipelined in one go, so lines are still queued when SIGTERM arrives.
    let batch: String = (0..requests).map(|i| format!("GET /missing-{i} HTTP/1.1\r\nHost: t\r\n\r\n")).collect();
    stream.write_all(batch.as_bytes()).unwrap();
    let mut pending = Vec::new();
    for i in 0..requests {
        assert_eq!(read_response(&mut stream, &mut pending, false).unwrap().status, 404, "request {i}");
    }
    drop(stream);
    let _ = Command::new("kill").arg("-TERM").arg(server.child.id().to_string()).status();
    assert!(server.child.wait().unwrap().success(), "{}", server.stderr());
    let text = std::fs::read_to_string(&log).unwrap();
    let targets: Vec<String> = text.lines().map(|line| line.split('"').nth(1).unwrap_or_default().to_string()).collect();
    let expected: Vec<String> = (0..requests).map(|i| format!("GET /missing-{i} HTTP/1.1")).collect();
    assert_eq!(targets.len(), expected.len(), "every request logged once");
    assert!(targets == expected, "lines out of order");
}

#[test]
fn kernel_bands_set_priority_once_per_band() {
    if !Command::new("id").arg("-u").output().is_ok_and(|o| o.stdout.starts_with(b"0\n")) {
        eprintln!("skipped: --kernel-bands needs CAP_NET_ADMIN");
        return;
    }
    let dir = TempDir::new("http-bands");
    let root = docroot(&dir);
    let admin = format!("127.0.0.1:{}", free_port());
    let server = Server::start(&root, &["--kernel-bands", "--quantum", "8K", "--threads", "1", "--admin", &admin]);
    let mut stream = server.connect();
    stream.write_all(b"GET /big.bin HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n").unwrap();
    let mut raw = Vec::new();
    stream.read_to_end(&mut raw).unwrap();
    let head_len = raw.windows(4).position(|w| w == b"\r\n\r\n").unwrap() + 4;
    assert_eq!(raw.len() - head_len, 300_000);
    // The band before each 8 KiB quantum, by the default cutoffs 1K, 2K, 5K, 50K (000 §3.2).
    let band = |remaining: usize| [1024, 2048, 5120, 51200].iter().filter(|&&c| c <= remaining).count();
    let mut bands: Vec<usize> = (0..).map(|k| raw.len() as i64 - 8192 * k).take_while(|&r| r > 0).map(|r| band(r as usize)).collect();
    bands.dedup();
    std::thread::sleep(Duration::from_millis(100));
    let metrics = Command::new("curl").args(["-s", &format!("http://{admin}/metrics")]).output().unwrap();
    let metrics = String::from_utf8_lossy(&metrics.stdout).into_owned();
    let expected = format!("sojourn_priority_changes_total{{policy=\"fair\"}} {}\n", bands.len());
    assert!(metrics.contains(&expected), "expected {expected:?} (bands {bands:?}) in\n{metrics}");
}

#[test]
fn a_client_that_stops_reading_is_dropped_after_send_timeout() {
    let dir = TempDir::new("http-stall");
    let root = docroot(&dir);
    let size = 48 << 20; // more than loopback socket buffers hold
    std::fs::write(root.join("huge.bin"), content(size)).unwrap();
    let admin = format!("127.0.0.1:{}", free_port());
    let server = Server::start(&root, &["--threads", "1", "--send-timeout", "0.5", "--admin", &admin]);
    let mut stream = server.connect();
    stream.write_all(b"GET /huge.bin HTTP/1.1\r\nHost: t\r\n\r\n").unwrap();
    std::thread::sleep(Duration::from_millis(2000)); // read nothing
    let mut received = 0usize;
    let mut chunk = vec![0u8; 1 << 20];
    loop {
        match stream.read(&mut chunk) {
            Ok(0) | Err(_) => break,
            Ok(n) => received += n,
        }
    }
    assert!(received < size, "the whole response arrived although the client stalled");
    // Its window closed (it read nothing), so the send timeout, not an error, closed it.
    assert_eq!(metric(&admin, "sojourn_send_timeouts_total"), 1.0);
    // The server is still healthy.
    assert_eq!(get(&server, "/small.txt", "").status, 200);
}

fn metric(admin: &str, name: &str) -> f64 {
    let out = Command::new("curl").args(["-s", &format!("http://{admin}/metrics")]).output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    text.lines()
        .find(|l| l.starts_with(name) && !l.starts_with('#'))
        .and_then(|l| l.rsplit(' ').next())
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("{name} missing from\n{text}"))
}

#[test]
fn accept_limit_makes_connections_wait_in_the_kernel_not_503() {
    let dir = TempDir::new("http-accept");
    let root = docroot(&dir);
    let admin = format!("127.0.0.1:{}", free_port());
    let server = Server::start(&root, &["--threads", "1", "--accept-limit", "2", "--admin", &admin]);
    std::thread::sleep(Duration::from_millis(200)); // the readiness probe's connection is gone
    let mut first = server.connect();
    let _second = server.connect();
    std::thread::sleep(Duration::from_millis(100));
    // A third and fourth client complete the handshake (kernel backlog) and send their
    // requests, but nothing answers while two connections are open.
    let mut waiting: Vec<_> = (0..2).map(|_| server.connect()).collect();
    for stream in &mut waiting {
        stream.write_all(b"GET /small.txt HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n").unwrap();
        stream.set_read_timeout(Some(Duration::from_millis(400))).unwrap();
        let mut byte = [0u8; 1];
        assert!(stream.read(&mut byte).is_err(), "answered while the server was at its accept limit");
    }
    assert_eq!(metric(&admin, "sojourn_connections_open"), 2.0);
    assert!(metric(&admin, "sojourn_accept_pauses_total") >= 1.0);
    // The first client leaves: the server accepts the waiting ones (as closes free room) and answers 200.
    first.write_all(b"GET /small.txt HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n").unwrap();
    assert_eq!(read_response(&mut first, &mut Vec::new(), false).unwrap().status, 200);
    drop(first);
    let mut served = 0;
    for stream in &mut waiting {
        stream.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        let response = read_response(stream, &mut Vec::new(), false).expect("served once room was free");
        assert_eq!(response.status, 200);
        served += 1;
    }
    assert_eq!(served, 2);
    assert_eq!(metric(&admin, "sojourn_connections_rejected_total"), 0.0);
}

#[test]
fn lingering_close_keeps_the_socket_until_the_client_closes() {
    let dir = TempDir::new("http-linger");
    let root = docroot(&dir);
    let admin = format!("127.0.0.1:{}", free_port());
    let server = Server::start(&root, &["--threads", "1", "--linger-close", "--linger-read-timeout", "0.6", "--admin", &admin]);
    std::thread::sleep(Duration::from_millis(200));
    let mut stream = server.connect();
    stream.write_all(b"GET /big.bin HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n").unwrap();
    let response = read_response(&mut stream, &mut Vec::new(), false).unwrap();
    assert_eq!((response.status, response.body.len()), (200, 300_000));
    assert!(closed(&mut stream), "the server half-closes after the response");
    // Our side has not closed: the server still holds the connection, lingering.
    assert_eq!(metric(&admin, "sojourn_connections_lingering"), 1.0);
    assert_eq!(metric(&admin, "sojourn_connections_open"), 1.0);
    drop(stream); // the client's FIN ends the lingering close
    std::thread::sleep(Duration::from_millis(200));
    assert_eq!(metric(&admin, "sojourn_connections_lingering"), 0.0);
    assert_eq!(metric(&admin, "sojourn_linger_timeouts_total"), 0.0);
    // A client that neither closes nor sends is dropped after --linger-read-timeout.
    let mut silent = server.connect();
    silent.write_all(b"GET /small.txt HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n").unwrap();
    assert_eq!(read_response(&mut silent, &mut Vec::new(), false).unwrap().status, 200);
    std::thread::sleep(Duration::from_millis(200));
    assert_eq!(metric(&admin, "sojourn_connections_lingering"), 1.0);
    std::thread::sleep(Duration::from_millis(800));
    assert_eq!(metric(&admin, "sojourn_connections_lingering"), 0.0);
    assert_eq!(metric(&admin, "sojourn_linger_timeouts_total"), 1.0);
}

#[test]
fn max_connections_is_fitted_to_the_open_file_limit_so_503_still_works() {
    let dir = TempDir::new("http-nofile");
    let root = docroot(&dir);
    let addr: std::net::SocketAddr = format!("127.0.0.1:{}", free_port()).parse().unwrap();
    let stderr_path = dir.0.join("serve.stderr");
    // 256 descriptors: 32 + 4 per worker + 256/16 are reserved, 204 are left for connections.
    // Without CAP_SYS_RESOURCE, as an unprivileged user: root would raise the hard limit.
    let server = Server::start_with(
        &["setpriv", "--inh-caps=-sys_resource", "--bounding-set=-sys_resource", "prlimit", "--nofile=256:256"],
        addr,
        &["--root", root.to_str().unwrap(), "--threads", "1", "--max-connections", "10000"],
        &stderr_path,
    );
    std::thread::sleep(Duration::from_millis(200));
    assert!(server.stderr().contains("--max-connections 10000 needs more descriptors than the open-file limit 256 allows; using 204"), "{}", server.stderr());
    let held: Vec<_> = (0..204).map(|_| server.connect()).collect();
    std::thread::sleep(Duration::from_millis(300));
    let r = exchange(&server, b"GET /small.txt HTTP/1.1\r\nHost: t\r\n\r\n");
    assert_eq!((r.status, r.header("Connection")), (503, Some("close")));
    assert!(!server.stderr().contains("accept failed"), "{}", server.stderr());
    drop(held);
}
