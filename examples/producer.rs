//! Appends records through a commitfs mount with nothing but `std::fs`.
//!
//! ```text
//! cargo run --example producer -- MNT/orders-0 [COUNT]   # COUNT generated records
//! some-command | cargo run --example producer -- MNT/orders-0   # one record per stdin line
//! ```
//!
//! Each `write(2)` of whole lines becomes one batch, so the producer buffers
//! lines and writes them in chunks; records never split across writes because
//! the mount holds a cut line until its newline arrives.

use std::fs::OpenOptions;
use std::io::{self, BufRead, BufWriter, Write};
use std::path::PathBuf;

/// One write per this many bytes: one request, hence one append, each.
const CHUNK: usize = 256 * 1024;

fn main() -> io::Result<()> {
    let mut args = std::env::args().skip(1);
    let Some(partition) = args.next().map(PathBuf::from) else {
        eprintln!("usage: producer MNT/<topic>-<partition> [COUNT]");
        std::process::exit(2);
    };
    let count: Option<u64> = args
        .next()
        .map(|c| c.parse().expect("COUNT must be a number"));

    if !partition.is_dir() {
        // mkdir on the mount creates the partition.
        std::fs::create_dir(&partition)?;
    }
    let log = OpenOptions::new()
        .append(true)
        .open(partition.join("log"))?;
    let mut out = BufWriter::with_capacity(CHUNK, log);
    let mut n = 0u64;
    match count {
        Some(count) => {
            for i in 0..count {
                writeln!(out, "record {i}")?;
                n += 1;
            }
        }
        None => {
            for line in io::stdin().lock().lines() {
                writeln!(out, "{}", line?)?;
                n += 1;
            }
        }
    }
    // Every write has landed in the segment file once flush returns; sync_all
    // makes them durable too (fsync on `log` flushes the partition).
    let log = out.into_inner().map_err(|e| e.into_error())?;
    log.sync_all()?;
    let status = std::fs::read_to_string(partition.join("status"))?;
    let leo = status
        .lines()
        .find_map(|l| l.strip_prefix("log_end_offset: "))
        .unwrap_or("?");
    eprintln!("appended {n} records; log end offset is now {leo}");
    Ok(())
}
