//! `commitfs mount --bootstrap-server HOST:PORT MNT`: the tree over a Kafka
//! cluster. It daemonises and returns once live, as a local mount does;
//! `umount` and SIGTERM send or fail every produce in flight before exit.

use std::ffi::OsString;
use std::path::PathBuf;
use std::sync::Arc;

use commitfs::cluster::{ClusterBackend, ClusterOptions};
use log::{error, info};

use super::daemon::{self, Ready};
use super::options::tokens;
use super::session::{
    FuseOptions, MountArgs, SessionSpec, mount_session, session_end, wait_for_unmount,
};
use super::signals::Signals;

/// The `-o` options: FUSE's and mount(8)'s, then the cluster's (commitfs's
/// own or a client property).
fn parse(bootstrap: &str, raw: &[String]) -> Result<(FuseOptions, ClusterOptions), String> {
    let mut fuse = FuseOptions::default();
    let mut cluster = ClusterOptions::new(bootstrap);
    for tok in tokens(raw) {
        if fuse.take(tok) {
            continue;
        }
        match tok.split_once('=') {
            Some((k, v)) => cluster.set(k, v)?,
            None => return Err(format!("unknown mount option {tok:?}")),
        }
    }
    cluster.read_only = fuse.read_only;
    Ok((fuse, cluster))
}

pub fn run(args: &MountArgs, bootstrap: &str) -> i32 {
    let (fuse, cluster) = match parse(bootstrap, &args.options) {
        Ok(o) => o,
        Err(e) => {
            eprintln!("commitfs: {e}");
            return 2;
        }
    };
    if !args.foreground {
        return daemonize(args, bootstrap);
    }
    super::logging::init(None);
    let mut ready = Ready::from_fd(args.ready_fd);
    match serve(args, fuse, cluster, &mut ready) {
        Ok(()) => 0,
        Err(e) => {
            error!("{e}");
            ready.failed(&e);
            1
        }
    }
}

fn daemonize(args: &MountArgs, bootstrap: &str) -> i32 {
    let prepare = || -> std::io::Result<(PathBuf, PathBuf, std::fs::File)> {
        std::fs::create_dir_all(&args.data_dir)?;
        let mnt = args.data_dir.canonicalize()?;
        // It has no data directory: the log goes to the temp dir.
        let log_path = daemon::temp_log_path("commitfs-cluster", &mnt);
        let log = daemon::open_log(&log_path)?;
        Ok((mnt, log_path, log))
    };
    let (mnt, log_path, log) = match prepare() {
        Ok(x) => x,
        Err(e) => {
            eprintln!("commitfs: {e}");
            return 1;
        }
    };
    let mut cmd: Vec<OsString> = ["mount", "--foreground", "--bootstrap-server", bootstrap]
        .map(OsString::from)
        .into();
    cmd.push("--threads".into());
    cmd.push(args.threads.to_string().into());
    for o in &args.options {
        cmd.push("-o".into());
        cmd.push(o.into());
    }
    cmd.push(mnt.into());
    daemon::spawn(&cmd, log, &log_path)
}

fn serve(
    args: &MountArgs,
    fuse: FuseOptions,
    cluster: ClusterOptions,
    ready: &mut Ready,
) -> Result<(), String> {
    // Before any client thread exists, so that every thread inherits the mask.
    let signals = Signals::block();
    std::fs::create_dir_all(&args.data_dir)
        .map_err(|e| format!("cannot create {}: {e}", args.data_dir.display()))?;
    let mnt = args
        .data_dir
        .canonicalize()
        .map_err(|e| format!("{}: {e}", args.data_dir.display()))?;
    let bootstrap = cluster.bootstrap.clone();
    let backend = Arc::new(ClusterBackend::new(cluster).map_err(|e| e.to_string())?);
    let topics = backend
        .check()
        .map_err(|e| format!("cannot reach the cluster at {bootstrap}: {e}"))?;
    let spec = SessionSpec {
        threads: args.threads,
        options: fuse.mount_options(&format!("kafka:{bootstrap}")),
        acl: fuse.acl,
    };
    let (unmounter, session) = mount_session(&spec, backend.clone(), &mnt)?;
    info!(
        "Mounted the cluster at {bootstrap} ({topics} topics) on {}{}",
        mnt.display(),
        if fuse.read_only { " read-only" } else { "" }
    );
    ready.live();
    let forced = wait_for_unmount(&signals, unmounter, &mnt);
    let result = if forced { Ok(()) } else { session_end(session) };
    info!(
        "Unmounted {}; settling the produces in flight",
        mnt.display()
    );
    backend.close();
    info!(
        "Shutdown of the cluster mount on {} complete",
        mnt.display()
    );
    if forced {
        std::process::exit(0);
    }
    result
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn options_split_between_fuse_and_the_cluster() {
        let raw = vec![
            "ro,allow_other,nofail".to_string(),
            "cache.bytes=1000,client.id=me".to_string(),
        ];
        let (fuse, cluster) = parse("h:9092", &raw).unwrap();
        assert!(fuse.read_only && cluster.read_only);
        assert_eq!(cluster.cache_bytes, 1000);
        assert_eq!(
            cluster.client,
            [("client.id".to_string(), "me".to_string())]
        );
        assert!(parse("h:9092", &["bogus".to_string()]).is_err());
        assert!(parse("h:9092", &["acks=1".to_string()]).is_err());
    }
}
