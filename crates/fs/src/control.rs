//! Control and config files: `roll`, `flush`, `compact`, `delete-records`,
//! `config/<name>`.

use log::info;

use super::error::{FsError, FsResult};
use super::node::{Control, config_value, parse_delete_records};
use commitfs_backend::{BackendResult, ErrorKind, LineFormat, LogControl, Partition};

/// A write to `roll`: the command runs whatever was written.
pub fn roll(part: &dyn Partition) -> FsResult<()> {
    command(part, Control::Roll, |log| log.roll())
}

/// A write to `flush`: the command runs whatever was written.
pub fn flush(part: &dyn Partition) -> FsResult<()> {
    command(part, Control::Flush, |log| log.flush())
}

/// A write to `compact`: a pass of the log cleaner over the partition now.
pub fn compact(part: &dyn Partition) -> FsResult<()> {
    let what = || format!("compact of {}", part.name());
    let cleaner = part.compaction().ok_or(FsError::quiet(libc::ENOENT))?;
    cleaner
        .compact()
        .map_err(|e| FsError::backend(what(), &e))?;
    info!("{} done on request", what());
    Ok(())
}

fn command(
    part: &dyn Partition,
    control: Control,
    run: impl FnOnce(&dyn LogControl) -> BackendResult<()>,
) -> FsResult<()> {
    let what = || format!("{} of {}", control.name(), part.name());
    // The node exists only where the backend offers the command.
    let log = part.log_control().ok_or(FsError::quiet(libc::ENOENT))?;
    run(log).map_err(|e| FsError::backend(what(), &e))?;
    info!("{} done on request", what());
    Ok(())
}

/// A write to `config/<name>`: validated, applied and kept by the backend.
pub fn set_config(part: &dyn Partition, name: &str, data: &[u8], path: &str) -> FsResult<()> {
    let value = config_value(name, data).map_err(|_| {
        FsError::refuse(
            libc::EINVAL,
            format!("write to {path}"),
            "the value is not UTF-8",
        )
    })?;
    let set = match LineFormat::is_setting(name) {
        true => part.set_line_format(name, value),
        false => part.set_config(name, value),
    };
    set.map_err(|e| FsError::backend(format!("write to {path}"), &e))?;
    info!("{}: set {name}={value}", part.name());
    Ok(())
}

/// A write to `delete-records`: Kafka's DeleteRecords on this partition.
pub fn delete_records(part: &dyn Partition, data: &[u8], path: &str) -> FsResult<()> {
    let what = || format!("write to {path}");
    let Some(mut offset) = parse_delete_records(data) else {
        return Err(FsError::refuse(
            libc::EINVAL,
            what(),
            format!(
                "{:?} is not an offset (write one canonical decimal offset, or -1 for the log end offset)",
                String::from_utf8_lossy(data).trim()
            ),
        ));
    };
    if offset == -1 {
        offset = part
            .offsets()
            .map_err(|e| FsError::backend(what(), &e))?
            .log_end;
    }
    match part.delete_records(offset) {
        Ok(start) => {
            info!(
                "{}: delete-records to {offset} done, log start offset is {start}",
                part.name()
            );
            Ok(())
        }
        Err(e) => match e.kind {
            ErrorKind::OffsetOutOfRange {
                log_start, log_end, ..
            } => Err(FsError::refuse(
                libc::EINVAL,
                what(),
                format!(
                    "offset {offset} is out of range: the log holds {log_start}..{log_end} \
                     and the log start offset can move up to the log end offset {log_end}"
                ),
            )),
            _ => Err(FsError::backend(what(), &e)),
        },
    }
}
