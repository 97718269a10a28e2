//! `sojourn-engine serve`: options, start-up (listeners, workers, admin, signals)
//! and graceful shutdown. The event loop itself is in [`crate::worker`].

use std::os::fd::AsRawFd;
use std::sync::Arc;

use anyhow::{bail, Context};
use socket2::{Domain, Protocol, Socket, Type};
use sojourn_sys::signals::{self, SecondSignal};

use crate::access_log::{spawn_writer, Sink, WhenFull};
use crate::config::{ServeOptions, Settings};
use crate::metrics::Metrics;
use crate::worker::{Shared, Worker};

/// Serve a directory over HTTP/1.1 with a chosen connection-scheduling policy.
///
/// Every option may also be given in a TOML file (`--config FILE`) under the same name
/// (`policy = "srpt"`, `write-concurrency = 1`); options after FILE replace the file's.
#[derive(Debug, clap::Args)]
pub struct ServeArgs {
    /// TOML file with any of the options below as keys (kebab-case), then options that
    /// replace the file's (options before --config replace them too).
    #[arg(long, num_args = 1.., allow_hyphen_values = true, value_names = ["FILE", "OPTIONS"])]
    config: Vec<std::ffi::OsString>,
    /// Check the options and exit (0: serve would take them; else the error it would
    /// give), as `nginx -t`: the runner checks a spec's server settings this way before
    /// anything starts. Give it before --config.
    #[arg(long)]
    check: bool,
    #[command(flatten)]
    options: ServeOptions,
}

/// A listening socket with SO_REUSEPORT, so each worker can own one (the kernel
/// spreads new connections across them). `delayed_ack`: TCP_QUICKACK off, which
/// accepted connections inherit before their request arrives (setting it after
/// accept would come too late: the request is usually ACKed by then). Receive
/// timestamps (with --admission), inherited likewise, so a request read after waiting in
/// the accept queue still says when it arrived (what --admission judges by). The RTO's
/// backoff cap (--rto-max-ms), inherited likewise.
fn reuseport_listener(settings: &Settings) -> std::io::Result<std::net::TcpListener> {
    let addr = settings.listen;
    let socket = Socket::new(Domain::for_address(addr), Type::STREAM, Some(Protocol::TCP))?;
    socket.set_reuse_address(true)?;
    socket.set_reuse_port(true)?;
    socket.set_nonblocking(true)?;
    socket.bind(&addr.into())?;
    // Linux clamps the backlog to net.core.somaxconn (__sys_listen): the host's, or the
    // testbed's network.tcp.somaxconn, sets the accept queue, as for the peers (sojourn.servers).
    socket.listen(i32::from(u16::MAX))?;
    if settings.delayed_ack {
        // After listen(), which clears the ACK state (inet_csk_delack_init).
        socket.set_quickack(false)?;
    }
    if settings.admission.is_some() {
        sojourn_sys::socket::set_receive_timestamps(socket.as_raw_fd())?;
    }
    if let Some(ms) = settings.rto_max_ms {
        sojourn_sys::socket::set_rto_max(socket.as_raw_fd(), ms)
            .map_err(|e| std::io::Error::new(e.kind(), format!("--rto-max-ms {ms}: TCP_RTO_MAX_MS (Linux 6.15 or later): {e}")))?;
    }
    Ok(socket.into())
}

/// Buffers (each up to 32 KiB of lines from one worker) the access-log channel holds.
const LOG_CHANNEL_BUFFERS: usize = 64;

/// Threads opening files for cache misses, shared by all workers (see [`crate::opener`]).
const OPENER_THREADS: usize = 2;

/// Descriptors kept free of connections: standard streams, each worker's listener, epoll
/// and waker, the admin listener, the access log and files being opened.
fn fixed_fds(threads: usize) -> u64 {
    32 + 4 * threads as u64
}

/// Descriptors for the workers' file caches (one per distinct file a worker holds open,
/// shared by its responses): a sixteenth of the limit, split among the workers, whose
/// caches are bounded to it so files and connections never compete for the last one.
fn file_fds(fd_limit: u64) -> u64 {
    fd_limit / 16
}

/// Raises RLIMIT_NOFILE to its hard limit and lowers --max-connections (and
/// --accept-limit) to what it leaves for connections, saying so: beyond the descriptor
/// limit accept() fails and the promised 503 could never be sent.
fn fit_connections_to_fd_limit(settings: &mut Settings) -> anyhow::Result<()> {
    let fd_limit = sojourn_sys::raise_nofile_limit().context("cannot read the open-file limit (RLIMIT_NOFILE)")?;
    settings.file_cache_entries = settings.file_cache_entries.min((file_fds(fd_limit) / settings.threads as u64) as usize).max(1);
    let usable = fd_limit.saturating_sub(fixed_fds(settings.threads) + file_fds(fd_limit)) as usize;
    if usable == 0 {
        bail!("the open-file limit {fd_limit} leaves no descriptor for connections; raise it (ulimit -n)");
    }
    if settings.max_connections > usable {
        eprintln!(
            "sojourn-engine serve: --max-connections {} needs more descriptors than the open-file limit {fd_limit} allows; \
             using {usable} (raise the hard limit, e.g. ulimit -Hn, for more)",
            settings.max_connections
        );
        settings.max_connections = usable;
    }
    if let Some(limit) = settings.accept_limit.filter(|&l| l > usable) {
        eprintln!("sojourn-engine serve: --accept-limit {limit} lowered to {usable} by the open-file limit {fd_limit}");
        settings.accept_limit = Some(usable);
    }
    Ok(())
}

pub fn run(args: ServeArgs) -> anyhow::Result<()> {
    let options = if args.config.is_empty() {
        args.options
    } else {
        sojourn_config::given_over(&args.options, sojourn_config::file_then_options(&args.config, "sojourn-engine serve")?)?
    };
    let mut settings = Settings::from_options(options)?;
    if args.check {
        return Ok(());
    }
    fit_connections_to_fd_limit(&mut settings)?;
    if let Some(bands) = &settings.kernel_bands {
        // Fail now rather than on the first response: priorities above 6 need CAP_NET_ADMIN.
        let probe = Socket::new(Domain::IPV4, Type::STREAM, None)?;
        let priority = crate::qdisc::so_priority(bands.count() - 1);
        sojourn_sys::socket::set_priority(std::os::fd::AsRawFd::as_raw_fd(&probe), priority)
            .with_context(|| format!("--kernel-bands: cannot set SO_PRIORITY {priority} (needs CAP_NET_ADMIN, e.g. root)"))?;
    }
    // The first signal starts a graceful shutdown; a second one exits at once.
    signals::stop_on_sigint_sigterm(SecondSignal::ExitsAtOnce).context("cannot install signal handlers")?;
    let (log, log_writer) = match &settings.access_log {
        Some(path) => {
            let sink = Sink::open(path).with_context(|| format!("--access-log {}: cannot open for appending", path.display()))?;
            let when_full = if settings.access_log_block { WhenFull::Block } else { WhenFull::Drop };
            let (sender, writer) = spawn_writer(sink, LOG_CHANNEL_BUFFERS, when_full)?;
            (Some(sender), Some(writer))
        }
        None => (None, None),
    };
    let metrics = Arc::new(Metrics::new(settings.policy.name(), settings.threads).with_admission(settings.admission.as_ref().map(|a| a.name())));
    let band_count = settings.kernel_bands.as_ref().map_or(5, |b| b.count());
    let stages = settings.stages.clone().map(sojourn_stages::StagePool::start).transpose()?.map(Arc::new);
    if let Some(admin) = settings.admin {
        let listener = std::net::TcpListener::bind(admin).with_context(|| format!("--admin {admin}: cannot listen"))?;
        let (metrics, stages) = (metrics.clone(), stages.clone());
        std::thread::Builder::new().name("admin".into()).spawn(move || crate::admin::serve(listener, metrics, band_count, stages))?;
    }
    let listen = settings.listen;
    let threads = settings.threads;
    let opener = crate::opener::OpenerPool::start(OPENER_THREADS, settings.root.clone(), settings.cache_file_max)?;
    let shared = Arc::new(Shared { settings, metrics, log, stages, opener });
    let mut workers = Vec::new();
    for index in 0..threads {
        let listener = reuseport_listener(&shared.settings).with_context(|| format!("--listen {listen}: cannot listen"))?;
        let worker = Worker::new(index, listener, shared.clone())?;
        workers.push(std::thread::Builder::new().name(format!("worker-{index}")).spawn(move || worker.run())?);
    }
    let s = &shared.settings;
    eprintln!(
        "sojourn-engine serve: {} on http://{listen} with {threads} workers, policy {}, quantum {} B{}",
        s.root.display(),
        s.policy,
        s.quantum,
        if s.kernel_bands.is_some() { ", kernel bands" } else { "" }
    );
    if let Some(admission) = &s.admission {
        eprintln!("sojourn-engine serve: admission {admission:?}");
    }
    for worker in workers {
        worker.join().map_err(|_| anyhow::anyhow!("a worker thread panicked"))?.context("event loop failed")?;
    }
    // The workers are gone: dropping the last log sender lets the writer write what is queued and end.
    drop(shared);
    if let Some(writer) = log_writer {
        writer.join().map_err(|_| anyhow::anyhow!("the access-log writer thread panicked"))?;
    }
    eprintln!("sojourn-engine serve: stopped");
    Ok(())
}
