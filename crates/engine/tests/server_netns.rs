//! Kernel-level SRPT through a real bottleneck (000 §3): two network namespaces
//! joined by a veth pair, `sojourn-engine bands setup` at 10 Mbit/s on the server
//! side. While a 5 MB response is being sent, 50 small responses are fetched in
//! parallel; under `srpt --kernel-bands` they must finish clearly sooner than
//! under `fair`. Needs root (CAP_NET_ADMIN); skipped otherwise.
//!
//! The server side's route uses cubic, a loss-based TCP that fills the bottleneck
//! queue as the paper's TCP did; with BBR the queue would stay short and FAIR
//! would look better than it does on the links the paper studies.

#[path = "server_support.rs"]
mod support;

use std::process::{Child, Command, Stdio};
use std::time::Duration;

use support::*;

fn run(args: &[&str]) {
    let out = Command::new(args[0]).args(&args[1..]).output().unwrap();
    assert!(out.status.success(), "{:?} failed: {}", args, String::from_utf8_lossy(&out.stderr));
}

/// Two namespaces and a veth pair named with this process's id; removed on drop.
struct Testbed {
    server_ns: String,
    client_ns: String,
    server_dev: String,
    server_ip: String,
}

impl Testbed {
    fn new() -> Testbed {
        let n = std::process::id() % 100_000;
        let bed = Testbed {
            server_ns: format!("sjsrv-s{n}"),
            client_ns: format!("sjsrv-c{n}"),
            server_dev: format!("sjsrvs{n}"),
            server_ip: format!("10.213.{}.1", n % 250),
        };
        let client_dev = format!("sjsrvc{n}");
        let client_ip = format!("10.213.{}.2/24", n % 250);
        run(&["ip", "netns", "add", &bed.server_ns]);
        run(&["ip", "netns", "add", &bed.client_ns]);
        run(&["ip", "link", "add", &bed.server_dev, "type", "veth", "peer", "name", &client_dev]);
        // GSO bursts of at most 16 KB: a 64 KB burst of the big response, once HTB has
        // dequeued it, holds the 10 Mbit/s link for 52 ms whatever the band of what follows.
        run(&["ip", "link", "set", &bed.server_dev, "gso_max_size", "16384"]);
        run(&["ip", "link", "set", &bed.server_dev, "netns", &bed.server_ns]);
        run(&["ip", "link", "set", &client_dev, "netns", &bed.client_ns]);
        let server_cidr = format!("{}/24", bed.server_ip);
        for (ns, dev, cidr) in [(&bed.server_ns, &bed.server_dev, &server_cidr), (&bed.client_ns, &client_dev, &client_ip)] {
            run(&["ip", "-n", ns, "addr", "add", cidr, "dev", dev]);
            run(&["ip", "-n", ns, "link", "set", dev, "up"]);
            run(&["ip", "-n", ns, "link", "set", "lo", "up"]);
        }
        // Per-route congestion control (sysctls may be read-only in containers).
        let subnet = format!("10.213.{}.0/24", n % 250);
        run(&["ip", "-n", &bed.server_ns, "route", "replace", &subnet, "dev", &bed.server_dev, "congctl", "cubic"]);
        run(&["ip", "netns", "exec", &bed.server_ns, ENGINE, "bands", "setup", "--dev", &bed.server_dev, "--rate", "10mbit"]);
        bed
    }

    fn in_client(&self, args: &[&str]) -> Command {
        let mut command = Command::new("ip");
        command.args(["netns", "exec", &self.client_ns]).args(args);
        command
    }
}

impl Drop for Testbed {
    fn drop(&mut self) {
        // Deleting a namespace removes the veth end inside it (and so the pair).
        let _ = Command::new("ip").args(["netns", "del", &self.server_ns]).status();
        let _ = Command::new("ip").args(["netns", "del", &self.client_ns]).status();
    }
}

/// Kills a client process on drop.
struct Running(Child);

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Mean completion time (s) of 50 small responses fetched while a 5 MB one is in flight.
fn small_response_mean(bed: &Testbed, root: &std::path::Path, policy_args: &[&str]) -> f64 {
    let addr = format!("{}:8080", bed.server_ip).parse().unwrap();
    let stderr = root.with_extension(format!("{}.stderr", policy_args.join("")));
    let args = [&["--root", root.to_str().unwrap(), "--threads", "1"], policy_args].concat();
    let _server = Server::start_with(&["ip", "netns", "exec", &bed.server_ns], addr, &args, &stderr);
    let big_url = format!("http://{}:8080/big.bin", bed.server_ip);
    let _big = Running(bed.in_client(&["curl", "-s", "-o", "/dev/null", &big_url]).stdout(Stdio::null()).spawn().unwrap());
    std::thread::sleep(Duration::from_millis(1500)); // the bottleneck queue is full by now
    // One after another on a persistent connection, so each small response meets the big one's queue.
    let mut curl = bed.in_client(&["curl", "-s", "-w", "%{http_code} %{time_total}\\n"]);
    for i in 0..50 {
        curl.args(["-o", "/dev/null", &format!("http://{}:8080/s{i}.bin", bed.server_ip)]);
    }
    let out = curl.output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    let times: Vec<f64> = text
        .lines()
        .map(|line| {
            let (status, time) = line.split_once(' ').unwrap();
            assert_eq!(status, "200", "{text}");
            time.parse().unwrap()
        })
        .collect();
    assert_eq!(times.len(), 50, "{text}");
    times.iter().sum::<f64>() / times.len() as f64
}

#[test]
fn srpt_kernel_bands_finish_small_responses_sooner_than_fair() {
    if !std::process::Command::new("id").arg("-u").output().is_ok_and(|o| o.stdout.starts_with(b"0\n")) {
        eprintln!("skipped: needs root for network namespaces and qdiscs");
        return;
    }
    let dir = TempDir::new("netns");
    let root = dir.0.join("root");
    std::fs::create_dir_all(&root).unwrap();
    std::fs::write(root.join("big.bin"), content(5_000_000)).unwrap();
    for i in 0..50 {
        std::fs::write(root.join(format!("s{i}.bin")), content(3_000)).unwrap();
    }
    let bed = Testbed::new();
    let fair = small_response_mean(&bed, &root, &["--policy", "fair"]);
    let srpt = small_response_mean(&bed, &root, &["--policy", "srpt", "--kernel-bands"]);
    let shown = Command::new("ip").args(["netns", "exec", &bed.server_ns, ENGINE, "bands", "show", "--dev", &bed.server_dev]).output().unwrap();
    println!("{}", String::from_utf8_lossy(&shown.stdout));
    // The small responses (3 KB + head) went out in band 2, the big one in bands 4 and lower.
    let json = Command::new("ip").args(["netns", "exec", &bed.server_ns, ENGINE, "bands", "show", "--dev", &bed.server_dev, "--json"]).output().unwrap();
    let sent = |band: &str| -> u64 {
        let text = String::from_utf8_lossy(&json.stdout).into_owned();
        let line = text.lines().find(|l| l.contains(&format!("\"band\":{band},"))).unwrap_or_else(|| panic!("band {band} missing: {text}"));
        let after = &line[line.find("\"sent_bytes\":").unwrap() + 13..];
        after[..after.find(|c: char| !c.is_ascii_digit()).unwrap()].parse().unwrap()
    };
    assert!(sent("2") >= 50 * 3_000, "band 2 carried the small responses");
    assert!(sent("4") > 1_000_000, "band 4 carried most of the big response");
    println!("mean time of 50 small (3 KB) responses beside a 5 MB one at 10 Mbit/s: fair {fair:.3} s, srpt --kernel-bands {srpt:.3} s, ratio {:.1}", fair / srpt);
    assert!(srpt * 2.0 < fair, "srpt {srpt:.3} s is not clearly below fair {fair:.3} s");
}
