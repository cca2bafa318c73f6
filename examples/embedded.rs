//! The storage library without FUSE: create a partition, append, read back by
//! offset and by timestamp, roll, and close cleanly.
//!
//! `cargo run --example embedded -- /tmp/commitfs-demo`

use std::path::PathBuf;

use commitfs::record::NewRecord;
use commitfs::storage::{LogConfig, LogManager, OpenOptions};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let dir = std::env::args()
        .nth(1)
        .map(PathBuf::from)
        .unwrap_or_else(|| std::env::temp_dir().join("commitfs-embedded"));
    let mut config = LogConfig::default();
    config.set("segment.bytes", "1048576")?;
    let mgr = LogManager::open(&dir, config, OpenOptions::default())?;
    let log = match mgr.partition("orders-0") {
        Some(log) => log,
        None => mgr.create_partition("orders-0")?,
    };

    let before = log.log_end_offset();
    let lines: Vec<String> = (0..1000).map(|i| format!("order {i}")).collect();
    for chunk in lines.chunks(100) {
        let records: Vec<NewRecord> = chunk
            .iter()
            .map(|l| NewRecord::value(l.as_bytes()))
            .collect();
        let info = log.append(&records)?;
        println!(
            "appended offsets {}..={} in {} batch(es)",
            info.first_offset, info.last_offset, info.batches
        );
    }
    let keyed = log.append(&[NewRecord::keyed(b"customer-7", b"refund")])?;
    println!("keyed record at offset {}", keyed.first_offset);

    let record = log.read(before + 42)?;
    println!(
        "offset {} = {:?} (timestamp {})",
        record.offset,
        String::from_utf8_lossy(record.value.as_deref().unwrap_or_default()),
        record.timestamp
    );
    if let Some(o) = log.offset_for_timestamp(record.timestamp)? {
        println!("first offset at or after that timestamp: {o}");
    }
    log.roll()?;
    log.flush()?;
    let status = log.status()?;
    println!(
        "log start {} end {} recovery point {} segments {} size {} bytes",
        status.log_start_offset,
        status.log_end_offset,
        status.recovery_point,
        status.segments,
        status.size_bytes
    );
    drop(log);
    mgr.close()?;
    println!("closed cleanly; data in {}", dir.display());
    Ok(())
}
