//! What the Kafka tests share: a `commitfs serve` per test, the outside
//! clients (kcat, and kafka-python and confluent-kafka in a venv under
//! `target/`), and a raw protocol client built on `kafka-protocol`.
//!
//! A missing client is a skip with a printed reason when `CI` is unset, and
//! a failure when it is set (`.ci/run` installs them). Every command is
//! bounded ([`bounded`]). Every listener a test starts binds port 0 and the
//! test takes the port from the daemon's own log line, so a test only ever
//! talks to its own server.

#![allow(dead_code)]

#[path = "../support/bounded.rs"]
pub mod bounded;
pub mod consumer_state;
pub mod requests;

use std::io::{ErrorKind, Read, Write};
use std::net::{Shutdown, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use bytes::{Bytes, BytesMut};
use kafka_protocol::messages::{ApiKey, RequestHeader, ResponseHeader};
use kafka_protocol::protocol::{Decodable, Encodable, StrBytes};

pub const BIN: &str = env!("CARGO_BIN_EXE_commitfs");

/// Skips (returns `None`, printing why) or, with `CI` set, fails.
pub fn require<T>(found: Result<T, String>) -> Option<T> {
    match found {
        Ok(t) => Some(t),
        Err(why) if std::env::var_os("CI").is_some() => {
            panic!("{why} (CI is set, so this is a failure, not a skip)")
        }
        Err(why) => {
            eprintln!("skipping: {why}");
            None
        }
    }
}

/// `kcat`, if installed.
pub fn kcat() -> Result<PathBuf, String> {
    for dir in ["/usr/bin", "/usr/local/bin", "/bin"] {
        let p = Path::new(dir).join("kcat");
        if p.exists() {
            return Ok(p);
        }
    }
    Err("kcat is not installed (apt-get install kcat)".to_string())
}

/// `kcat`, already told how to reach the broker, reading partition 0 of
/// `topic` from the beginning to its end, quietly, `extra` (a format) last.
pub fn kcat_consume(
    kcat: &mut Command,
    topic: &str,
    extra: &[&str],
    what: &str,
) -> std::process::Output {
    let args = ["-C", "-t", topic, "-p", "0", "-o", "beginning", "-e", "-q"];
    bounded::run(kcat.args(args).args(extra), what)
}

/// A Python with kafka-python and confluent-kafka, from a venv under
/// `target/`, created (and the packages installed from PyPI) on first use.
/// kafka-python decodes snappy, lz4 and zstd only with python-snappy, lz4
/// and zstandard, so those come too. Each step is bounded: one that hangs
/// (a stalled download) is an `Err` saying which, as a missing tool is.
pub fn python() -> Result<PathBuf, String> {
    static VENV: Mutex<()> = Mutex::new(());
    let _once = VENV.lock().unwrap_or_else(|e| e.into_inner());
    let venv = Path::new(env!("CARGO_MANIFEST_DIR")).join("target/kafka-venv");
    let py = venv.join("bin/python");
    let run = |cmd: &mut Command, what: &str| -> Result<(), String> {
        let out = bounded::try_run(cmd, what, bounded::cmd_timeout())?;
        if !out.status.success() {
            return Err(format!(
                "{what} failed: {}",
                String::from_utf8_lossy(&out.stderr)
            ));
        }
        Ok(())
    };
    let has_clients = |py: &Path| {
        run(
            Command::new(py).args([
                "-c",
                "import kafka, confluent_kafka, snappy, lz4, zstandard",
            ]),
            "python -c 'import kafka, confluent_kafka, ...'",
        )
    };
    if py.exists() && has_clients(&py).is_ok() {
        return Ok(py);
    }
    run(
        Command::new("python3").args(["-m", "venv"]).arg(&venv),
        "python3 -m venv",
    )?;
    run(
        Command::new(venv.join("bin/pip")).args([
            "install",
            "-q",
            "kafka-python",
            "confluent-kafka",
            "python-snappy",
            "lz4",
            "zstandard",
        ]),
        "pip install kafka-python confluent-kafka python-snappy lz4 zstandard",
    )?;
    has_clients(&py)
        .map(|()| py)
        .map_err(|e| format!("the venv has no kafka-python or confluent-kafka: {e}"))
}

/// Runs a Python script with the venv's Python, bounded; panics with its
/// output on failure, or saying which script hung.
/// Starts `script` under the venv's Python with `args`, its stdout and
/// stderr piped, for [`bounded::finish`] to wait for.
pub fn spawn_python(py: &Path, script: &str, args: &[&str], what: &str) -> bounded::Running {
    bounded::spawn(
        Command::new(py)
            .arg("-c")
            .arg(script)
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped()),
        what,
    )
}

pub fn run_python(py: &Path, script: &str, args: &[&str]) -> String {
    let what = format!(
        "the Python client script {:?} {args:?}",
        script_name(script)
    );
    let out = bounded::run(Command::new(py).arg("-c").arg(script).args(args), &what);
    assert!(
        out.status.success(),
        "{what} failed:\n{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Reads partition 0 of a topic from its start with a consumer of one of
/// two clients at an isolation level (arguments: address, `confluent` or
/// `kafka-python`, topic, `read_committed` or `read_uncommitted`) and
/// prints the values, comma separated.
pub const PY_CONSUME_ISOLATED: &str = r#"
import sys, time
addr, client, topic, isolation = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4]
values = []
if client == 'confluent':
    from confluent_kafka import Consumer, TopicPartition
    c = Consumer({'bootstrap.servers': addr, 'group.id': 'rc', 'enable.auto.commit': False,
                  'isolation.level': isolation, 'enable.partition.eof': True})
    c.assign([TopicPartition(topic, 0, 0)])
    deadline = time.time() + 30
    while time.time() < deadline:
        m = c.poll(0.5)
        if m is None:
            continue
        if m.error():
            # The end of what this isolation level may read.
            if m.error().code() == -191:
                break
            continue
        values.append(m.value().decode())
    c.close()
else:
    from kafka import KafkaConsumer, TopicPartition
    c = KafkaConsumer(bootstrap_servers=addr, enable_auto_commit=False, consumer_timeout_ms=5000,
                      isolation_level=isolation)
    tp = TopicPartition(topic, 0)
    c.assign([tp])
    c.seek_to_beginning(tp)
    for m in c:
        values.append(m.value.decode())
    c.close()
print(','.join(values))
"#;

/// A test's random seed: the environment variable `var` when it is set,
/// to replay a run, else the clock.
pub fn seed_from_env(var: &str) -> u64 {
    std::env::var(var)
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .as_nanos() as u64
        })
}

/// A script's name for messages: its first import of a client.
pub fn script_name(script: &str) -> &str {
    script
        .lines()
        .find(|l| l.starts_with("from ") || l.starts_with("import "))
        .unwrap_or("python")
        .trim()
}

/// The address a listener bound, from its daemon's log line (`Kafka
/// listener on ADDR (PLAINTEXT...`), the last one in `log`. Tests start
/// listeners on port 0 and take the port from here: the daemon bound it
/// itself, so no other test's server is on it while that daemon runs.
pub fn listener_addr(log: &str) -> Option<String> {
    log.lines()
        .rev()
        .find_map(|l| l.split_once("Kafka listener on ")?.1.split(' ').next())
        .map(str::to_string)
}

/// Waits (bounded) for a daemon whose stderr goes to `log_path` to log its
/// listener's address after byte `from` of the log; fails if `child` exits
/// first.
pub fn wait_for_listener_line(log_path: &Path, from: usize, child: &mut Child) -> String {
    let start = Instant::now();
    loop {
        let log = std::fs::read(log_path).unwrap_or_default();
        let since = String::from_utf8_lossy(log.get(from..).unwrap_or_default()).into_owned();
        if let Some(addr) = listener_addr(&since) {
            return addr;
        }
        if let Ok(Some(st)) = child.try_wait() {
            panic!("the daemon exited with {st} before it listened:\n{since}");
        }
        if start.elapsed() > bounded::cmd_timeout() {
            let stacks = bounded::stacks("daemon", child.id());
            let _ = child.kill();
            let _ = child.wait();
            panic!(
                "the daemon did not listen within {:?}:\n{since}\n{stacks}",
                bounded::cmd_timeout()
            );
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// What a daemon's log says when a long-polling Fetch is parked (held
/// until an append or its `max_wait_ms`, on no thread): the daemon logs it
/// at debug level for `commitfs_kafka::handlers::workers` ([`PARK_LOG`]).
pub const PARKED_LINE: &str = "Kafka: a Fetch parked until an append";

/// The `RUST_LOG` under which a daemon logs each parked fetch.
pub const PARK_LOG: &str = "info,commitfs_kafka::handlers::workers=debug";

/// How many fetches `log` says were parked.
pub fn parked_fetches(log: &str) -> usize {
    log.lines().filter(|l| l.contains(PARKED_LINE)).count()
}

/// Waits (bounded) until the daemon's log, as `read_log` gives it, says
/// one more fetch was parked than `before`. Fails with `what` and the log's
/// tail if none parks.
pub fn wait_for_parked_fetch(read_log: impl Fn() -> String, before: usize, what: &str) {
    let start = Instant::now();
    loop {
        let log = read_log();
        if parked_fetches(&log) > before {
            return;
        }
        if start.elapsed() > bounded::cmd_timeout() {
            let tail: Vec<&str> = log.lines().rev().take(30).collect();
            panic!(
                "{what}: no fetch parked in a long poll within {:?}; the log ends:\n{}",
                bounded::cmd_timeout(),
                tail.into_iter().rev().collect::<Vec<_>>().join("\n")
            );
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// A `commitfs serve` of a data directory. Dropping it stops it with SIGTERM.
pub struct Server {
    /// The address the daemon bound: port 0 asked, so a port of its own.
    pub addr: String,
    pub data: PathBuf,
    pub log_path: PathBuf,
    child: Option<Child>,
}

impl Server {
    /// Serves `data` with extra `-o` options, on a port of its own (it binds
    /// port 0 and logs the port it got). Its log is appended to
    /// `<data>.serve.log`, so a restart keeps the run before it.
    pub fn start(data: &Path, opts: &[&str]) -> Server {
        Server::start_logging_to(data, &data.with_extension("serve.log"), opts)
    }

    /// [`Server::start`] with the daemon's log at `log_path` (off a disk
    /// the test fills, say).
    pub fn start_logging_to(data: &Path, log_path: &Path, opts: &[&str]) -> Server {
        Server::plaintext(data, log_path, opts, None, &[])
    }

    /// [`Server::start`] with `listeners` of its own (one bound address,
    /// the first listener's, is `addr`) and `RUST_LOG=rust_log`.
    pub fn start_on(data: &Path, listeners: &str, opts: &[&str], rust_log: &str) -> Server {
        Server::start_with_args(data, listeners, opts, rust_log, &[])
    }

    /// [`Server::start_on`] with more arguments to `serve` (`--add-scram`).
    pub fn start_with_args(
        data: &Path,
        listeners: &str,
        opts: &[&str],
        rust_log: &str,
        args: &[&str],
    ) -> Server {
        let log_path = data.with_extension("serve.log");
        let mut all: Vec<String> = Vec::new();
        for a in args {
            all.push(a.to_string());
        }
        Server::spawn_args(data, &log_path, opts, None, listeners, rust_log, &all, &[])
    }

    /// [`Server::start`] of a daemon with `nofile` descriptors
    /// (RLIMIT_NOFILE, soft and hard).
    pub fn start_limited(data: &Path, opts: &[&str], nofile: u64) -> Server {
        let log_path = data.with_extension("serve.log");
        Server::plaintext(data, &log_path, opts, Some(nofile), &[])
    }

    /// [`Server::start`] with `env` set for the daemon (`FAILPOINTS` of a
    /// daemon built with the `failpoints` feature).
    pub fn start_with_env(data: &Path, opts: &[&str], env: &[(&str, &str)]) -> Server {
        let log_path = data.with_extension("serve.log");
        Server::plaintext(data, &log_path, opts, None, env)
    }

    /// One PLAINTEXT listener, with parked fetches logged.
    fn plaintext(
        data: &Path,
        log_path: &Path,
        opts: &[&str],
        nofile: Option<u64>,
        env: &[(&str, &str)],
    ) -> Server {
        let listeners = "PLAINTEXT://127.0.0.1:0";
        Server::spawn_args(data, log_path, opts, nofile, listeners, PARK_LOG, &[], env)
    }

    #[allow(clippy::too_many_arguments)]
    fn spawn_args(
        data: &Path,
        log_path: &Path,
        opts: &[&str],
        nofile: Option<u64>,
        listeners: &str,
        rust_log: &str,
        args: &[String],
        env: &[(&str, &str)],
    ) -> Server {
        let log_path = log_path.to_path_buf();
        let log = std::fs::File::options()
            .create(true)
            .append(true)
            .open(&log_path)
            .expect("log file");
        let from = log.metadata().expect("log size").len() as usize;
        let mut cmd = Command::new(BIN);
        cmd.arg("serve")
            .arg("--listeners")
            .arg(listeners)
            .args(args);
        for o in opts {
            cmd.arg("-o").arg(o);
        }
        if let Some(n) = nofile {
            limit_nofile(&mut cmd, n);
        }
        let mut child = cmd
            .arg(data)
            .env("RUST_LOG", rust_log)
            .envs(env.iter().copied())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .expect("start commitfs serve");
        let addr = wait_for_listener_line(&log_path, from, &mut child);
        Server {
            addr,
            data: data.to_path_buf(),
            log_path,
            child: Some(child),
        }
    }

    pub fn log(&self) -> String {
        std::fs::read_to_string(&self.log_path).unwrap_or_default()
    }

    /// The daemon's process id, while it runs.
    pub fn pid(&self) -> u32 {
        self.child.as_ref().expect("the daemon runs").id()
    }

    /// Whether the process still runs.
    pub fn alive(&mut self) -> bool {
        self.child
            .as_mut()
            .is_some_and(|c| c.try_wait().ok().flatten().is_none())
    }

    /// SIGKILL, as a crash: no clean shutdown.
    pub fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// SIGTERM, then a bounded wait (SIGKILL past it); returns whether it
    /// exited by itself with status 0.
    pub fn stop(&mut self) -> bool {
        let Some(mut child) = self.child.take() else {
            return false;
        };
        // SAFETY: a signal to our own child.
        unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
        if let Some(status) = bounded::wait_within(&mut child, Duration::from_secs(20)) {
            return status.success();
        }
        let _ = child.kill();
        let _ = child.wait();
        false
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.stop();
    }
}

/// Gives the command's process `n` descriptors: RLIMIT_NOFILE, soft and
/// hard, set between fork and exec.
pub fn limit_nofile(cmd: &mut Command, n: u64) {
    use std::os::unix::process::CommandExt;
    // SAFETY: setrlimit only, between fork and exec.
    unsafe {
        cmd.pre_exec(move || {
            let lim = libc::rlimit {
                rlim_cur: n,
                rlim_max: n,
            };
            if libc::setrlimit(libc::RLIMIT_NOFILE, &lim) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
}

/// A raw connection speaking the protocol through `kafka-protocol`.
pub struct Conn {
    pub stream: TcpStream,
    /// The TLS client on an `SSL` or `SASL_SSL` listener.
    pub tls: Option<rustls::ClientConnection>,
    next_id: i32,
}

/// How long a raw connection waits for the server's next bytes (or its
/// close) before the test calls the server hung.
pub const READ_TIMEOUT: Duration = Duration::from_secs(60);

/// What the server did after a request.
#[derive(Debug)]
pub enum After {
    /// It closed the connection: EOF, or a reset (a close with our bytes
    /// still unread on its side).
    Closed,
    /// It sent bytes: the connection stayed open.
    Answered(usize),
    /// Neither within [`READ_TIMEOUT`]: it hangs.
    Hung(std::io::Error),
}

impl Conn {
    pub fn new(addr: &str) -> Conn {
        let stream = TcpStream::connect(addr).unwrap_or_else(|e| panic!("connect to {addr}: {e}"));
        Conn::from_stream(stream)
    }

    /// A raw connection over a socket the test opened itself.
    pub fn from_stream(stream: TcpStream) -> Conn {
        stream
            .set_read_timeout(Some(READ_TIMEOUT))
            .expect("timeout");
        Conn {
            stream,
            tls: None,
            next_id: 1,
        }
    }

    /// A connection to a TLS listener whose certificate chains to the PEM
    /// file `ca`, with a client certificate (chain, key) if given; the
    /// handshake's failure is an `Err`.
    pub fn tls(addr: &str, ca: &Path, client: Option<(&Path, &Path)>) -> std::io::Result<Conn> {
        use rustls::pki_types::pem::PemObject;
        use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};
        let mut roots = rustls::RootCertStore::empty();
        for c in CertificateDer::pem_file_iter(ca).expect("CA file") {
            roots.add(c.expect("CA certificate")).expect("CA root");
        }
        let provider = std::sync::Arc::new(rustls::crypto::ring::default_provider());
        let builder = rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .expect("TLS versions")
            .with_root_certificates(roots);
        let config = match client {
            None => builder.with_no_client_auth(),
            Some((chain, key)) => {
                let chain: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(chain)
                    .expect("client chain")
                    .map(|c| c.expect("client certificate"))
                    .collect();
                let key = PrivateKeyDer::from_pem_file(key).expect("client key");
                builder
                    .with_client_auth_cert(chain, key)
                    .expect("client certificate and key")
            }
        };
        let host = addr.rsplit_once(':').expect("host:port").0;
        let name =
            ServerName::try_from(host.trim_matches(['[', ']']).to_string()).expect("server name");
        let mut tls = rustls::ClientConnection::new(std::sync::Arc::new(config), name)
            .map_err(std::io::Error::other)?;
        let mut stream = TcpStream::connect(addr)?;
        stream.set_read_timeout(Some(READ_TIMEOUT))?;
        while tls.is_handshaking() {
            tls.complete_io(&mut stream)?;
        }
        Ok(Conn {
            stream,
            tls: Some(tls),
            next_id: 1,
        })
    }

    fn write_bytes(&mut self, bytes: &[u8]) -> std::io::Result<()> {
        match &mut self.tls {
            None => self.stream.write_all(bytes),
            Some(tls) => rustls::Stream::new(tls, &mut self.stream).write_all(bytes),
        }
    }

    fn read_bytes(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        match &mut self.tls {
            None => self.stream.read(buf),
            Some(tls) => match rustls::Stream::new(tls, &mut self.stream).read(buf) {
                // The server closed the TCP connection without close_notify.
                Err(e) if e.kind() == ErrorKind::UnexpectedEof => Ok(0),
                // A fatal alert (a refused certificate, say) ends the connection.
                Err(e) if e.kind() == ErrorKind::InvalidData => {
                    Err(std::io::Error::new(ErrorKind::ConnectionAborted, e))
                }
                r => r,
            },
        }
    }

    /// Sends a frame of raw bytes (the size prefix is added).
    pub fn send_raw(&mut self, body: &[u8]) {
        let mut frame = (body.len() as i32).to_be_bytes().to_vec();
        frame.extend_from_slice(body);
        self.write_bytes(&frame).expect("send");
    }

    /// The next response frame, or `None` when the server closed the
    /// connection. A server that sends nothing within [`READ_TIMEOUT`]
    /// fails the test: a hang is never taken for a close.
    pub fn recv_raw(&mut self) -> Option<Bytes> {
        self.recv_for("a response")
    }

    /// [`Conn::recv_raw`], naming what is awaited in the failure.
    pub fn recv_for(&mut self, what: &str) -> Option<Bytes> {
        let mut size = [0u8; 4];
        if !self.read_all(&mut size, what)? {
            return None;
        }
        let mut body = vec![0u8; i32::from_be_bytes(size).max(0) as usize];
        if !self.read_all(&mut body, what)? {
            panic!("{what}: the server closed the connection inside a response");
        }
        Some(Bytes::from(body))
    }

    /// Fills `buf`: `Some(true)`, or `None` on a close before its first byte,
    /// `Some(false)` on a close inside it; a hang panics.
    fn read_all(&mut self, buf: &mut [u8], what: &str) -> Option<bool> {
        let mut got = 0;
        while got < buf.len() {
            match self.read_bytes(&mut buf[got..]) {
                Ok(0) if got == 0 => return None,
                Ok(0) => return Some(false),
                Ok(n) => got += n,
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(e) if closed_by_peer(&e) => return if got == 0 { None } else { Some(false) },
                Err(e) => panic!(
                    "waiting for {what}: nothing from the server within {READ_TIMEOUT:?} ({e})"
                ),
            }
        }
        Some(true)
    }

    /// What the server does next: close, answer, or nothing at all within
    /// [`READ_TIMEOUT`] (a hang, never taken for a close).
    pub fn after(&mut self) -> After {
        let mut b = [0u8; 64];
        loop {
            return match self.read_bytes(&mut b) {
                Ok(0) => After::Closed,
                Ok(n) => After::Answered(n),
                Err(e) if e.kind() == ErrorKind::Interrupted => continue,
                Err(e) if closed_by_peer(&e) => After::Closed,
                Err(e) => After::Hung(e),
            };
        }
    }

    /// Fails the test unless the server closes the connection: an answer,
    /// or a hang (no close within [`READ_TIMEOUT`]), is a failure.
    pub fn expect_closed(&mut self, what: &str) {
        match self.after() {
            After::Closed => {}
            After::Answered(n) => {
                panic!("{what}: the connection stayed open (the server sent {n} bytes)")
            }
            After::Hung(e) => panic!(
                "{what}: the server neither closed the connection nor answered within {READ_TIMEOUT:?} ({e}): it hangs"
            ),
        }
    }

    /// Encodes a request with its header.
    pub fn encode<R: Encodable>(&mut self, key: ApiKey, version: i16, req: &R) -> Vec<u8> {
        let mut buf = BytesMut::new();
        let id = self.next_id;
        self.next_id += 1;
        RequestHeader::default()
            .with_request_api_key(key as i16)
            .with_request_api_version(version)
            .with_correlation_id(id)
            .with_client_id(Some(StrBytes::from_static_str("commitfs-test")))
            .encode(&mut buf, key.request_header_version(version))
            .expect("encode header");
        req.encode(&mut buf, version).expect("encode request");
        buf.to_vec()
    }

    /// One request and its decoded response, whose correlation id must be
    /// the request's.
    pub fn call<R: Encodable, T: Decodable>(&mut self, key: ApiKey, version: i16, req: &R) -> T {
        let frame = self.encode(key, version, req);
        let id = self.next_id - 1;
        self.send_raw(&frame);
        let mut resp = self
            .recv_raw()
            .unwrap_or_else(|| panic!("{key:?} v{version}: the server closed the connection"));
        let header = ResponseHeader::decode(&mut resp, key.response_header_version(version))
            .expect("header");
        assert_eq!(
            header.correlation_id, id,
            "{key:?} v{version}: correlation id"
        );
        T::decode(&mut resp, version).expect("decode response")
    }
}

/// A read error that means the peer closed the connection.
fn closed_by_peer(e: &std::io::Error) -> bool {
    matches!(
        e.kind(),
        ErrorKind::ConnectionReset | ErrorKind::ConnectionAborted
    )
}

/// Every directory and file under `dir` (but the lock file) with its bytes
/// (`None` for a directory), for "the data dir is unchanged". Any error
/// reading it fails the test: a snapshot that swallowed errors could
/// compare two empty lists equal.
pub fn snapshot(dir: &Path) -> Vec<(PathBuf, Option<Vec<u8>>)> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let rd = std::fs::read_dir(&d).unwrap_or_else(|e| panic!("snapshot: {}: {e}", d.display()));
        for e in rd {
            let e = e.unwrap_or_else(|e| panic!("snapshot: {}: {e}", d.display()));
            let p = e.path();
            let kind = e
                .file_type()
                .unwrap_or_else(|e| panic!("snapshot: {}: {e}", p.display()));
            if kind.is_dir() {
                out.push((p.clone(), None));
                stack.push(p);
            } else if p.file_name().is_some_and(|n| n != ".lock") {
                let bytes =
                    std::fs::read(&p).unwrap_or_else(|e| panic!("snapshot: {}: {e}", p.display()));
                out.push((p, Some(bytes)));
            }
        }
    }
    assert!(!out.is_empty(), "snapshot: {} is empty", dir.display());
    out.sort();
    out
}

/// One batch of a partition's `.log` files, as kafka-protocol decodes it.
#[derive(Debug)]
pub struct DecodedBatch {
    /// The `.log` file's base offset and the batch's position in it.
    pub segment: i64,
    pub position: usize,
    pub base_offset: i64,
    pub producer_id: i64,
    /// (offset, value) of each record.
    pub records: Vec<(i64, Option<Vec<u8>>)>,
}

/// The base offsets of a partition directory's `.log` files, in order.
pub fn log_bases(dir: &Path) -> Vec<i64> {
    let mut bases: Vec<i64> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .filter_map(|e| {
            let n = e.ok()?.file_name().into_string().ok()?;
            n.strip_suffix(".log")?.parse().ok()
        })
        .collect();
    bases.sort_unstable();
    bases
}

/// Every batch of a partition directory's `.log` files, decoded by
/// kafka-protocol's `RecordBatchDecoder` (another implementation than
/// commitfs's: magic 2, CRC-32C, each record), not by commitfs's reader.
/// Fails the test on a torn tail, a batch that does not decode, or offsets
/// that are not contiguous from the first segment to the end.
pub fn decode_partition(dir: &Path) -> Vec<DecodedBatch> {
    use kafka_protocol::records::RecordBatchDecoder;
    let bases = log_bases(dir);
    let mut out = Vec::new();
    let mut next: Option<i64> = None;
    for base in bases {
        let path = dir.join(format!("{base:020}.log"));
        let bytes = std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        let mut pos = 0;
        while pos < bytes.len() {
            let where_ = format!("{} at {pos}", path.display());
            assert!(bytes.len() - pos >= 12, "{where_}: a torn batch header");
            let len = i32::from_be_bytes(bytes[pos + 8..pos + 12].try_into().unwrap());
            let end = pos
                + 12
                + usize::try_from(len).unwrap_or_else(|_| panic!("{where_}: length {len}"));
            assert!(end <= bytes.len(), "{where_}: a torn batch");
            let frame = &bytes[pos..end];
            let info = RecordBatchDecoder::decode_batch_info(&mut &frame[..])
                .unwrap_or_else(|e| panic!("{where_}: {e}"));
            let set = RecordBatchDecoder::decode(&mut &frame[..])
                .unwrap_or_else(|e| panic!("{where_}: {e}"));
            assert_eq!(info.len(), 1, "{where_}: one batch");
            let info = &info[0];
            if let Some(n) = next {
                assert_eq!(info.min_offset, n, "{where_}: offsets not contiguous");
            } else {
                assert_eq!(
                    info.min_offset, base,
                    "{where_}: the segment starts elsewhere"
                );
            }
            let records: Vec<(i64, Option<Vec<u8>>)> = set
                .records
                .iter()
                .map(|r| (r.offset, r.value.as_ref().map(|v| v.to_vec())))
                .collect();
            for (j, (o, _)) in records.iter().enumerate() {
                assert_eq!(*o, info.min_offset + j as i64, "{where_}: record offsets");
            }
            next = Some(info.min_offset + records.len() as i64);
            out.push(DecodedBatch {
                segment: base,
                position: pos,
                base_offset: info.min_offset,
                producer_id: info.producer_id,
                records,
            });
            pos = end;
        }
    }
    out
}

/// Whether the listener at `addr` hands out producer ids (InitProducerId),
/// which an idempotent producer (the cluster mount's) needs first.
pub fn grants_producer_ids(addr: &str) -> bool {
    use kafka_protocol::messages::ApiKey;
    use kafka_protocol::messages::init_producer_id_request::InitProducerIdRequest;
    use kafka_protocol::messages::init_producer_id_response::InitProducerIdResponse;
    // An idempotent producer's request: no transactional id (the default
    // is an empty one, which is a transactional producer's).
    let req = InitProducerIdRequest::default()
        .with_transactional_id(None)
        .with_transaction_timeout_ms(-1)
        .with_producer_id((-1).into())
        .with_producer_epoch(-1);
    let r: InitProducerIdResponse = Conn::new(addr).call(ApiKey::InitProducerId, 4, &req);
    r.error_code == 0
}

/// Closes the write side, for tests of truncated requests.
pub fn half_close(c: &Conn) {
    let _ = c.stream.shutdown(Shutdown::Write);
}

/// A data directory with these partitions, closed, in a temp dir of its
/// own (dropped with it).
pub fn data_dir(parts: &[&str]) -> (tempfile::TempDir, PathBuf) {
    let tmp = tempfile::tempdir().unwrap();
    let data = data_dir_with(tmp.path(), parts);
    (tmp, data)
}

/// A data directory under `tmp` with these partitions, closed.
pub fn data_dir_with(tmp: &Path, parts: &[&str]) -> PathBuf {
    let data = tmp.join("data");
    let mgr = commitfs::storage::LogManager::open(
        &data,
        commitfs::storage::LogConfig::default(),
        commitfs::storage::OpenOptions::default(),
    )
    .unwrap();
    for p in parts {
        mgr.create_partition(p).unwrap();
    }
    mgr.close().unwrap();
    data
}

/// How many times the log says `needle`: its lines, and the lines the
/// daemon's rate limit folded into them ("and N more like it").
pub fn log_count(log: &str, needle: &str) -> usize {
    log.lines()
        .filter(|l| l.contains(needle))
        .map(|l| {
            1 + l
                .split_once("(and ")
                .and_then(|(_, rest)| rest.split_once(" more like it"))
                .and_then(|(n, _)| n.parse::<usize>().ok())
                .unwrap_or(0)
        })
        .sum()
}

impl Server {
    /// Waits (bounded) until the daemon's log holds `needle` `n` times
    /// ([`log_count`]): the log then.
    pub fn wait_for_log(&self, needle: &str, n: usize) -> String {
        let start = Instant::now();
        loop {
            let log = self.log();
            if log_count(&log, needle) >= n {
                return log;
            }
            assert!(
                start.elapsed() < bounded::cmd_timeout(),
                "the daemon never logged {needle:?} {n} times:\n{log}"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Polls `done` every 100 ms until it holds; past `bound` the test
    /// fails with `what` and the daemon's log. For states that come in
    /// their own time (a rebalance, an expiry), never a timing assertion.
    pub fn wait_until(&self, what: &str, bound: Duration, mut done: impl FnMut() -> bool) {
        let deadline = Instant::now() + bound;
        loop {
            if done() {
                return;
            }
            if Instant::now() > deadline {
                panic!(
                    "gave up after {bound:?} waiting for {what}; the daemon's log:\n{}",
                    self.log()
                );
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

/// Every record of a partition directory's `.log` files as kafka-protocol
/// decodes them, (offset, key), for logs the cleaner left gaps in (which
/// [`decode_partition`] refuses); offsets must still grow.
pub fn decode_partition_records(dir: &Path) -> Vec<(i64, Option<Vec<u8>>)> {
    use kafka_protocol::records::RecordBatchDecoder;
    let bases = log_bases(dir);
    let mut out: Vec<(i64, Option<Vec<u8>>)> = Vec::new();
    for base in bases {
        let path = dir.join(format!("{base:020}.log"));
        let bytes = std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        let mut buf = &bytes[..];
        // A whole file of batches; a tail being written is not there yet.
        while buf.len() >= 12 {
            let len = i32::from_be_bytes(buf[8..12].try_into().unwrap()) as usize;
            if buf.len() < 12 + len {
                break;
            }
            let mut frame = &buf[..12 + len];
            let set = RecordBatchDecoder::decode(&mut frame)
                .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
            for r in set.records {
                assert!(
                    out.last().is_none_or(|(o, _)| *o < r.offset),
                    "{}",
                    path.display()
                );
                out.push((r.offset, r.key.map(|k| k.to_vec())));
            }
            buf = &buf[12 + len..];
        }
    }
    out
}
