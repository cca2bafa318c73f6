//! The parts of kafka-dump-log (Kafka 4.1's `DumpLogSegments`) beyond
//! segments and indexes: the record decoders of the internal topics, KRaft
//! snapshot headers, `--index-sanity-check`, producer snapshots and
//! transaction indexes. The decoding itself is in `commitfs::record`; this
//! only selects and prints.

use std::io::{self, Write};
use std::path::Path;

use commitfs::record::Record;
use commitfs::record::internal::InternalDecoder;
use commitfs::record::state_files::{read_producer_snapshot, read_txn_index};
use commitfs::storage::index::{OFFSET_ENTRY, OffsetPosition, TIME_ENTRY, TimestampOffset};

/// Prints what `--print-data-log` adds to a record's line: ` key: K payload: P`.
/// `prefix` is `"| "` when the record's metadata was skipped, else `" "`;
/// Kafka 4.1 always writes the payload with a single space before it.
/// Err(message) when Kafka's parser would have stopped the dump (a
/// coordinator record without a key): the line is left without contents.
pub fn write_contents<W: Write>(
    out: &mut W,
    parser: Option<InternalDecoder>,
    r: &Record,
    prefix: &str,
) -> io::Result<Result<(), String>> {
    let (key, payload) = match parser {
        // Kafka's default StringDecoder: the bytes as UTF-8.
        None => (
            r.key
                .as_deref()
                .map(|k| String::from_utf8_lossy(k).into_owned()),
            r.value
                .as_deref()
                .map(|v| String::from_utf8_lossy(v).into_owned()),
        ),
        Some(d) => match d.parse(r.offset, r.key.as_deref(), r.value.as_deref()) {
            Ok(p) => (p.key, p.payload),
            Err(e) => return Ok(Err(e.to_string())),
        },
    };
    if let Some(key) = key {
        write!(out, "{prefix}key: {key}")?;
    }
    if let Some(payload) = payload {
        write!(out, " payload: {payload}")?;
    }
    Ok(Ok(()))
}

/// The line kafka-dump-log prints before the batches of a KRaft snapshot
/// (`<end offset>-<epoch>.checkpoint`) or of the bootstrap snapshot; Err
/// when the name is neither.
pub fn snapshot_header(name: &str) -> Result<String, String> {
    if name == "bootstrap.checkpoint" {
        return Ok("KRaft bootstrap snapshot".into());
    }
    let parsed = name
        .strip_suffix(".checkpoint")
        .and_then(|stem| stem.split_once('-'))
        .filter(|(o, e)| o.len() == 20 && e.len() == 10)
        .and_then(|(o, e)| Some((o.parse::<i64>().ok()?, e.parse::<i32>().ok()?)));
    match parsed {
        Some((offset, epoch)) => Ok(format!("Snapshot end offset: {offset}, epoch: {epoch}")),
        None => Err(format!("{name} is not a KRaft snapshot file name")),
    }
}

/// `--index-sanity-check` for an offset index (`OffsetIndex.sanityCheck`):
/// the line to print, or Kafka's `CorruptIndexException` message.
pub fn offset_index_sanity(path: &Path, bytes: &[u8], base: i64) -> Result<String, String> {
    let abs = absolute(path);
    let entries = bytes.len() / OFFSET_ENTRY;
    if entries > 0 {
        let e = &bytes[(entries - 1) * OFFSET_ENTRY..entries * OFFSET_ENTRY];
        let last = OffsetPosition::decode_as_kafka(base, e).offset;
        if last < base {
            return Err(format!(
                "Corrupt index found, index file {abs} has non-zero size but the last offset is {last} which is less than the base offset {base}"
            ));
        }
    }
    if !bytes.len().is_multiple_of(8) {
        return Err(format!(
            "Index file {abs} is corrupt, found {} bytes which is neither positive nor a multiple of 8",
            bytes.len()
        ));
    }
    Ok(format!("{} passed sanity check.", path.display()))
}

/// `--index-sanity-check` for a time index (`TimeIndex.sanityCheck`).
pub fn time_index_sanity(path: &Path, bytes: &[u8], base: i64) -> Result<String, String> {
    let abs = absolute(path);
    let entries = bytes.len() / TIME_ENTRY;
    let entry = |i: usize| {
        let e =
            TimestampOffset::decode_as_kafka(base, &bytes[i * TIME_ENTRY..(i + 1) * TIME_ENTRY]);
        (e.timestamp, e.offset)
    };
    if entries > 0 {
        let (last_ts, last_offset) = entry(entries - 1);
        let (first_ts, _) = entry(0);
        if last_ts < first_ts {
            return Err(format!(
                "Corrupt time index found, time index file ({abs}) has non-zero size but the last timestamp is {last_ts} which is less than the first timestamp {first_ts}"
            ));
        }
        if last_offset < base {
            return Err(format!(
                "Corrupt time index found, time index file ({abs}) has non-zero size but the last offset is {last_offset} which is less than the first offset {base}"
            ));
        }
    }
    if !bytes.len().is_multiple_of(12) {
        return Err(format!(
            "Time index file {abs} is corrupt, found {} bytes which is neither positive nor a multiple of 12",
            bytes.len()
        ));
    }
    Ok(format!("{} passed sanity check.", path.display()))
}

/// A producer snapshot's lines; a corrupt snapshot's message goes to stderr,
/// as Kafka prints it.
pub fn dump_producer_snapshot<W: Write>(out: &mut W, bytes: &[u8]) -> io::Result<()> {
    match read_producer_snapshot(bytes) {
        Ok(entries) => {
            for e in entries {
                writeln!(out, "{}", e.dump_line())?;
            }
        }
        Err(e) => {
            out.flush()?;
            eprintln!("{e}");
        }
    }
    Ok(())
}

/// A transaction index's lines. Err(message) when Kafka would have stopped
/// at an entry of an unknown version (after printing the ones before).
pub fn dump_txn_index<W: Write>(
    out: &mut W,
    path: &Path,
    bytes: &[u8],
) -> io::Result<Result<(), String>> {
    let (entries, err) = read_txn_index(bytes, &absolute(path));
    for e in entries {
        writeln!(out, "{}", e.dump_line())?;
    }
    Ok(err.map_or(Ok(()), Err))
}

fn absolute(path: &Path) -> String {
    std::path::absolute(path)
        .unwrap_or_else(|_| path.to_path_buf())
        .display()
        .to_string()
}
