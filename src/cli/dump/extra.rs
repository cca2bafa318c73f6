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

/// How record keys and values are printed: one of the internal-topic
/// decoders, or the `--key-decoder-class`/`--value-decoder-class` pair.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Parser {
    Internal(InternalDecoder),
    Classes {
        key: ClassDecoder,
        value: ClassDecoder,
    },
}

/// The decoder classes Kafka ships (`org.apache.kafka.tools.api`, and
/// their deprecated `kafka.serializer` names).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ClassDecoder {
    /// `StringDecoder`, the default: the bytes as UTF-8.
    String,
    /// `DefaultDecoder`: the bytes themselves, which Kafka prints as Java
    /// prints an array (`[B@` and the array's identity hash, a number of
    /// no meaning); printed as `[B@` and the bytes' CRC-32C in hex.
    Default,
    /// `IntegerDecoder`: a big-endian int32.
    Integer,
    /// `LongDecoder`: a big-endian int64.
    Long,
}

/// The class names `--key-decoder-class`/`--value-decoder-class` take.
pub const DECODER_CLASSES: &[&str] = &[
    "org.apache.kafka.tools.api.StringDecoder",
    "org.apache.kafka.tools.api.DefaultDecoder",
    "org.apache.kafka.tools.api.IntegerDecoder",
    "org.apache.kafka.tools.api.LongDecoder",
    "kafka.serializer.StringDecoder",
    "kafka.serializer.DefaultDecoder",
    "kafka.serializer.IntegerDecoder",
    "kafka.serializer.LongDecoder",
];

impl ClassDecoder {
    pub fn from_class(name: &str) -> Option<ClassDecoder> {
        let simple = name
            .strip_prefix("org.apache.kafka.tools.api.")
            .or_else(|| name.strip_prefix("kafka.serializer."))?;
        Some(match simple {
            "StringDecoder" => ClassDecoder::String,
            "DefaultDecoder" => ClassDecoder::Default,
            "IntegerDecoder" => ClassDecoder::Integer,
            "LongDecoder" => ClassDecoder::Long,
            _ => return None,
        })
    }

    /// The decoded text, or the exception Kafka's decoder throws.
    fn decode(self, b: &[u8]) -> Result<String, String> {
        let underflow = || "java.nio.BufferUnderflowException".to_string();
        Ok(match self {
            ClassDecoder::String => String::from_utf8_lossy(b).into_owned(),
            ClassDecoder::Default => format!("[B@{:x}", crc32c::crc32c(b)),
            ClassDecoder::Integer => i32::from_be_bytes(
                b.get(..4)
                    .ok_or_else(underflow)?
                    .try_into()
                    .expect("4 bytes"),
            )
            .to_string(),
            ClassDecoder::Long => i64::from_be_bytes(
                b.get(..8)
                    .ok_or_else(underflow)?
                    .try_into()
                    .expect("8 bytes"),
            )
            .to_string(),
        })
    }
}

/// Prints what `--print-data-log` adds to a record's line: ` key: K payload: P`.
/// `prefix` is `"| "` when the record's metadata was skipped, else `" "`;
/// Kafka 4.1 always writes the payload with a single space before it.
/// Err(message) when Kafka's parser would have stopped the dump (a
/// coordinator record without a key, a number decoder given too few
/// bytes): the line is left without contents.
pub fn write_contents<W: Write>(
    out: &mut W,
    parser: Parser,
    r: &Record,
    prefix: &str,
) -> io::Result<Result<(), String>> {
    let decoded = match parser {
        Parser::Classes { key, value } => r
            .key
            .as_deref()
            .map(|k| key.decode(k))
            .transpose()
            .and_then(|k| Ok((k, r.value.as_deref().map(|v| value.decode(v)).transpose()?))),
        Parser::Internal(d) => d
            .parse(r.offset, r.key.as_deref(), r.value.as_deref())
            .map(|p| (p.key, p.payload))
            .map_err(|e| e.to_string()),
    };
    let (key, payload) = match decoded {
        Ok(kp) => kp,
        Err(e) => return Ok(Err(e)),
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
