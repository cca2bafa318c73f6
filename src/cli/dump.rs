//! `commitfs dump`: kafka-dump-log (Kafka's `DumpLogSegments`) for `.log`,
//! `.index`, `.timeindex`, `.snapshot`, `.txnindex` and KRaft `.checkpoint`
//! files, with the same output so the two can be diffed.
//!
//! An inspection tool: it reads whatever bytes it is given, never panics on
//! them, and reports what it cannot decode instead of stopping.

use std::io::{self, BufWriter, Write};
use std::path::{Path, PathBuf};

use clap::Args;
use commitfs::record::internal::InternalDecoder;
use commitfs::record::{Batch, BatchHeader, Record, control};
use commitfs::storage::index::{
    OFFSET_ENTRY, OffsetPosition, TimestampOffset, offset_entries, time_entries,
};

mod extra;
mod legacy;
mod walk;

use extra::Parser;
use walk::{
    Entry, SiblingLog, Walk, ascending, base_offset_of, file_name, find_by_last_offset, read,
};

#[derive(Args, Debug)]
pub struct DumpArgs {
    /// Decode every record, not only batch headers.
    #[arg(long)]
    pub deep_iteration: bool,
    /// Print record keys and payloads (implies --deep-iteration).
    #[arg(long)]
    pub print_data_log: bool,
    /// For index files, print only the mismatches against the log, not the entries.
    #[arg(long)]
    pub verify_index_only: bool,
    /// For index files, only run the check Kafka runs on start-up to decide whether to rebuild them.
    #[arg(long)]
    pub index_sanity_check: bool,
    /// Decode records as __consumer_offsets records (implies --print-data-log).
    #[arg(long)]
    pub offsets_decoder: bool,
    /// Decode records as __transaction_state records (implies --print-data-log).
    #[arg(long)]
    pub transaction_log_decoder: bool,
    /// Decode records as KRaft __cluster_metadata records (implies --print-data-log).
    #[arg(long)]
    pub cluster_metadata_decoder: bool,
    /// Decode records as __remote_log_metadata records of Kafka's topic-based
    /// remote log metadata manager (implies --print-data-log).
    #[arg(long)]
    pub remote_log_metadata_decoder: bool,
    /// Decode records as __share_group_state records (implies --print-data-log).
    #[arg(long)]
    pub share_group_state_decoder: bool,
    /// Do not print each record's metadata (nor control records).
    #[arg(long)]
    pub skip_record_metadata: bool,
    /// Read at most this many bytes of each .log file: whole batches only.
    #[arg(long, value_name = "SIZE")]
    pub max_bytes: Option<u32>,
    /// Size of the largest batch an .index entry may point at (Kafka's
    /// default, 5 MiB): a larger one stops the index's dump, as it stops Kafka's.
    #[arg(long, value_name = "SIZE", default_value_t = 5 * 1024 * 1024)]
    pub max_message_size: u32,
    /// Decode record keys with this class (implies --print-data-log):
    /// org.apache.kafka.tools.api.StringDecoder (the default),
    /// DefaultDecoder, IntegerDecoder or LongDecoder, or their
    /// kafka.serializer names.
    #[arg(long, value_name = "CLASS", num_args = 0..=1,
          default_missing_value = "org.apache.kafka.tools.api.StringDecoder")]
    pub key_decoder_class: Option<String>,
    /// Decode record values with this class (implies --print-data-log);
    /// the same classes as --key-decoder-class.
    #[arg(long, value_name = "CLASS", num_args = 0..=1,
          default_missing_value = "org.apache.kafka.tools.api.StringDecoder")]
    pub value_decoder_class: Option<String>,
    /// Files to dump, comma-separated (kafka-dump-log's spelling).
    #[arg(long = "files", value_delimiter = ',', value_name = "FILES")]
    pub files_opt: Vec<PathBuf>,
    /// .log, .index, .timeindex, .snapshot (producer state), .txnindex or KRaft .checkpoint files.
    #[arg(value_name = "FILE", required_unless_present = "files_opt")]
    pub files: Vec<PathBuf>,
}

pub fn run(args: DumpArgs) -> i32 {
    let stdout = io::stdout();
    let class = |name: &Option<String>| {
        let name = name
            .as_deref()
            .unwrap_or("org.apache.kafka.tools.api.StringDecoder");
        extra::ClassDecoder::from_class(name).ok_or_else(|| {
            format!(
                "commitfs dump: no decoder class {name}: it takes one of {}",
                extra::DECODER_CLASSES.join(", ")
            )
        })
    };
    // Kafka checks the decoders in this order.
    let parser = if args.offsets_decoder {
        Parser::Internal(InternalDecoder::Offsets)
    } else if args.transaction_log_decoder {
        Parser::Internal(InternalDecoder::TransactionLog)
    } else if args.cluster_metadata_decoder {
        Parser::Internal(InternalDecoder::ClusterMetadata)
    } else if args.remote_log_metadata_decoder {
        Parser::Internal(InternalDecoder::RemoteLogMetadata)
    } else if args.share_group_state_decoder {
        Parser::Internal(InternalDecoder::ShareGroupState)
    } else {
        match (
            class(&args.key_decoder_class),
            class(&args.value_decoder_class),
        ) {
            (Ok(key), Ok(value)) => Parser::Classes { key, value },
            (Err(e), _) | (_, Err(e)) => {
                eprintln!("{e}");
                return 2;
            }
        }
    };
    let print_data = args.print_data_log
        || args.offsets_decoder
        || args.transaction_log_decoder
        || args.cluster_metadata_decoder
        || args.remote_log_metadata_decoder
        || args.share_group_state_decoder
        || args.key_decoder_class.is_some()
        || args.value_decoder_class.is_some();
    let mut dump = Dump {
        deep: args.deep_iteration || print_data,
        print_data,
        verify_only: args.verify_index_only,
        sanity_only: args.index_sanity_check,
        parser,
        skip_metadata: args.skip_record_metadata,
        // Kafka's default, Integer.MAX_VALUE, is "no limit".
        max_bytes: args
            .max_bytes
            .filter(|&m| m != i32::MAX as u32)
            .map(|m| m as usize),
        max_message_size: args.max_message_size as usize,
        out: BufWriter::new(stdout.lock()),
        reports: Reports::default(),
        unreadable: false,
    };
    let files: Vec<PathBuf> = args.files_opt.into_iter().chain(args.files).collect();
    let result = files
        .iter()
        .try_for_each(|f| dump.file(f))
        .and_then(|()| dump.finish());
    match result {
        Ok(()) if dump.unreadable => 1,
        Ok(()) => 0,
        // `dump ... | head` is a normal way to use it.
        Err(e) if e.kind() == io::ErrorKind::BrokenPipe => 0,
        Err(e) => {
            eprintln!("commitfs dump: {e}");
            1
        }
    }
}

/// Problems found while dumping, printed to stderr after every file as Kafka does.
#[derive(Default)]
struct Reports {
    /// (file, [(index offset, log offset)])
    index_mismatches: Vec<(String, Vec<(i64, i64)>)>,
    /// (file, [(index timestamp, log timestamp)])
    time_mismatches: Vec<(String, Vec<(i64, i64)>)>,
    /// (file, [(index timestamp, previous index timestamp)])
    time_out_of_order: Vec<(String, Vec<(i64, i64)>)>,
    /// (file, [(indexed offset, offset found in the log)])
    time_offset_not_found: Vec<(String, Vec<(i64, i64)>)>,
    /// (file, [(offset, next offset)])
    non_consecutive: Vec<(String, Vec<(i64, i64)>)>,
}

impl Reports {
    /// Records `offset` as the next record's, reporting it (as
    /// kafka-dump-log does) unless it follows the one before.
    fn next_offset(&mut self, path: &Path, last_offset: &mut Option<i64>, offset: i64) {
        if let Some(last) = *last_offset
            && offset != last.wrapping_add(1)
        {
            push_report(&mut self.non_consecutive, path, (last, offset));
        }
        *last_offset = Some(offset);
    }
}

fn push_report(list: &mut Vec<(String, Vec<(i64, i64)>)>, file: &Path, pair: (i64, i64)) {
    let name = absolute(file);
    match list.last_mut() {
        Some((f, pairs)) if *f == name => pairs.push(pair),
        _ => list.push((name, vec![pair])),
    }
}

fn absolute(path: &Path) -> String {
    std::path::absolute(path)
        .unwrap_or_else(|_| path.to_path_buf())
        .display()
        .to_string()
}

struct Dump<W: Write> {
    deep: bool,
    print_data: bool,
    verify_only: bool,
    sanity_only: bool,
    parser: Parser,
    skip_metadata: bool,
    max_bytes: Option<usize>,
    max_message_size: usize,
    out: W,
    reports: Reports,
    unreadable: bool,
}

impl<W: Write> Dump<W> {
    fn file(&mut self, path: &Path) -> io::Result<()> {
        writeln!(self.out, "Dumping {}", path.display())?;
        let name = file_name(path);
        let suffix = name.rfind('.').map(|i| &name[i..]).unwrap_or("");
        let result = match suffix {
            ".log" | ".checkpoint" => self.log(path),
            ".index" => self.index(path),
            ".timeindex" => self.time_index(path),
            ".snapshot" => self.producer_snapshot(path),
            ".txnindex" => self.txn_index(path),
            _ => {
                self.out.flush()?;
                eprintln!("Ignoring unknown file {}", path.display());
                Ok(())
            }
        };
        match result {
            Err(DumpError::Read(e)) => {
                self.unreadable = true;
                self.out.flush()?;
                eprintln!("Could not read {}: {e}", path.display());
                Ok(())
            }
            Err(DumpError::Write(e)) => Err(e),
            Ok(()) => Ok(()),
        }
    }

    fn log(&mut self, path: &Path) -> Result<(), DumpError> {
        let name = file_name(path);
        if name.ends_with(".checkpoint") {
            let header =
                extra::snapshot_header(&name).map_err(|e| DumpError::Read(io::Error::other(e)))?;
            writeln!(self.out, "{header}")?;
        } else {
            writeln!(self.out, "Log starting offset: {}", base_offset_of(path))?;
        }
        let contents = read(path).map_err(DumpError::Read)?;
        // --max-bytes: only the batches wholly inside the first max bytes.
        let bytes = &contents[..self
            .max_bytes
            .map_or(contents.len(), |m| m.min(contents.len()))];
        let mut walk = Walk::new(bytes);
        // Kafka tracks this across the whole file, starting from "none yet".
        let mut last_offset: Option<i64> = None;
        for entry in walk.by_ref() {
            match entry {
                Entry::Batch { position, batch } => {
                    self.batch_line(position, &batch)?;
                    if self.deep {
                        self.records(path, &batch, &mut last_offset)?;
                    }
                }
                Entry::UnknownCodec {
                    position,
                    codec,
                    header,
                    size,
                    crc_valid,
                } => {
                    // Kafka's `CompressionType.forId` refuses the id: named
                    // here, and the walk goes on past the batch.
                    let name = codec_name(Err(codec));
                    self.header_line(position, &header, size, &name, crc_valid)?;
                    if self.deep {
                        writeln!(
                            self.out,
                            "| records could not be decoded: unknown compression codec id {codec}"
                        )?;
                        last_offset = Some(header.last_offset());
                    }
                }
                Entry::Legacy {
                    position, bytes, ..
                } => {
                    self.legacy(path, bytes, position, &mut last_offset)?;
                }
            }
        }
        let trailing = bytes.len() - walk.valid_bytes;
        if trailing > 0 && self.max_bytes.is_none() {
            writeln!(
                self.out,
                "Found {trailing} invalid bytes at the end of {}",
                file_name(path)
            )?;
        }
        Ok(())
    }

    /// A magic 0 or 1 entry, as Kafka prints a legacy batch and, with deep
    /// iteration, its messages (`AbstractLegacyRecordBatch`).
    fn legacy(
        &mut self,
        path: &Path,
        entry: &[u8],
        position: usize,
        last_offset: &mut Option<i64>,
    ) -> io::Result<()> {
        let m = match legacy::parse(entry) {
            Ok(m) => m,
            Err(e) => {
                writeln!(
                    self.out,
                    "position: {position} legacy entry could not be read: {e}"
                )?;
                return Ok(());
            }
        };
        writeln!(
            self.out,
            "offset: {} position: {position} {}: {} size: {} magic: {} compresscodec: {} crc: {} isvalid: {}",
            m.offset,
            m.timestamp_type(),
            m.timestamp,
            m.size,
            m.magic,
            codec_name(m.codec()),
            m.crc,
            m.valid
        )?;
        if !self.deep {
            return Ok(());
        }
        let records = match legacy::records(&m) {
            Ok(records) => records,
            Err(e) => {
                writeln!(self.out, "| records could not be decoded: {e}")?;
                *last_offset = Some(m.offset);
                return Ok(());
            }
        };
        for r in &records {
            self.reports.next_offset(path, last_offset, r.offset);
            let mut prefix = "| ";
            if !self.skip_metadata {
                // A legacy record is its own batch: its CRC and whether it holds.
                write!(
                    self.out,
                    "| offset: {} {}: {} keySize: {} valueSize: {} isValid: {} crc: {}",
                    r.offset,
                    m.timestamp_type(),
                    r.timestamp,
                    r.key_size(),
                    r.value_size(),
                    r.valid,
                    r.crc
                )?;
                prefix = " ";
            }
            if self.print_data {
                let record = Record {
                    offset: r.offset,
                    timestamp: r.timestamp,
                    attributes: r.attributes,
                    key: r.key.clone(),
                    value: r.value.clone(),
                    headers: Vec::new(),
                    sequence: -1,
                    size_in_bytes: r.size,
                };
                if let Err(e) = extra::write_contents(&mut self.out, self.parser, &record, prefix)?
                {
                    self.out.flush()?;
                    eprintln!("{e}");
                    self.unreadable = true;
                }
            }
            writeln!(self.out)?;
        }
        Ok(())
    }

    fn batch_line(&mut self, position: usize, batch: &Batch) -> io::Result<()> {
        let h = &batch.header;
        let codec = h.compression().name();
        self.header_line(position, h, batch.size(), codec, batch.is_valid())
    }

    fn header_line(
        &mut self,
        position: usize,
        h: &BatchHeader,
        size: usize,
        codec: &str,
        valid: bool,
    ) -> io::Result<()> {
        let delete_horizon = if h.has_delete_horizon() {
            format!("OptionalLong[{}]", h.base_timestamp)
        } else {
            "OptionalLong.empty".to_string()
        };
        writeln!(
            self.out,
            "baseOffset: {} lastOffset: {} count: {} baseSequence: {} lastSequence: {} \
             producerId: {} producerEpoch: {} partitionLeaderEpoch: {} isTransactional: {} \
             isControl: {} deleteHorizonMs: {} position: {} {}: {} size: {} magic: {} \
             compresscodec: {} crc: {} isvalid: {}",
            h.base_offset,
            h.last_offset(),
            h.record_count,
            h.base_sequence,
            h.last_sequence(),
            h.producer_id,
            h.producer_epoch,
            h.partition_leader_epoch,
            h.is_transactional(),
            h.is_control(),
            delete_horizon,
            position,
            h.timestamp_type().name(),
            h.max_timestamp,
            size,
            h.magic,
            codec,
            h.crc,
            valid,
        )
    }

    fn records(
        &mut self,
        path: &Path,
        batch: &Batch,
        last_offset: &mut Option<i64>,
    ) -> io::Result<()> {
        let records = match batch.records_as_kafka_reads() {
            Ok(records) => records,
            Err(e) => {
                writeln!(self.out, "| records could not be decoded: {e}")?;
                // Carry on as if they had been, so the next batch is not reported as a gap.
                *last_offset = Some(batch.header.last_offset());
                return Ok(());
            }
        };
        let ts_name = batch.header.timestamp_type().name();
        for r in &records {
            self.reports.next_offset(path, last_offset, r.offset);

            let mut prefix = "| ";
            if !self.skip_metadata {
                let header_keys: Vec<&str> = r.headers.iter().map(|h| h.key.as_str()).collect();
                write!(
                    self.out,
                    "| offset: {} {ts_name}: {} keySize: {} valueSize: {} sequence: {} headerKeys: [{}]",
                    r.offset,
                    r.timestamp,
                    size_of(&r.key),
                    size_of(&r.value),
                    r.sequence,
                    header_keys.join(","),
                )?;
                prefix = " ";
                if batch.header.is_control() {
                    write!(self.out, " {}", control_record(r))?;
                }
            }
            if self.print_data
                && !batch.header.is_control()
                && let Err(e) = extra::write_contents(&mut self.out, self.parser, r, prefix)?
            {
                self.out.flush()?;
                eprintln!("{e}");
                self.unreadable = true;
            }
            writeln!(self.out)?;
        }
        Ok(())
    }

    fn index(&mut self, path: &Path) -> Result<(), DumpError> {
        let base = base_offset_of(path);
        let bytes = read(path).map_err(DumpError::Read)?;
        let entries = bytes.len() / OFFSET_ENTRY;
        if entries == 0 {
            writeln!(self.out, "{} is empty.", path.display())?;
            return Ok(());
        }
        if self.sanity_only {
            return self.sanity(extra::offset_index_sanity(path, &bytes, base));
        }
        let log = SiblingLog::open(path)?;
        let starts = log.as_ref().map(|l| l.batch_starts());
        for (i, OffsetPosition { offset, position }) in offset_entries(base, &bytes).enumerate() {
            // A preallocated (untrimmed) index is zero-filled past its last entry.
            if offset == base && i > 0 {
                break;
            }
            if let Some(starts) = &starts {
                // -1: no batch starts at that position.
                let (found, size) = starts.get(&(position as usize)).copied().unwrap_or((-1, 0));
                if size > self.max_message_size {
                    // Kafka reads the batch through a slice of this size:
                    // it finds none, and its dump stops on the exception.
                    self.out.flush()?;
                    eprintln!(
                        "{}: the batch at position {position} is {size} bytes, more than --max-message-size {}: Kafka's dump stops here",
                        path.display(),
                        self.max_message_size
                    );
                    self.unreadable = true;
                    return Ok(());
                }
                if found != offset {
                    push_report(&mut self.reports.index_mismatches, path, (offset, found));
                }
            }
            if !self.verify_only {
                writeln!(self.out, "offset: {offset} position: {position}")?;
            }
        }
        Ok(())
    }

    fn time_index(&mut self, path: &Path) -> Result<(), DumpError> {
        let base = base_offset_of(path);
        let bytes = read(path).map_err(DumpError::Read)?;
        if self.sanity_only {
            return self.sanity(extra::time_index_sanity(path, &bytes, base));
        }
        let log = SiblingLog::open(path)?;
        let entries_in_log = log.as_ref().map(|l| {
            let entries = l.entries();
            let ascending = ascending(&entries);
            (entries, ascending)
        });
        let mut prev_timestamp = -1i64;
        for (i, TimestampOffset { timestamp, offset }) in time_entries(base, &bytes).enumerate() {
            if offset == base && i > 0 {
                break;
            }
            if let Some((log_entries, ascending)) = &entries_in_log {
                match find_by_last_offset(log_entries, *ascending, offset) {
                    None => {
                        push_report(&mut self.reports.time_offset_not_found, path, (offset, -1))
                    }
                    Some(e) if e.last_offset() != offset => push_report(
                        &mut self.reports.time_offset_not_found,
                        path,
                        (offset, e.last_offset()),
                    ),
                    Some(e) => {
                        if let Some(max) = e.max_timestamp()
                            && max != timestamp
                        {
                            push_report(&mut self.reports.time_mismatches, path, (timestamp, max));
                        }
                        if prev_timestamp >= timestamp {
                            push_report(
                                &mut self.reports.time_out_of_order,
                                path,
                                (timestamp, prev_timestamp),
                            );
                        }
                    }
                }
            }
            if !self.verify_only {
                writeln!(self.out, "timestamp: {timestamp} offset: {offset}")?;
            }
            prev_timestamp = timestamp;
        }
        Ok(())
    }

    /// `--index-sanity-check`'s line, or Kafka's `CorruptIndexException` message.
    fn sanity(&mut self, result: Result<String, String>) -> Result<(), DumpError> {
        match result {
            Ok(line) => writeln!(self.out, "{line}")?,
            Err(e) => {
                self.out.flush()?;
                eprintln!("{e}");
                self.unreadable = true;
            }
        }
        Ok(())
    }

    fn producer_snapshot(&mut self, path: &Path) -> Result<(), DumpError> {
        let bytes = read(path).map_err(DumpError::Read)?;
        extra::dump_producer_snapshot(&mut self.out, &bytes)?;
        Ok(())
    }

    fn txn_index(&mut self, path: &Path) -> Result<(), DumpError> {
        let bytes = read(path).map_err(DumpError::Read)?;
        if let Err(e) = extra::dump_txn_index(&mut self.out, path, &bytes)? {
            self.out.flush()?;
            eprintln!("{e}");
            self.unreadable = true;
        }
        Ok(())
    }

    /// The reports, in Kafka's order and wording. Kafka prepends to its offset
    /// index and gap lists, so those come out last-found first; kept for diffing.
    fn finish(&mut self) -> io::Result<()> {
        self.out.flush()?;
        let err = io::stderr();
        let mut err = err.lock();
        let r = &self.reports;
        for (file, pairs) in &r.index_mismatches {
            writeln!(err, "Mismatches in :{file}")?;
            for (index, log) in pairs.iter().rev() {
                writeln!(err, "  Index offset: {index}, log offset: {log}")?;
            }
        }
        for (file, pairs) in &r.time_mismatches {
            writeln!(err, "Found timestamp mismatch in :{file}")?;
            for (index, log) in pairs {
                writeln!(err, "  Index timestamp: {index}, log timestamp: {log}")?;
            }
        }
        for (file, pairs) in &r.time_out_of_order {
            writeln!(err, "Found out of order timestamp in :{file}")?;
            for (index, prev) in pairs {
                writeln!(
                    err,
                    "  Index timestamp: {index}, Previously indexed timestamp: {prev}"
                )?;
            }
        }
        for (_, pairs) in &r.time_offset_not_found {
            writeln!(
                err,
                "The following indexed offsets are not found in the log."
            )?;
            for (index, log) in pairs {
                writeln!(err, "Indexed offset: {index}, found log offset: {log}")?;
            }
        }
        for (file, pairs) in &r.non_consecutive {
            writeln!(err, "Non-consecutive offsets in {file}")?;
            for (first, second) in pairs.iter().rev() {
                writeln!(err, "  {first} is followed by {second}")?;
            }
        }
        Ok(())
    }
}

enum DumpError {
    /// The file being dumped could not be read: reported, and the dump goes on.
    Read(io::Error),
    /// stdout failed: nothing more can be shown.
    Write(io::Error),
}

impl From<io::Error> for DumpError {
    fn from(e: io::Error) -> Self {
        DumpError::Write(e)
    }
}

fn size_of(b: &Option<Vec<u8>>) -> i64 {
    b.as_ref().map_or(-1, |b| b.len() as i64)
}

/// `compressionType().name`, or the id Kafka does not know.
fn codec_name(codec: Result<commitfs::record::Compression, u8>) -> String {
    match codec {
        Ok(c) => c.name().to_string(),
        Err(id) => format!("unknown({id})"),
    }
}

/// What `DumpLogSegments` prints for a control record: the end-transaction
/// marker for ABORT/COMMIT, the type otherwise.
fn control_record(r: &Record) -> String {
    let Some(key) = r.key.as_deref().filter(|k| k.len() >= 4) else {
        return format!(
            "controlType: invalid (key of {} bytes, at least 4 needed)",
            size_of(&r.key)
        );
    };
    let type_id = i16::from_be_bytes([key[2], key[3]]);
    let name = match type_id {
        0 => "ABORT",
        1 => "COMMIT",
        2 => "LEADER_CHANGE",
        3 => "SNAPSHOT_HEADER",
        4 => "SNAPSHOT_FOOTER",
        5 => "KRAFT_VERSION",
        6 => "KRAFT_VOTERS",
        _ => "UNKNOWN",
    };
    if let Some(text) = control::kraft_control_text(type_id, r.value.as_deref()) {
        return text;
    }
    if !(0..=1).contains(&type_id) {
        return format!("controlType: {name}({type_id})");
    }
    match r.value.as_deref().filter(|v| v.len() >= 6) {
        Some(v) => format!(
            "endTxnMarker: {name} coordinatorEpoch: {}",
            i32::from_be_bytes([v[2], v[3], v[4], v[5]])
        ),
        None => format!(
            "endTxnMarker: {name} invalid (value of {} bytes, at least 6 needed)",
            size_of(&r.value)
        ),
    }
}
