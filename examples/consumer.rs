//! Reads records from a commitfs mount, from an offset onward, and waits for
//! new ones, with nothing but `std::fs`.
//!
//! ```text
//! cargo run --example consumer -- MNT/orders-0 [FROM] [--no-follow]
//! ```
//!
//! `offset/N` holds record N's value. A missing `offset/N` is either past the
//! end (wait and retry) or below the log start after retention (skip ahead):
//! `status` tells which.

use std::io::{self, ErrorKind, Write};
use std::path::Path;
use std::time::Duration;

const POLL: Duration = Duration::from_millis(200);

fn status(partition: &Path, key: &str) -> io::Result<i64> {
    let text = std::fs::read_to_string(partition.join("status"))?;
    text.lines()
        .find_map(|l| l.strip_prefix(key)?.strip_prefix(": "))
        .and_then(|v| v.trim().parse().ok())
        .ok_or_else(|| io::Error::new(ErrorKind::InvalidData, format!("no {key} in status")))
}

fn main() -> io::Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let follow = !args.iter().any(|a| a == "--no-follow");
    let mut pos = args.iter().filter(|a| !a.starts_with("--"));
    let Some(partition) = pos.next().map(Path::new) else {
        eprintln!("usage: consumer MNT/<topic>-<partition> [FROM] [--no-follow]");
        std::process::exit(2);
    };
    let mut next: i64 = match pos.next() {
        Some(f) => f.parse().expect("FROM must be an offset"),
        None => status(partition, "log_start_offset")?,
    };
    let stdout = io::stdout();
    loop {
        match std::fs::read(partition.join("offset").join(next.to_string())) {
            Ok(value) => {
                let mut out = stdout.lock();
                write!(out, "{next}\t")?;
                out.write_all(&value)?;
                writeln!(out)?;
                next += 1;
            }
            Err(e) if e.kind() == ErrorKind::NotFound => {
                let start = status(partition, "log_start_offset")?;
                let end = status(partition, "log_end_offset")?;
                if next < start {
                    eprintln!("offset {next} was deleted by retention; skipping to {start}");
                    next = start;
                } else if next < end {
                    // A gap (e.g. a control record): nothing to show there.
                    next += 1;
                } else if follow {
                    stdout.lock().flush()?;
                    std::thread::sleep(POLL);
                } else {
                    return Ok(());
                }
            }
            Err(e) => return Err(e),
        }
    }
}
