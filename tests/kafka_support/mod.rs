//! What the Kafka tests share: a `commitfs serve` per test, the outside
//! clients (kcat, and kafka-python and confluent-kafka in a venv under
//! `target/`), and a raw protocol client built on `kafka-protocol`.
//!
//! A missing client is a skip with a printed reason when `CI` is unset, and
//! a failure when it is set (`.ci/run` installs them).

#![allow(dead_code)]

use std::io::{Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
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

/// A Python with kafka-python and confluent-kafka, from a venv under
/// `target/`, created (and the packages installed from PyPI) on first use.
/// kafka-python decodes snappy, lz4 and zstd only with python-snappy, lz4
/// and zstandard, so those come too.
pub fn python() -> Result<PathBuf, String> {
    static VENV: Mutex<()> = Mutex::new(());
    let _once = VENV.lock().unwrap_or_else(|e| e.into_inner());
    let venv = Path::new(env!("CARGO_MANIFEST_DIR")).join("target/kafka-venv");
    let py = venv.join("bin/python");
    let has_clients = |py: &Path| {
        Command::new(py)
            .args([
                "-c",
                "import kafka, confluent_kafka, snappy, lz4, zstandard",
            ])
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success())
    };
    if py.exists() && has_clients(&py) {
        return Ok(py);
    }
    let run = |cmd: &mut Command, what: &str| -> Result<(), String> {
        let out = cmd
            .output()
            .map_err(|e| format!("{what}: cannot run: {e}"))?;
        if !out.status.success() {
            return Err(format!(
                "{what} failed: {}",
                String::from_utf8_lossy(&out.stderr)
            ));
        }
        Ok(())
    };
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
    if has_clients(&py) {
        Ok(py)
    } else {
        Err("the venv has no kafka-python or confluent-kafka".to_string())
    }
}

/// Runs a Python script with the venv's Python; panics with its output on failure.
pub fn run_python(py: &Path, script: &str, args: &[&str]) -> String {
    let out = Command::new(py)
        .arg("-c")
        .arg(script)
        .args(args)
        .output()
        .expect("run python");
    assert!(
        out.status.success(),
        "python failed:\n{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Runs a command, with a bound on its time. Its output is read as it comes,
/// so a chatty command never blocks on a full pipe.
pub fn run_bounded(cmd: &mut Command, bound: Duration) -> Output {
    let mut child = cmd
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn");
    let drain = |mut r: Box<dyn Read + Send>| {
        std::thread::spawn(move || {
            let mut buf = Vec::new();
            let _ = r.read_to_end(&mut buf);
            buf
        })
    };
    let out = drain(Box::new(child.stdout.take().expect("stdout")));
    let err = drain(Box::new(child.stderr.take().expect("stderr")));
    let start = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().expect("wait") {
            break Some(status);
        }
        if start.elapsed() > bound {
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let stdout = out.join().unwrap_or_default();
    let stderr = err.join().unwrap_or_default();
    match status {
        Some(status) => Output {
            status,
            stdout,
            stderr,
        },
        None => panic!(
            "{cmd:?} ran longer than {bound:?}:\n{}\n{}",
            String::from_utf8_lossy(&stdout),
            String::from_utf8_lossy(&stderr)
        ),
    }
}

/// A free port on 127.0.0.1 (the listener binds it a moment later).
pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free port")
}

/// Waits until something accepts connections on `addr`.
pub fn wait_for_listener(addr: &str, bound: Duration) -> bool {
    let start = Instant::now();
    while start.elapsed() < bound {
        if TcpStream::connect(addr).is_ok() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    false
}

/// A `commitfs serve` of a data directory. Dropping it stops it with SIGTERM.
pub struct Server {
    pub addr: String,
    pub data: PathBuf,
    pub log_path: PathBuf,
    child: Option<Child>,
}

impl Server {
    /// Serves `data` with extra `-o` options.
    pub fn start(data: &Path, opts: &[&str]) -> Server {
        let port = free_port();
        let addr = format!("127.0.0.1:{port}");
        let log_path = data.with_extension("serve.log");
        let log = std::fs::File::create(&log_path).expect("log file");
        let mut cmd = Command::new(BIN);
        cmd.arg("serve")
            .arg("--listeners")
            .arg(format!("PLAINTEXT://{addr}"));
        for o in opts {
            cmd.arg("-o").arg(o);
        }
        let child = cmd
            .arg(data)
            .env("RUST_LOG", "info")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .expect("start commitfs serve");
        let mut s = Server {
            addr,
            data: data.to_path_buf(),
            log_path,
            child: Some(child),
        };
        if !wait_for_listener(&s.addr, Duration::from_secs(20)) {
            let log = s.log();
            s.stop();
            panic!("commitfs serve did not listen:\n{log}");
        }
        s
    }

    pub fn log(&self) -> String {
        std::fs::read_to_string(&self.log_path).unwrap_or_default()
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
        let start = Instant::now();
        while start.elapsed() < Duration::from_secs(20) {
            if let Ok(Some(status)) = child.try_wait() {
                return status.success();
            }
            std::thread::sleep(Duration::from_millis(20));
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

/// A raw connection speaking the protocol through `kafka-protocol`.
pub struct Conn {
    pub stream: TcpStream,
    next_id: i32,
}

impl Conn {
    pub fn new(addr: &str) -> Conn {
        let stream = TcpStream::connect(addr).expect("connect");
        stream
            .set_read_timeout(Some(Duration::from_secs(60)))
            .expect("timeout");
        Conn { stream, next_id: 1 }
    }

    /// Sends a frame of raw bytes (the size prefix is added).
    pub fn send_raw(&mut self, body: &[u8]) {
        let mut frame = (body.len() as i32).to_be_bytes().to_vec();
        frame.extend_from_slice(body);
        self.stream.write_all(&frame).expect("send");
    }

    /// The next response frame, or `None` when the server closed the connection.
    pub fn recv_raw(&mut self) -> Option<Bytes> {
        let mut size = [0u8; 4];
        self.stream.read_exact(&mut size).ok()?;
        let mut body = vec![0u8; i32::from_be_bytes(size).max(0) as usize];
        self.stream.read_exact(&mut body).ok()?;
        Some(Bytes::from(body))
    }

    /// Whether the server closed the connection (reads EOF or a reset).
    pub fn closed(&mut self) -> bool {
        let mut b = [0u8; 1];
        matches!(self.stream.read(&mut b), Ok(0) | Err(_))
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

    /// One request and its decoded response.
    pub fn call<R: Encodable, T: Decodable>(&mut self, key: ApiKey, version: i16, req: &R) -> T {
        let frame = self.encode(key, version, req);
        self.send_raw(&frame);
        let mut resp = self
            .recv_raw()
            .expect("a response, not a closed connection");
        ResponseHeader::decode(&mut resp, key.response_header_version(version)).expect("header");
        T::decode(&mut resp, version).expect("decode response")
    }
}

/// Every file under `dir` with its bytes, for "the data dir is unchanged".
pub fn snapshot(dir: &Path) -> Vec<(PathBuf, Vec<u8>)> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let Ok(rd) = std::fs::read_dir(&d) else {
            continue;
        };
        for e in rd.flatten() {
            let p = e.path();
            if p.is_dir() {
                stack.push(p);
            } else if p.file_name().is_some_and(|n| n != ".lock") {
                out.push((p.clone(), std::fs::read(&p).unwrap_or_default()));
            }
        }
    }
    out.sort();
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
