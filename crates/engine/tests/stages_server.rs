//! `sojourn-engine serve --stages`: `/stage/<name>/` answered by the CPU worker
//! pool (003), over real TCP: 200 with the stage's timing, 404 for an unknown
//! stage, pipelined stage requests answered in order, DWFS drops answered 503
//! with a reason, and the per-stage series CSV.

#[path = "server_support.rs"]
mod support;

use std::io::Write;

use support::*;

fn stages_config(dir: &TempDir, policy: &str, processing_ms: f64, timeout_ms: f64) -> std::path::PathBuf {
    let path = dir.0.join("stages.toml");
    let series = dir.0.join("series.csv");
    std::fs::write(
        &path,
        format!(
            "policy = \"{policy}\"\nworkers = 1\nseries-csv = \"{}\"\nseries-interval-ms = 50\n\
             [[stage]]\nname = \"MM\"\nprocessing-ms = 2\n\
             [[stage]]\nname = \"CO\"\nprocessing-ms = {processing_ms}\n\
             [[class]]\nname = \"gold\"\ntimeout-ms = {timeout_ms}\nnetworks = [\"127.0.0.0/8\"]\n",
            series.display()
        ),
    )
    .unwrap();
    path
}

fn start(dir: &TempDir, config: &std::path::Path) -> Server {
    let root = dir.0.join("root");
    std::fs::create_dir_all(&root).unwrap();
    Server::start(&root, &["--threads", "1", "--stages", config.to_str().unwrap()])
}

#[test]
fn stage_requests_get_cpu_work_and_pipelined_answers_stay_in_order() {
    let dir = TempDir::new("stages-ok");
    let config = stages_config(&dir, "fifo", 3.0, 60_000.0);
    let mut server = start(&dir, &config);
    let ok = get(&server, "/stage/CO/item?x=1", "");
    assert_eq!(ok.status, 200, "{}", server.stderr());
    let body = String::from_utf8(ok.body).unwrap();
    let processing_us: u64 = body.split_whitespace().find_map(|f| f.strip_prefix("processing_us=")).unwrap().parse().unwrap();
    // At least the stage's 3 ms of CPU time (wall time can only be longer).
    assert!(processing_us >= 3_000, "{body}");
    assert_eq!(get(&server, "/stage/XX/1", "").status, 404);

    let mut stream = server.connect();
    stream.write_all(b"GET /stage/CO/1 HTTP/1.1\r\nHost: t\r\n\r\nGET /stage/MM/2 HTTP/1.1\r\nHost: t\r\n\r\nGET /nothing HTTP/1.1\r\nHost: t\r\n\r\n").unwrap();
    let mut pending = Vec::new();
    let statuses: Vec<u16> = (0..3).map(|_| read_response(&mut stream, &mut pending, false).unwrap().status).collect();
    assert_eq!(statuses, [200, 200, 404]);
    let head = exchange(&server, b"HEAD /stage/MM/1 HTTP/1.1\r\nHost: t\r\n\r\n");
    assert_eq!(head.status, 200);
    assert!(head.body.is_empty());
    assert!(server.terminate().success(), "{}", server.stderr());
    let series = std::fs::read_to_string(dir.0.join("series.csv")).unwrap();
    assert!(series.starts_with("t_s,stage,queue_length,completed,"), "{series}");
    // The last sample (at shutdown): two completions each of MM (2, HEAD 1) and CO (item, 1).
    let last: Vec<Vec<&str>> = series.lines().rev().take(2).map(|l| l.split(',').collect()).collect();
    assert_eq!((last[1][1], last[1][3]), ("MM", "2"), "{series}");
    assert_eq!((last[0][1], last[0][3]), ("CO", "2"), "{series}");
}

#[test]
fn dwfs_drops_what_cannot_meet_the_bound_with_503() {
    // 200 ms of CPU per CO request, 500 ms bound: a waiting room of 2.
    let dir = TempDir::new("stages-dwfs");
    let config = stages_config(&dir, "dwfs", 200.0, 500.0);
    let mut server = start(&dir, &config);
    let mut streams: Vec<_> = (0..8).map(|_| server.connect()).collect();
    for (i, stream) in streams.iter_mut().enumerate() {
        stream.write_all(format!("GET /stage/CO/{i} HTTP/1.1\r\nHost: t\r\n\r\n").as_bytes()).unwrap();
    }
    let responses: Vec<Response> = streams.iter_mut().map(|s| read_response(s, &mut Vec::new(), false).unwrap()).collect();
    let dropped: Vec<String> =
        responses.iter().filter(|r| r.status == 503).map(|r| String::from_utf8_lossy(&r.body).into_owned()).collect();
    assert!(responses.iter().all(|r| r.status == 200 || r.status == 503));
    assert!(dropped.len() >= 3, "{dropped:?}");
    assert!(dropped.iter().all(|b| b.starts_with("dropped reason=")), "{dropped:?}");
    assert!(server.terminate().success(), "{}", server.stderr());
}

#[test]
fn a_bad_stages_file_is_named() {
    let dir = TempDir::new("stages-bad");
    let path = dir.0.join("stages.toml");
    std::fs::write(&path, "policy = \"lifo\"\n").unwrap();
    let out = std::process::Command::new(ENGINE)
        .args(["serve", "--root", dir.0.to_str().unwrap(), "--listen", "127.0.0.1:1", "--stages", path.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("--stages") && err.contains("lifo") && err.contains("dwfs"), "{err}");
}

#[test]
fn the_admin_page_shows_the_pools_queues_weights_and_productivity() {
    // 200 ms of CPU per CO request, 500 ms bound: of 6 requests at once some are dropped.
    let dir = TempDir::new("stages-metrics");
    let config = stages_config(&dir, "dwfs", 200.0, 500.0);
    let root = dir.0.join("root");
    std::fs::create_dir_all(&root).unwrap();
    let admin = format!("127.0.0.1:{}", free_port());
    let server = Server::start(&root, &["--threads", "1", "--stages", config.to_str().unwrap(), "--admin", &admin]);
    let mut streams: Vec<_> = (0..6).map(|_| server.connect()).collect();
    for (i, stream) in streams.iter_mut().enumerate() {
        stream.write_all(format!("GET /stage/CO/{i} HTTP/1.1\r\nHost: t\r\n\r\n").as_bytes()).unwrap();
    }
    let statuses: Vec<u16> = streams.iter_mut().map(|s| read_response(s, &mut Vec::new(), false).unwrap().status).collect();
    let ok = statuses.iter().filter(|&&s| s == 200).count() as i64;
    let page = std::process::Command::new("curl").args(["-s", &format!("http://{admin}/metrics")]).output().unwrap();
    let page = String::from_utf8(page.stdout).unwrap();
    let value = |line_start: &str| -> f64 {
        page.lines().find_map(|l| l.strip_prefix(line_start)).unwrap_or_else(|| panic!("{line_start} in {page}")).trim().parse().unwrap()
    };
    assert_eq!(value("sojourn_stage_completed_total{stage=\"CO\"}") as i64, ok, "{page}");
    assert_eq!(value("sojourn_stage_queue_length{stage=\"CO\"}"), 0.0);
    // Queues empty: no stage has demand, so DWFS shares the weight equally (docs/dwfs.md).
    assert_eq!(value("sojourn_stage_weight{stage=\"MM\"}") + value("sojourn_stage_weight{stage=\"CO\"}"), 1.0, "{page}");
    let dropped = value("sojourn_stage_dropped_waiting_room_total{stage=\"CO\"}") + value("sojourn_stage_dropped_deadline_total{stage=\"CO\"}");
    let late = value("sojourn_stage_late_total{stage=\"CO\"}");
    assert!(dropped > 0.0, "{page}");
    // 003 §4.1: completed in time minus aborted (dropped or late).
    assert_eq!(value("sojourn_stages_productivity ") as i64, ok - 2 * late as i64 - dropped as i64, "{page}");
    assert!(page.contains("sojourn_connections_open"), "the server's own counters stay: {page}");
}
