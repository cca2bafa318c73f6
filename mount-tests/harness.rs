//! A real mount of a fresh data directory, driven through `sh -c`.
//!
//! The daemon runs in the foreground with its stderr in a file next to the
//! data directory, so tests can grep its log. The guard always unmounts and
//! reaps the daemon, even when the test panics.

use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Output, Stdio};
use std::thread::sleep;
use std::time::{Duration, Instant};

pub use crate::kafka_support::bounded::{cmd_timeout, run_bounded, stacks};

const BIN: &str = env!("CARGO_BIN_EXE_commitfs");
const MOUNT_TIMEOUT: Duration = Duration::from_secs(10);

/// Polls `f` every 50 ms until it holds; past `bound` the test fails,
/// naming `what`.
pub fn wait_for(what: &str, bound: Duration, mut f: impl FnMut() -> bool) {
    let deadline = Instant::now() + bound;
    while !f() {
        assert!(Instant::now() < deadline, "{what}: not within {bound:?}");
        sleep(Duration::from_millis(50));
    }
}

/// The value of the `key: value` line of a partition's `status` text.
pub fn status_value(text: &str, key: &str) -> i64 {
    text.lines()
        .find_map(|l| l.strip_prefix(&format!("{key}: ")))
        .unwrap_or_else(|| panic!("no {key} in status:\n{text}"))
        .trim()
        .parse()
        .expect("numeric status value")
}

/// Why mount tests cannot run here, if they cannot.
fn fuse_unavailable() -> Option<String> {
    if !Path::new("/dev/fuse").exists() {
        return Some("/dev/fuse is missing".to_string());
    }
    // SAFETY: geteuid cannot fail.
    if unsafe { libc::geteuid() } != 0 {
        return Some("mount tests mount with mount(2) and need root".to_string());
    }
    None
}

/// Returns true when the test should go on. In CI a missing FUSE is a failure.
pub fn fuse_or_skip() -> bool {
    match fuse_unavailable() {
        None => true,
        Some(why) if std::env::var_os("CI").is_some() => {
            panic!("mount tests cannot run: {why} (CI is set, so this is a failure, not a skip)")
        }
        Some(why) => {
            eprintln!("skipping mount test: {why}");
            false
        }
    }
}

/// Mounts a fresh data dir, or returns from the test when FUSE is unavailable.
#[macro_export]
macro_rules! mount {
    ($($opt:expr),* $(,)?) => {{
        if !$crate::harness::fuse_or_skip() {
            return;
        }
        $crate::harness::Mount::new(&[$($opt),*])
    }};
}

/// Mount points as /proc/self/mountinfo lists them (octal escapes decoded).
pub fn mounted(path: &Path) -> bool {
    let info = std::fs::read_to_string("/proc/self/mountinfo").unwrap_or_default();
    info.lines().any(|l| {
        l.split(' ')
            .nth(4)
            .is_some_and(|mp| unescape(mp) == path.as_os_str().to_string_lossy())
    })
}

fn unescape(s: &str) -> String {
    let mut out = Vec::new();
    let b = s.as_bytes();
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'\\'
            && i + 3 < b.len()
            && b[i + 1..i + 4].iter().all(|c| (b'0'..=b'7').contains(c))
        {
            out.push(u8::from_str_radix(&s[i + 1..i + 4], 8).unwrap_or(b'?'));
            i += 4;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

pub struct Mount {
    _tmp: tempfile::TempDir,
    pub data: PathBuf,
    pub mnt: PathBuf,
    pub log_path: PathBuf,
    pub opts: Vec<String>,
    /// Extra environment for the daemon (e.g. `RUST_LOG`).
    pub env: Vec<(String, String)>,
    /// A command the daemon runs under (e.g. `strace -f -o FILE`), if any.
    pub wrapper: Vec<String>,
    /// A cluster mount of these brokers instead of a data-dir mount.
    pub bootstrap: Option<String>,
    child: Option<Child>,
}

impl Mount {
    pub fn new(opts: &[&str]) -> Mount {
        Mount::with(opts, None, &[])
    }

    /// A mount whose data dir is `data` (e.g. on a filesystem the test
    /// mounted) instead of a fresh one, with extra environment for the daemon.
    pub fn with(opts: &[&str], data: Option<&Path>, env: &[(&str, &str)]) -> Mount {
        Mount::build(opts, data, env, None, |_| Vec::new())
    }

    /// A cluster mount: `commitfs mount --bootstrap-server BOOTSTRAP MNT`.
    pub fn cluster(bootstrap: &str, opts: &[&str]) -> Mount {
        Mount::build(opts, None, &[], Some(bootstrap.to_string()), |_| Vec::new())
    }

    fn build(
        opts: &[&str],
        data: Option<&Path>,
        env: &[(&str, &str)],
        bootstrap: Option<String>,
        wrapper: impl FnOnce(&Path) -> Vec<String>,
    ) -> Mount {
        let tmp = tempfile::Builder::new()
            .prefix("commitfs-mt-")
            .tempdir()
            .expect("tempdir");
        let root = tmp.path().canonicalize().expect("canonical tempdir");
        let mut m = Mount {
            data: data.map_or_else(|| root.join("data"), Path::to_path_buf),
            mnt: root.join("mnt"),
            log_path: root.join("daemon.log"),
            opts: opts.iter().map(|s| s.to_string()).collect(),
            env: env
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            wrapper: wrapper(&root),
            bootstrap,
            _tmp: tmp,
            child: None,
        };
        m.start();
        m
    }

    /// A mount of a fresh data dir whose daemon runs under `wrapper`, which
    /// must run the daemon it is given and exit when it exits. `wrapper`
    /// gets the work directory (the data dir's parent) for its files.
    pub fn wrapped(opts: &[&str], wrapper: impl FnOnce(&Path) -> Vec<String>) -> Mount {
        Mount::build(opts, None, &[], None, wrapper)
    }

    /// The daemon's process id, while it runs.
    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(Child::id)
    }

    /// The daemon command line for this data dir and mountpoint.
    pub fn command(&self, mnt: &Path) -> Command {
        let mut c = match self.wrapper.split_first() {
            Some((w, args)) => {
                let mut c = Command::new(w);
                c.args(args).arg(BIN);
                c
            }
            None => Command::new(BIN),
        };
        c.arg("mount").arg("--foreground");
        for o in &self.opts {
            c.arg("-o").arg(o);
        }
        match &self.bootstrap {
            Some(b) => c.arg("--bootstrap-server").arg(b).arg(mnt),
            None => c.arg(&self.data).arg(mnt),
        };
        c.envs(self.env.iter().map(|(k, v)| (k, v)));
        c
    }

    fn start(&mut self) {
        assert!(self.child.is_none(), "a daemon is already running");
        let log = File::options()
            .create(true)
            .append(true)
            .open(&self.log_path)
            .expect("daemon log");
        let mut child = self
            .command(&self.mnt)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .expect("spawn commitfs");
        let deadline = Instant::now() + MOUNT_TIMEOUT;
        while !mounted(&self.mnt) {
            if let Some(st) = child.try_wait().expect("try_wait") {
                panic!("commitfs exited with {st} before mounting:\n{}", self.log());
            }
            if Instant::now() > deadline {
                let _ = child.kill();
                let _ = child.wait();
                panic!(
                    "commitfs did not mount within {MOUNT_TIMEOUT:?}:\n{}",
                    self.log()
                );
            }
            sleep(Duration::from_millis(20));
        }
        self.child = Some(child);
    }

    /// Runs `sh -c cmd` in the mountpoint.
    pub fn sh(&self, cmd: &str) -> Output {
        self.sh_in(&self.mnt, cmd)
    }

    pub fn sh_in(&self, dir: &Path, cmd: &str) -> Output {
        let mut c = Command::new("sh");
        c.arg("-c").arg(cmd).current_dir(dir);
        run_bounded(&mut c, &format!("`{cmd}`"), sh_timeout(), || {
            format!(
                "{}\ndaemon log (last lines):\n{}",
                self.pid().map_or_else(String::new, |p| stacks("daemon", p)),
                self.log_tail()
            )
        })
    }

    /// `sh -c cmd` that must succeed; returns its stdout.
    pub fn ok(&self, cmd: &str) -> String {
        let out = self.sh(cmd);
        assert!(
            out.status.success(),
            "`{cmd}` failed with {}:\nstdout: {}\nstderr: {}\ndaemon log:\n{}",
            out.status,
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr),
            self.log_tail()
        );
        String::from_utf8(out.stdout).expect("utf-8 stdout")
    }

    /// `sh -c cmd` that must fail with `errtext` on stderr; returns stderr.
    pub fn fails(&self, cmd: &str, errtext: &str) -> String {
        let out = self.sh(cmd);
        let err = String::from_utf8_lossy(&out.stderr).into_owned();
        assert!(
            !out.status.success(),
            "`{cmd}` should have failed; stdout: {}",
            String::from_utf8_lossy(&out.stdout)
        );
        assert!(
            err.contains(errtext),
            "`{cmd}` should fail with {errtext:?}, got: {err}"
        );
        err
    }

    /// The daemon's log so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(&self.log_path).unwrap_or_default()
    }

    fn log_tail(&self) -> String {
        let log = self.log();
        let lines: Vec<&str> = log.lines().collect();
        lines[lines.len().saturating_sub(30)..].join("\n")
    }

    /// A `key: value` line of a partition's `status`.
    pub fn status(&self, partition: &str, key: &str) -> i64 {
        status_value(&self.ok(&format!("cat {partition}/status")), key)
    }

    /// Kills the daemon with SIGKILL and clears the dead mount it leaves.
    pub fn kill9(&mut self) {
        let mut child = self.child.take().expect("daemon running");
        let _ = child.kill();
        let _ = child.wait();
        force_unmount(&self.mnt);
    }

    /// Sends `signal` and waits for the daemon to exit; returns its status.
    pub fn signal_and_wait(&mut self, signal: i32) -> ExitStatus {
        self.signal(signal);
        self.wait()
    }

    pub fn signal(&self, signal: i32) {
        let child = self.child.as_ref().expect("daemon running");
        // SAFETY: signalling our own child.
        unsafe { libc::kill(child.id() as i32, signal) };
    }

    /// Whether the daemon has exited (reaping it if so).
    pub fn exited(&mut self) -> bool {
        let child = self.child.as_mut().expect("daemon running");
        child.try_wait().expect("try_wait").is_some()
    }

    /// Waits (10 s at most) for the daemon to exit.
    pub fn wait(&mut self) -> ExitStatus {
        wait_exit(self.child.take().expect("daemon running"))
    }

    /// `umount` the mountpoint and wait for the daemon to exit 0.
    pub fn unmount_clean(&mut self) {
        if let Err(e) = umount(&self.mnt) {
            panic!("{e}\ndaemon log:\n{}", self.log_tail());
        }
        let child = self.child.take().expect("daemon running");
        let st = wait_exit(child);
        assert!(
            st.success(),
            "daemon exited with {st} after umount:\n{}",
            self.log_tail()
        );
        assert!(!mounted(&self.mnt));
    }

    pub fn remount(&mut self) {
        self.start();
    }
}

/// `umount mnt`, as a user would, but waiting out a transient "target is
/// busy": a descriptor this process had open on the mount can live on for a
/// moment in a child that another test thread forked before it was closed
/// (until that child's exec closes it). Any other failure, or a mount still
/// busy after 10 s, is an error.
pub fn umount(mnt: &Path) -> Result<(), String> {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let mut c = Command::new("umount");
        c.arg(mnt);
        let out = run_bounded(&mut c, "umount", sh_timeout(), String::new);
        let stderr = String::from_utf8_lossy(&out.stderr);
        if out.status.success() {
            return Ok(());
        }
        if !stderr.contains("busy") || Instant::now() > deadline {
            return Err(format!("umount {} failed: {stderr}", mnt.display()));
        }
        sleep(Duration::from_millis(20));
    }
}

/// How long one command of a test may run (see `bounded::cmd_timeout`).
pub fn sh_timeout() -> Duration {
    cmd_timeout()
}

fn wait_exit(mut child: Child) -> ExitStatus {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        if let Some(st) = child.try_wait().expect("try_wait") {
            return st;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let st = child.wait().expect("wait");
            panic!("the daemon did not exit within 10 s (killed: {st})");
        }
        sleep(Duration::from_millis(20));
    }
}

/// `umount FLAGS mnt` for a guard's clean-up, bounded, its failure only
/// returned: the guard goes on to `umount -l` and to killing the daemon.
pub fn quiet_umount(flags: &[&str], mnt: &Path) -> bool {
    let mut c = Command::new("umount");
    c.args(flags).arg(mnt);
    crate::kafka_support::bounded::try_run(&mut c, "umount", cmd_timeout())
        .is_ok_and(|o| o.status.success())
}

pub fn force_unmount(mnt: &Path) {
    for _ in 0..50 {
        if !mounted(mnt) {
            return;
        }
        if !quiet_umount(&[], mnt) {
            quiet_umount(&["-l"], mnt);
        }
        sleep(Duration::from_millis(20));
    }
}

/// The pid of the process holding `data`'s lock (a daemonised mount's
/// daemon), as it wrote it in `.lock`; `None` when nobody holds it.
pub fn lock_pid(data: &Path) -> Option<u32> {
    commitfs::storage::lock_holder(data)?
        .lines()
        .next()?
        .strip_prefix("pid ")?
        .trim()
        .parse()
        .ok()
}

/// Clean-up of a daemonised `commitfs mount` of `data` on `mnt`, for a
/// guard: a bounded `umount`, then a bounded wait for the daemon to let go
/// of `data`. A daemon that still holds it (the unmount failed, or it hung
/// on the way out) is killed by its pid, and the mount detached. Returns
/// whether the daemon went by itself.
pub fn stop_daemonised(data: &Path, mnt: &Path) -> bool {
    if mounted(mnt) {
        quiet_umount(&[], mnt);
    }
    let released = |within: Duration| {
        let deadline = Instant::now() + within;
        while commitfs::storage::is_locked(data) {
            if Instant::now() > deadline {
                return false;
            }
            sleep(Duration::from_millis(20));
        }
        true
    };
    let clean = released(Duration::from_secs(10));
    if !clean {
        if let Some(pid) = lock_pid(data) {
            eprintln!(
                "the daemon of {} (pid {pid}) did not exit after umount: killed",
                data.display()
            );
            // SAFETY: a signal to the process that holds the test's data dir.
            unsafe { libc::kill(pid as i32, libc::SIGKILL) };
        }
        released(Duration::from_secs(10));
    }
    force_unmount(mnt);
    clean
}

/// A tmpfs mounted for the test (for a small disk to fill), unmounted when
/// dropped.
pub struct Tmpfs(pub PathBuf);

impl Tmpfs {
    pub fn mount(dir: &Path, size: &str) -> Tmpfs {
        std::fs::create_dir_all(dir).unwrap();
        let out = run_bounded(
            Command::new("mount")
                .args(["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs"])
                .arg(dir),
            "mount -t tmpfs",
            cmd_timeout(),
            String::new,
        );
        assert!(out.status.success(), "mount -t tmpfs failed: {out:?}");
        Tmpfs(dir.to_path_buf())
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        force_unmount(&self.0);
    }
}

impl Drop for Mount {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            if mounted(&self.mnt) {
                quiet_umount(&[], &self.mnt);
            }
            let deadline = Instant::now() + Duration::from_secs(5);
            while Instant::now() < deadline && child.try_wait().ok().flatten().is_none() {
                sleep(Duration::from_millis(20));
            }
            let _ = child.kill();
            let _ = child.wait();
        }
        force_unmount(&self.mnt);
    }
}
