//! Line framing: where a write to `log` becomes records.
//!
//! One WRITE request becomes one append of its complete lines, the way
//! kafka-console-producer reads lines; a line cut by a write boundary is
//! held per handle until its newline arrives, or until the close.

use log::debug;

use super::backend::{LineFormat, Partition};
use super::error::{FsError, FsResult};
use crate::record::NewRecord;

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
    let max = format.max_message_bytes;
    let too_long = |len: usize| {
        FsError::refuse(
            libc::EMSGSIZE,
            format!("write to {path}"),
            format!(
                "an unterminated line of {len} bytes is already larger than max.message.bytes ({max}); nothing of this write was appended"
            ),
        )
    };
    // No newline: the whole write joins the held start of a line.
    let Some(first_nl) = memchr::memchr(b'\n', data) else {
        if partial.len() + data.len() > max {
            return Err(too_long(partial.len() + data.len()));
        }
        partial.extend_from_slice(data);
        return Ok(());
    };
    // Only the first line (held start + this write's first piece) is copied;
    // the other records point into the request's own buffer.
    let held = partial.len();
    partial.extend_from_slice(&data[..first_nl]);
    let mut lines = Vec::with_capacity(data.len() / 64 + 1);
    lines.push(&partial[..]);
    let rest = push_lines(&data[first_nl + 1..], &mut lines);
    let outcome = if rest.len() > max {
        Err(too_long(rest.len()))
    } else {
        append(partition, &lines, &format, path)
    };
    drop(lines);
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

/// The close of a `log` handle: a held unterminated line becomes the last
/// record. Nobody is left to answer, so a refusal is only logged.
pub fn append_held_line(partition: &dyn Partition, partial: &mut Vec<u8>, path: &str) {
    if partial.is_empty() {
        return;
    }
    let line = std::mem::take(partial);
    let format = partition.line_format();
    let lines = [&line[..]];
    let e = match to_records(&lines, format.parse_key, format.key_separator.as_bytes()) {
        Err(why) => FsError::refuse(libc::EINVAL, format!("append at close of {path}"), why),
        Ok(records) => match partition.append(&records) {
            Ok(_) => return,
            Err(e) => FsError::backend(
                format!("append of the unterminated last line at close of {path}"),
                &e,
            ),
        },
    };
    e.log_line();
}

fn append(
    partition: &dyn Partition,
    lines: &[&[u8]],
    format: &LineFormat,
    path: &str,
) -> FsResult<()> {
    let records = to_records(lines, format.parse_key, format.key_separator.as_bytes())
        .map_err(|why| FsError::refuse(libc::EINVAL, format!("write to {path}"), why))?;
    match partition.append(&records) {
        Ok(info) => {
            debug!(
                "{path}: appended {} records at {}..={} in {} batches",
                records.len(),
                info.first_offset,
                info.last_offset,
                info.batches
            );
            Ok(())
        }
        Err(e) => Err(FsError::backend(
            format!(
                "append of {} records to {path} (nothing of this write was appended)",
                records.len()
            ),
            &e,
        )),
    }
}

/// Splits `buf` into its complete lines (newlines dropped) and the unterminated rest.
#[cfg(test)]
pub fn split_lines(buf: &[u8]) -> (Vec<&[u8]>, &[u8]) {
    let mut lines = Vec::new();
    let rest = push_lines(buf, &mut lines);
    (lines, rest)
}

/// Pushes the complete lines of `buf` (newlines dropped) onto `lines` and
/// returns the unterminated rest. memchr finds the newlines a vector at a time.
pub fn push_lines<'a, 'b: 'a>(buf: &'b [u8], lines: &mut Vec<&'a [u8]>) -> &'b [u8] {
    let mut start = 0;
    for nl in memchr::memchr_iter(b'\n', buf) {
        lines.push(&buf[start..nl]);
        start = nl + 1;
    }
    &buf[start..]
}

/// Lines as records, the way Kafka's console producer reads them: the whole
/// line is the value, or with `parse.key` the text before the first separator
/// is the key. Errors with Kafka's message when a line has no separator.
pub fn to_records<'a>(
    lines: &[&'a [u8]],
    parse_key: bool,
    separator: &[u8],
) -> Result<Vec<NewRecord<'a>>, String> {
    if !parse_key || separator.is_empty() {
        return Ok(lines.iter().map(|line| NewRecord::value(line)).collect());
    }
    let finder = memchr::memmem::Finder::new(separator);
    let mut out = Vec::with_capacity(lines.len());
    for (i, line) in lines.iter().enumerate() {
        match finder.find(line) {
            Some(at) => out.push(NewRecord::keyed(&line[..at], &line[at + separator.len()..])),
            None => {
                return Err(format!(
                    "No key separator found on line number {}: '{}'",
                    i + 1,
                    String::from_utf8_lossy(line)
                ));
            }
        }
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
        let r = to_records(&[b"k\tv\tw"], true, b"\t").unwrap();
        assert_eq!(r[0].key, Some(&b"k"[..]));
        assert_eq!(r[0].value, Some(&b"v\tw"[..]));
        let r = to_records(&[b"k\tv"], false, b"\t").unwrap();
        assert_eq!(r[0].key, None);
        let e = to_records(&[b"a:b", b"c"], true, b":").unwrap_err();
        assert_eq!(e, "No key separator found on line number 2: 'c'");
    }
}
