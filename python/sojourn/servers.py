"""Servers under test: sojourn's own and real ones from Debian's packages.

A :class:`Server` starts one HTTP server serving a docroot on ``addr:port``, with a
configuration generated into a private temporary directory, optionally inside a
network namespace (argv prefix ``ip netns exec NS``). Used as a context manager it

* refuses to start when the port is taken, the binary is missing or the docroot cannot be read by the
  user the server's workers run as (the error names the path and what would work);
* returns only once the port answers an HTTP request (``HEAD /``, any status; it is the
  first line of the access log), or raises with the
  server's own error output if it exits or does not answer within ``start_timeout_s``;
* on exit (also after an exception) terminates the whole process group (SIGTERM, then
  SIGKILL after ``stop_timeout_s``) and removes its temporary directory.

Servers, compared on equal terms as 000 §2 and the benchmarks need: same worker
count, sendfile on, access log on or off on all of them (``access_log`` = its path, Combined Log Format where
the server allows).

| kind      | program                  | workers                     |
|-----------|--------------------------|-----------------------------|
| sojourn   | ``sojourn-engine serve`` | ``--threads``               |
| nginx     | nginx                    | ``worker_processes``        |
| apache2   | apache2, mpm_event       | ``ServerLimit`` processes   |
| apache2-prefork | apache2, mpm_prefork (a process per connection, as Apache 1.3 in 000 and 001) | ``max_connections`` processes (default 256), all started at once |
| lighttpd  | lighttpd                 | ``server.max-worker``       |
| h2o       | h2o                      | ``num-threads``             |
| command   | any argv (``{root}``, ``{addr}``, ``{port}`` substituted) | — |
"""

from __future__ import annotations

import functools
import grp
import os
import pwd
import shutil
import signal
import socket
import subprocess
import tempfile
import textwrap
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Callable

from sojourn.engine import engine_path, options_toml
from sojourn.testbed.sysnet import die_with_parent

# The servers under test, and sojourn's connection scheduling policies as `serve --policy`
# names them (crates/sched PolicyKind; test_servers checks the two lists agree).
KINDS = ("sojourn", "nginx", "apache2", "apache2-prefork", "lighttpd", "h2o", "command")
POLICIES = ("fair", "srpt", "las")
# The program each peer kind runs (sojourn's is sojourn-engine; kind = command: its argv's first word).
PROGRAMS = {"nginx": "nginx", "apache2": "apache2", "apache2-prefork": "apache2", "lighttpd": "lighttpd", "h2o": "h2o"}
# apache2-prefork's processes when max_connections leaves it open (001 §6.2 ran 256 and 1024).
PREFORK_PROCESSES = 256
# sojourn, nginx, apache2 and lighttpd ask for a listen backlog this long (h2o's own default is
# clamped likewise: test_servers checks all six), and Linux clamps it to the namespace's
# net.core.somaxconn (__sys_listen), so the testbed's network.tcp.somaxconn alone sets the
# accept queue, and with it the SYN queue (a request is dropped once that many wait): 000's
# 512 (its SYNQ = ACKQ) or 002's longer queues alike, whichever server is under test.
LISTEN_BACKLOG = 65535


class ServerError(RuntimeError):
    """A server could not be configured, started or reached."""


@dataclass(frozen=True)
class SojournOptions:
    """sojourn's own settings: the keys of its ``serve --config`` document that no other
    server has (crates/server/src/config.rs ``ServeOptions``), each field the serve option
    of the same name and the spec's ``[server]`` key of that name (sojourn.runner.plan);
    None leaves it to serve. Only a ``kind = "sojourn"`` :class:`ServerConfig` carries
    them, so an option another server lacks cannot be given to it; serve checks the values.
    A new serve option is a field here, a spec key and serve's own option."""

    # Scheduling policy (one of POLICIES) and kernel-level SRPT bands with the uplink's
    # cutoffs (000 §3; serve reads cutoffs only for its bands).
    policy: str | None = None
    kernel_bands: bool | None = None
    cutoffs: str | None = None
    # Lingering close (Apache 1.3's lingering_close; apache2 and nginx linger by
    # themselves), write concurrency and TCP_NOTSENT_LOWAT (004 §3.3); only responses with
    # at least write_concurrency_from bytes left need a write slot.
    linger_close: bool | None = None
    write_concurrency: int | None = None
    write_concurrency_from: str | None = None
    notsent_lowat: str | None = None
    # TCP_RTO_MAX_MS on the listener, which its connections inherit: the RTO backoff's cap
    # in ms (docs/testbed.md: a starved band's timers back off).
    rto_max_ms: int | None = None
    # The head's fields and delayed ACK from the start: fewer bytes per request on the uplink.
    head_fields: str | None = None
    delayed_ack: bool | None = None
    # Bytes per scheduling decision.
    quantum: str | None = None
    # Files up to this size served from memory, larger ones with sendfile ("0": none in memory).
    cache_file_max: str | None = None
    # `serve --admission NAME[:KEY=VALUE,...]`, None = every request taken.
    admission: str | None = None
    # The runner's plumbing: the Prometheus admin listener's port (--admin) and the stage
    # pool's TOML (003; `serve --stages`, /stage/ endpoints).
    admin_port: int | None = None
    stages: Path | None = None


@dataclass
class ServerConfig:
    """What to serve and how. ``kind`` is one of :data:`KINDS`; ``sojourn`` holds a
    sojourn server's own settings (None: serve's defaults)."""

    kind: str
    root: Path
    port: int
    addr: str = "127.0.0.1"
    workers: int = 1
    access_log: Path | None = None  # where to write the access log; None = logging off
    netns: str | None = None
    # Open connections beyond which the server stops accepting (new ones wait in the
    # kernel's accept queue), as Apache 1.3's process pool (000 §2: 350): sojourn
    # --accept-limit, nginx worker_connections, apache2 MaxRequestWorkers, lighttpd
    # server.max-connections, h2o max-connections. None = each server's default. (nginx's
    # count includes its listening socket: worker_connections is one more. Neither nginx nor
    # apache2's event MPM holds a slot for a connection that is writing, so with them the cap
    # is not Apache 1.3's; test_servers checks the others.)
    max_connections: int | None = None
    sojourn: SojournOptions | None = None
    extra_args: list[str] = field(default_factory=list)
    # kind == "command": the argv to run.
    command: list[str] = field(default_factory=list)
    # Run in the child before exec, e.g. Testbed.preexec(netns): joins the side's cgroup.
    preexec_fn: Callable[[], None] | None = None

    def validate(self) -> None:
        """What only this object can tell (a spec's values are checked by sojourn.runner.spec,
        serve's by serve): a known kind, options only for the server that has them, a docroot."""
        if self.kind not in KINDS:
            raise ServerError(f"unknown server kind {self.kind!r}; accepted: {', '.join(KINDS)}")
        if self.sojourn is not None and self.kind != "sojourn":
            raise ServerError(f"sojourn's own options (policy, bands, write concurrency, ...) apply to the sojourn "
                              f"server only, not {self.kind}")
        if self.kind == "command" and not self.command:
            raise ServerError("kind 'command' needs a non-empty command argv")
        if self.kind == "command" and self.max_connections:
            raise ServerError("max_connections cannot be set for kind 'command' (put it in its command line)")
        if not Path(self.root).is_dir():
            raise ServerError(f"docroot {self.root} is not a directory")


def serve_toml(c: ServerConfig) -> str:
    """The ``sojourn-engine serve --config`` document of ``c`` (keys as serve's options,
    unknown ones refused there): what every server has, then sojourn's own options."""
    own = c.sojourn or SojournOptions()
    document = {"root": c.root, "listen": f"{c.addr}:{c.port}", "threads": c.workers, "access_log": c.access_log,
                "accept_limit": c.max_connections, "admin": f"{c.addr}:{own.admin_port}" if own.admin_port else None}
    document |= {key: value for key, value in asdict(own).items() if key != "admin_port"}
    return options_toml(document)


@functools.lru_cache(maxsize=None)
def check_sojourn_options(options: SojournOptions) -> None:
    """Raises ServerError with serve's own message when serve would refuse ``options``
    (``serve --check``, so serve is the one place its rules live). The docroot is the
    runner's to add, so / stands in for it. Without a current engine nothing is checked:
    the run's pre-flight (sojourn.runner.spec.missing_programs) refuses to start then."""
    try:
        engine = engine_path(build=False)
    except FileNotFoundError:
        return
    with tempfile.TemporaryDirectory(prefix="sojourn-check-") as tmp:
        path = Path(tmp) / "serve.toml"
        path.write_text(serve_toml(ServerConfig(kind="sojourn", root=Path("/"), port=0, sojourn=options)))
        done = subprocess.run([str(engine), "serve", "--check", "--config", str(path)], capture_output=True, text=True,
                              timeout=30)
    if done.returncode != 0:
        raise ServerError(done.stderr.strip().removeprefix("sojourn-engine: "))


def _per_worker(total: int, workers: int) -> int:
    """A server-wide connection cap as a per-worker one (nginx, apache2 count per process)."""
    return max(1, -(-total // workers))


def free_port(addr: str = "127.0.0.1") -> int:
    """A TCP port free on ``addr`` right now (in the caller's namespace)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((addr, 0))
        return sock.getsockname()[1]


def _unprivileged_user() -> str:
    for name in ("www-data", "nobody"):
        try:
            pwd.getpwnam(name)
            return name
        except KeyError:
            continue
    raise ServerError("neither user www-data nor nobody exists for apache2 to run as")


def _check_world_readable(root: Path, user: str) -> None:
    """apache2 refuses to run its workers as root, so they must reach the docroot as
    ``user``: every directory up to it needs o+x and the docroot o+rx."""
    root = Path(root).resolve()
    if not root.stat().st_mode & 0o004:
        raise ServerError(f"apache2 workers run as {user} and cannot list {root} (mode {root.stat().st_mode & 0o777:o}); "
                        f"chmod o+r {root}")
    for directory in [*reversed(root.parents), root]:
        mode = directory.stat().st_mode
        if not mode & 0o001:
            raise ServerError(
                f"apache2 workers run as {user} and cannot enter {directory} (mode {mode & 0o777:o}); "
                f"put the docroot under a world-traversable directory or chmod o+x {directory}"
            )


def _signal_group(pgid: int, sig: int) -> None:
    try:
        os.killpg(pgid, sig)
    except ProcessLookupError:
        pass


def live_group_members(pgid: int) -> list[int]:
    """Pids in process group ``pgid`` that are not zombies (exited workers whose
    parent has not reaped them yet do not count)."""
    members = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        # Fields after the parenthesised command: state ppid pgrp ...
        state, _ppid, group = stat[stat.rindex(")") + 2:].split()[:3]
        if int(group) == pgid and state not in ("Z", "X"):
            members.append(int(entry.name))
    return members


def port_in_use(addr: str, port: int, netns: str | None = None) -> bool:
    """True if something already listens on ``addr:port`` (or the wildcard) in ``netns``."""
    prefix = ["ip", "netns", "exec", netns] if netns else []
    out = subprocess.run(prefix + ["ss", "-ltnH", f"sport = :{port}"], capture_output=True, text=True)
    if out.returncode != 0:
        raise ServerError(f"cannot list listening sockets{' in netns ' + netns if netns else ''}: {out.stderr.strip()}")
    for line in out.stdout.splitlines():
        local = line.split()[3]
        host = local.rsplit(":", 1)[0].strip("[]")
        if host in (addr, "*", "0.0.0.0", "::"):
            return True
    return False


class Server:
    """One running server; see the module doc for the guarantees."""

    def __init__(self, config: ServerConfig, start_timeout_s: float = 15.0, stop_timeout_s: float = 5.0,
                 log_dir: Path | None = None):
        """``log_dir``: where to keep the server's output and error log after it stops."""
        config.validate()
        self.log_dir = Path(log_dir) if log_dir else None
        self.config = config
        self.start_timeout_s = start_timeout_s
        self.stop_timeout_s = stop_timeout_s
        self.workdir: Path | None = None
        self.process: subprocess.Popen | None = None
        self.argv: list[str] = []

    # -- configuration generators, one per kind -------------------------------------------

    def _argv_sojourn(self, work: Path) -> list[str]:
        # One typed file (kept beside the run's logs as server-serve.toml); extra_args, on
        # the command line, override it.
        path = work / "serve.toml"
        path.write_text(serve_toml(self.config))
        return [str(engine_path()), "serve", "--config", str(path), *self.config.extra_args]

    def _argv_nginx(self, work: Path) -> list[str]:
        c = self.config
        # `user root` because the docroot may sit in a private directory; nginx allows it.
        user = "user root;" if os.geteuid() == 0 else ""
        log = f"access_log {c.access_log};" if c.access_log else "access_log off;"
        connections = _per_worker(c.max_connections, c.workers) + 1 if c.max_connections else 16384
        # A connection's socket and the file it sends: two descriptors each, beyond the
        # inherited open-file limit when that is lower (nginx's own worker_rlimit_nofile).
        (work / "nginx.conf").write_text(textwrap.dedent(f"""\
            {user}
            worker_processes {c.workers};
            worker_rlimit_nofile {2 * connections + 64};
            daemon off;
            pid {work}/nginx.pid;
            error_log {work}/error.log warn;
            events {{ worker_connections {connections}; }}
            http {{
                include /etc/nginx/mime.types;
                default_type application/octet-stream;
                sendfile on;
                tcp_nopush on;
                keepalive_timeout 65;
                keepalive_requests 100000;
                client_body_temp_path {work}/tmp;
                proxy_temp_path {work}/tmp;
                fastcgi_temp_path {work}/tmp;
                uwsgi_temp_path {work}/tmp;
                scgi_temp_path {work}/tmp;
                {log}
                server {{
                    listen {c.addr}:{c.port} backlog={LISTEN_BACKLOG};
                    root {c.root};
                    location /nginx_status {{ stub_status; }}
                }}
            }}
            """))
        return ["nginx", "-p", str(work), "-c", str(work / "nginx.conf")] + c.extra_args

    def _argv_apache2(self, work: Path) -> list[str]:
        """mpm_event: ``workers`` processes of threads, as a modern apache2 runs."""
        c = self.config
        threads = _per_worker(c.max_connections, c.workers) if c.max_connections else 64
        return self._apache2(work, "event", textwrap.dedent(f"""\
            StartServers {c.workers}
            ServerLimit {c.workers}
            ThreadsPerChild {threads}
            MaxRequestWorkers {c.workers * threads}
            MinSpareThreads 1
            MaxSpareThreads {c.workers * threads}"""))

    def _argv_apache2_prefork(self, work: Path) -> list[str]:
        """mpm_prefork: one single-threaded process per connection, all of them started at
        once and kept (001 §6.2 configures "256 and 1024 maximum processes")."""
        processes = self.config.max_connections or PREFORK_PROCESSES
        return self._apache2(work, "prefork", textwrap.dedent(f"""\
            StartServers {processes}
            ServerLimit {processes}
            MaxRequestWorkers {processes}
            MinSpareServers {processes}
            MaxSpareServers {processes}"""))

    def _apache2(self, work: Path, mpm: str, mpm_settings: str) -> list[str]:
        """apache2 with ``mpm`` (its module) and that module's settings."""
        c = self.config
        user = _unprivileged_user()
        _check_world_readable(Path(c.root), user)
        modules = "/usr/lib/apache2/modules"
        log = (f'LogFormat "%h %l %u %t \\"%r\\" %>s %b \\"%{{Referer}}i\\" \\"%{{User-Agent}}i\\"" combined\n'
               f"CustomLog {c.access_log} combined") if c.access_log else ""
        (work / "apache2.conf").write_text(textwrap.dedent(f"""\
            ServerRoot {work}
            ServerName peer.sojourn
            DefaultRuntimeDir {work}
            PidFile {work}/apache2.pid
            Mutex file:{work} default
            ErrorLog {work}/error.log
            LogLevel warn
            LoadModule mpm_{mpm}_module {modules}/mod_mpm_{mpm}.so
            LoadModule authz_core_module {modules}/mod_authz_core.so
            LoadModule mime_module {modules}/mod_mime.so
            LoadModule dir_module {modules}/mod_dir.so
            LoadModule status_module {modules}/mod_status.so
            User {user}
            Group {grp.getgrgid(pwd.getpwnam(user).pw_gid).gr_name}
            Listen {c.addr}:{c.port}
            ListenBacklog {LISTEN_BACKLOG}
            MaxConnectionsPerChild 0
            KeepAlive On
            MaxKeepAliveRequests 0
            KeepAliveTimeout 65
            EnableSendfile On
            EnableMMAP On
            TypesConfig /etc/mime.types
            DocumentRoot {c.root}
            <Directory />
                Require all granted
                AllowOverride None
            </Directory>
            <Location /server-status>
                SetHandler server-status
            </Location>
            """) + mpm_settings + "\n" + log + "\n")
        return ["apache2", "-d", str(work), "-f", str(work / "apache2.conf"), "-DFOREGROUND"] + c.extra_args

    def _argv_lighttpd(self, work: Path) -> list[str]:
        c = self.config
        modules = '"mod_accesslog"' if c.access_log else ""
        log = (f'accesslog.filename = "{c.access_log}"\n'
               'accesslog.format = "%h %l %u %t \\"%r\\" %>s %b \\"%{Referer}i\\" \\"%{User-Agent}i\\""'
               ) if c.access_log else ""
        # max-worker 0 is lighttpd's single-process default; n > 1 forks n workers.
        (work / "lighttpd.conf").write_text(textwrap.dedent(f"""\
            server.modules = ( {modules} )
            server.document-root = "{c.root}"
            server.bind = "{c.addr}"
            server.port = {c.port}
            server.pid-file = "{work}/lighttpd.pid"
            server.errorlog = "{work}/error.log"
            server.max-worker = {c.workers if c.workers > 1 else 0}
            server.network-backend = "sendfile"
            server.max-connections = {c.max_connections or 16384}
            server.max-fds = 32768
            server.max-keep-alive-requests = 100000
            server.listen-backlog = {LISTEN_BACKLOG}
            mimetype.assign = ( "" => "application/octet-stream" )
            """) + log + "\n")
        return ["lighttpd", "-D", "-f", str(work / "lighttpd.conf")] + c.extra_args

    def _argv_h2o(self, work: Path) -> list[str]:
        c = self.config
        user = "user: root\n" if os.geteuid() == 0 else ""
        log = f"access-log: {c.access_log}\n" if c.access_log else ""
        cap = f"max-connections: {c.max_connections}\n" if c.max_connections else ""
        (work / "h2o.conf").write_text(
            f"{user}"
            f"listen:\n  host: {c.addr}\n  port: {c.port}\n"
            f"num-threads: {c.workers}\n"
            f"{cap}"
            f"pid-file: {work}/h2o.pid\n"
            f"error-log: {work}/error.log\n"
            f"{log}"
            "http1-request-timeout: 65\n"
            "hosts:\n  default:\n    paths:\n      /:\n"
            f"        file.dir: {c.root}\n"
        )
        return ["h2o", "-c", str(work / "h2o.conf")] + c.extra_args

    def _argv_command(self, work: Path) -> list[str]:
        c = self.config
        values = {"root": str(c.root), "addr": c.addr, "port": str(c.port), "workers": str(c.workers), "work": str(work)}
        return [part.format(**values) for part in c.command] + c.extra_args

    # -- lifecycle ------------------------------------------------------------------------

    def command_line(self, work: Path) -> list[str]:
        """The full argv (namespace prefix included), writing config files into ``work``."""
        build = {
            "sojourn": self._argv_sojourn, "nginx": self._argv_nginx, "apache2": self._argv_apache2,
            "apache2-prefork": self._argv_apache2_prefork, "lighttpd": self._argv_lighttpd, "h2o": self._argv_h2o, "command": self._argv_command,
        }[self.config.kind]
        argv = build(work)
        if shutil.which(argv[0]) is None and not Path(argv[0]).is_file():
            raise ServerError(f"{argv[0]} is not installed (scripts/setup-system.sh installs it)")
        prefix = ["ip", "netns", "exec", self.config.netns] if self.config.netns else []
        return prefix + argv

    @property
    def url(self) -> str:
        return f"http://{self.config.addr}:{self.config.port}"

    @property
    def metrics_url(self) -> str | None:
        """Where the server reports its own counters: sojourn's Prometheus ``/metrics``
        (with ``admin_port``), nginx's stub_status, apache2's mod_status; else None."""
        c = self.config
        if c.kind == "sojourn":
            admin_port = c.sojourn.admin_port if c.sojourn else None
            return f"http://{c.addr}:{admin_port}/metrics" if admin_port else None
        return {"nginx": f"{self.url}/nginx_status", "apache2": f"{self.url}/server-status?auto",
                "apache2-prefork": f"{self.url}/server-status?auto"}.get(c.kind)

    def start(self) -> "Server":
        self.workdir = Path(tempfile.mkdtemp(prefix=f"sojourn-peer-{self.config.kind}-"))
        (self.workdir / "tmp").mkdir()
        os.chmod(self.workdir, 0o755)  # apache2 workers (www-data) open files under it
        try:
            if port_in_use(self.config.addr, self.config.port, self.config.netns):
                raise ServerError(f"{self.config.addr}:{self.config.port} is already in use"
                                f"{' in netns ' + self.config.netns if self.config.netns else ''}; choose another port")
            self.argv = self.command_line(self.workdir)
            self._stdio = open(self.workdir / "stdio.log", "wb")
            self.process = subprocess.Popen(self.argv, stdin=subprocess.DEVNULL, stdout=self._stdio,
                                            stderr=subprocess.STDOUT, start_new_session=True,
                                            preexec_fn=die_with_parent(self.config.preexec_fn))
            self._wait_ready()
        except BaseException:
            self.stop()
            raise
        return self

    def _server_output(self) -> str:
        text = []
        for name in ("stdio.log", "error.log"):
            path = self.workdir / name if self.workdir else None
            if path and path.is_file():
                text.append(path.read_text(errors="replace").strip()[-2000:])
        return "\n".join(t for t in text if t) or "(no output)"

    def _probe(self) -> bool:
        """True once an HTTP request to the port gets any response head."""
        target = f"{self.url}/"
        if self.config.netns:
            probe = subprocess.run(["ip", "netns", "exec", self.config.netns, "curl", "-s", "-o", "/dev/null",
                                    "--max-time", "1", "-w", "%{http_code}", target],
                                   capture_output=True, text=True)
            return probe.stdout.strip() not in ("", "000")
        try:
            with socket.create_connection((self.config.addr, self.config.port), timeout=1.0) as sock:
                sock.sendall(b"HEAD / HTTP/1.1\r\nHost: peer\r\nConnection: close\r\n\r\n")
                return sock.recv(16).startswith(b"HTTP/")
        except OSError:
            return False

    def _wait_ready(self) -> None:
        deadline = time.monotonic() + self.start_timeout_s
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise ServerError(f"{self.config.kind} exited with status {self.process.returncode} before answering "
                                f"on {self.config.addr}:{self.config.port}:\n{self._server_output()}")
            if self._probe():
                self._wait_for_processes(deadline)
                return
            time.sleep(0.05)
        raise ServerError(f"{self.config.kind} did not answer on {self.config.addr}:{self.config.port} within "
                        f"{self.start_timeout_s} s:\n{self._server_output()}")

    def _wait_for_processes(self, deadline: float) -> None:
        """apache2-prefork answers from its first process while its parent still forks the
        others (1024 took up to 4 s beside a load, with 95 up when the first answered): a run
        started then measures a server still growing. The forks also cost CPU that no process
        of the server's is charged with (idle, 1.0 CPU s in the first second, 0.14 of it on
        the group's processes). Returns once every process is up."""
        if self.config.kind != "apache2-prefork":
            return
        expected = (self.config.max_connections or PREFORK_PROCESSES) + 1  # and the parent
        while time.monotonic() < deadline:
            if len(live_group_members(self.process.pid)) >= expected:
                return
            time.sleep(0.05)
        raise ServerError(f"apache2-prefork answered but started {len(live_group_members(self.process.pid))} of its "
                          f"{expected} processes within {self.start_timeout_s} s:\n{self._server_output()}")

    def stop(self) -> int | None:
        """Stops the server's whole process group (workers too); returns the main
        process's exit status (None if never started)."""
        status = None
        if self.process is not None:
            pgid = self.process.pid
            _signal_group(pgid, signal.SIGTERM)
            try:
                self.process.wait(self.stop_timeout_s)
            except subprocess.TimeoutExpired:
                _signal_group(pgid, signal.SIGKILL)
                self.process.wait()
            deadline = time.monotonic() + self.stop_timeout_s
            while live_group_members(pgid) and time.monotonic() < deadline:
                time.sleep(0.02)
            if live_group_members(pgid):  # workers that ignored SIGTERM
                _signal_group(pgid, signal.SIGKILL)
            status = self.process.returncode
            self.process = None
        if getattr(self, "_stdio", None):
            self._stdio.close()
            self._stdio = None
        if self.workdir is not None:
            if self.log_dir is not None:
                self.log_dir.mkdir(parents=True, exist_ok=True)
                for name in ("stdio.log", "error.log", "serve.toml"):
                    if (self.workdir / name).is_file():
                        shutil.copy2(self.workdir / name, self.log_dir / f"server-{name}")
            shutil.rmtree(self.workdir, ignore_errors=True)
            self.workdir = None
        return status

    def __enter__(self) -> "Server":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()


def version(kind: str) -> str:
    """The server program's version line, for result metadata ("" for kind command)."""
    if kind == "sojourn":
        argv = [str(engine_path(build=False)), "--version"]
    elif kind in PROGRAMS:
        argv = [PROGRAMS[kind], "-v"]
    else:
        return ""
    try:
        out = subprocess.run(argv, capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired) as err:
        return f"unknown ({err})"
    text = (out.stdout + out.stderr).strip()
    return text.splitlines()[0] if text else ""
