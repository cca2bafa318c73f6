//! Line framing: where a write to `log` becomes records.
//!
//! One WRITE request becomes one append of its complete lines, the way
//! kafka-console-producer reads lines; a line cut by a write boundary is
//! held per handle until its newline arrives, or until the close.

use log::debug;

use super::error::{FsError, FsResult};
use commitfs_backend::{AppendError, LineFormat, Partition};
use commitfs_record::NewRecord;

/// One WRITE on `log`: its complete lines (with any held start of line) become
/// one append; the unterminated rest is held. Nothing of a refused write is
/// appended or held.
pub fn append_lines(
    partition: &dyn Partition,
    partial: &mut Vec<u8>,
    data: &[u8],
    path: &str,
) -> FsResult<()> {
    let format = partition.line_format();
    // No newline: the whole write joins the held start of a line.
    let Some(first_nl) = memchr::memchr(b'\n', data) else {
        partial.extend_from_slice(data);
        let fits = check_held(partition, &format, partial, path);
        if fits.is_err() {
            partial.truncate(partial.len() - data.len());
        }
        return fits;
    };
    // Only the first line (held start + this write's first piece) is copied;
    // the other records point into the request's own buffer. Lines become
    // records in the same pass that finds them.
    let rest = &data[data.len() - unterminated(data, first_nl)..];
    if !rest.is_empty() {
        check_held(partition, &format, rest, path)?;
    }
    let held = partial.len();
    partial.extend_from_slice(&data[..first_nl]);
    let lines = Lines::new(&format);
    let mut records = Vec::with_capacity(data.len() / 64 + 1);
    let outcome = lines
        .push(&partial[..], 1, &mut records)
        .and_then(|()| lines.push_all(&data[first_nl + 1..], &mut records))
        .map_err(|why| FsError::refuse(libc::EINVAL, format!("write to {path}"), why))
        .and_then(|()| append(partition, &records, path));
    drop(records);
    match outcome {
        Ok(()) => {
            partial.clear();
            partial.extend_from_slice(rest);
            Ok(())
        }
        Err(e) => {
            partial.truncate(held);
            Err(e)
        }
    }
}

/// Refuses, before any of it is acknowledged, an unterminated line that
/// could never be appended, even alone: the same rule (its serialized size)
/// as the append at its newline or at the close, so a held line is never
/// lost there for its size.
fn check_held(
    partition: &dyn Partition,
    format: &LineFormat,
    line: &[u8],
    path: &str,
) -> FsResult<()> {
    // Nothing held is nothing to append, at the newline or at the close.
    if line.is_empty() {
        return Ok(());
    }
    let record = Lines::new(format).record_or_value(line);
    partition.check_record_size(&record).map_err(|e| {
        FsError::backend(
            format!(
                "write to {path} (an unterminated line of {} bytes; nothing of this write was appended)",
                line.len()
            ),
            &e,
        )
    })
}

/// Bytes after the last newline of `data`, whose first newline is at `first_nl`.
fn unterminated(data: &[u8], first_nl: usize) -> usize {
    let last = memchr::memrchr(b'\n', &data[first_nl..]).map_or(first_nl, |i| first_nl + i);
    data.len() - last - 1
}

/// The close of a `log` handle: a held unterminated line becomes the last
/// record. Nobody is left to answer, so a refusal is only logged.
pub fn append_held_line(partition: &dyn Partition, partial: &mut Vec<u8>, path: &str) {
    if partial.is_empty() {
        return;
    }
    let line = std::mem::take(partial);
    let format = partition.line_format();
    let mut records = Vec::with_capacity(1);
    let e = match Lines::new(&format).push(&line, 1, &mut records) {
        Err(why) => FsError::refuse(libc::EINVAL, format!("append at close of {path}"), why),
        Ok(()) => match partition.append(&records) {
            Ok(_) => return,
            Err(e) => FsError::backend(
                format!("append of the unterminated last line at close of {path}"),
                &e.error,
            ),
        },
    };
    e.log_line();
}

fn append(partition: &dyn Partition, records: &[NewRecord], path: &str) -> FsResult<()> {
    match partition.append(records) {
        Ok(info) => {
            let batches = info
                .batches
                .map_or(String::new(), |n| format!(" in {n} batches"));
            debug!(
                "{path}: appended {} records at {}..={}{batches}",
                records.len(),
                info.first_offset,
                info.last_offset,
            );
            Ok(())
        }
        Err(AppendError { error, landed }) => {
            let landed = match landed {
                None => "nothing of this write was appended".to_string(),
                Some(l) => format!(
                    "{} of its records landed all the same, at {}..={}",
                    l.records, l.first_offset, l.last_offset
                ),
            };
            Err(FsError::backend(
                format!("append of {} records to {path} ({landed})", records.len()),
                &error,
            ))
        }
    }
}

/// Lines as records, the way Kafka's console producer reads them: the whole
/// line is the value, or with `parse.key` the text before the first separator
/// is the key.
struct Lines<'f> {
    key: Option<memchr::memmem::Finder<'f>>,
    separator_len: usize,
}

impl<'f> Lines<'f> {
    fn new(format: &'f LineFormat) -> Self {
        let sep = format.key_separator.as_bytes();
        Lines {
            key: (format.parse_key && !sep.is_empty()).then(|| memchr::memmem::Finder::new(sep)),
            separator_len: sep.len(),
        }
    }

    /// `line` as a record: keyed where the separator is already in it (a
    /// held start of a line may not have it yet), else the whole of it.
    fn record_or_value<'a>(&self, line: &'a [u8]) -> NewRecord<'a> {
        match self.key.as_ref().and_then(|f| f.find(line)) {
            Some(at) => NewRecord::keyed(&line[..at], &line[at + self.separator_len..]),
            None => NewRecord::value(line),
        }
    }

    /// Pushes `line` (line number `n` of the write, for the error) as a
    /// record. Errors with Kafka's message when a line has no separator.
    #[inline]
    fn push<'a>(
        &self,
        line: &'a [u8],
        n: usize,
        out: &mut Vec<NewRecord<'a>>,
    ) -> Result<(), String> {
        let Some(finder) = &self.key else {
            out.push(NewRecord::value(line));
            return Ok(());
        };
        match finder.find(line) {
            Some(at) => {
                out.push(NewRecord::keyed(
                    &line[..at],
                    &line[at + self.separator_len..],
                ));
                Ok(())
            }
            None => Err(format!(
                "No key separator found on line number {n}: '{}'",
                String::from_utf8_lossy(line)
            )),
        }
    }

    /// Pushes the complete lines of `buf` (newlines dropped) as records;
    /// the unterminated rest is the caller's. memchr finds the newlines a
    /// vector at a time.
    fn push_all<'a>(&self, buf: &'a [u8], out: &mut Vec<NewRecord<'a>>) -> Result<(), String> {
        let mut start = 0;
        for nl in memchr::memchr_iter(b'\n', buf) {
            self.push(&buf[start..nl], out.len() + 1, out)?;
            start = nl + 1;
        }
        Ok(())
    }
}

/// Splits `buf` into its complete lines (newlines dropped) and the unterminated rest.
#[cfg(test)]
pub fn split_lines(buf: &[u8]) -> (Vec<&[u8]>, &[u8]) {
    let mut lines = Vec::new();
    let mut start = 0;
    for nl in memchr::memchr_iter(b'\n', buf) {
        lines.push(&buf[start..nl]);
        start = nl + 1;
    }
    (lines, &buf[start..])
}

/// Lines as records (see [`Lines`]).
#[cfg(test)]
pub fn to_records<'a>(
    lines: &[&'a [u8]],
    parse_key: bool,
    separator: &str,
) -> Result<Vec<NewRecord<'a>>, String> {
    let format = LineFormat {
        parse_key,
        key_separator: separator.to_string(),
    };
    let l = Lines::new(&format);
    let mut out = Vec::with_capacity(lines.len());
    for (i, line) in lines.iter().enumerate() {
        l.push(line, i + 1, &mut out)?;
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_and_rest() {
        assert_eq!(
            split_lines(b"a\nb\nc\n"),
            (vec![&b"a"[..], b"b", b"c"], &b""[..])
        );
        assert_eq!(split_lines(b"a\nbc"), (vec![&b"a"[..]], &b"bc"[..]));
        assert_eq!(split_lines(b"abc"), (vec![], &b"abc"[..]));
        assert_eq!(split_lines(b"\n\n"), (vec![&b""[..], b""], &b""[..]));
    }

    #[test]
    fn keys() {
        let r = to_records(&[b"k\tv\tw"], true, "\t").unwrap();
        assert_eq!(r[0].key, Some(&b"k"[..]));
        assert_eq!(r[0].value, Some(&b"v\tw"[..]));
        let r = to_records(&[b"k\tv"], false, "\t").unwrap();
        assert_eq!(r[0].key, None);
        let e = to_records(&[b"a:b", b"c"], true, ":").unwrap_err();
        assert_eq!(e, "No key separator found on line number 2: 'c'");
    }
}
