//! The text files of the data directory that hold one entry a line
//! (`commitfs.acls`, `commitfs.scram-credentials`): a header naming the
//! format and its version, then the lines, each field percent-escaped
//! outside a set of plain bytes. They are written whole with
//! [`super::checkpoint::write_private_atomically`].

/// The entries `parse` reads from the file at `path`, `None` when there is
/// no file; else a message naming `what` the file holds ("the ACLs"), the
/// file and, for a bad line, its number.
pub fn load<T>(
    path: &std::path::Path,
    what: &str,
    parse: impl FnOnce(&[u8]) -> Result<T, (usize, String)>,
) -> Result<Option<T>, String> {
    match std::fs::read(path) {
        Ok(bytes) => parse(&bytes).map(Some).map_err(|(line, why)| {
            format!("cannot load {what}: {} line {line}: {why}", path.display())
        }),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(format!("cannot read {what} {}: {e}", path.display())),
    }
}

/// The lines after `header` of a text file in the shape of
/// `commitfs.acls` and `commitfs.scram-credentials` (a header naming the
/// format and its version, a line per entry, each ending in `\n`), with
/// their numbers from 1; else the line that is wrong and why.
pub fn versioned_lines<'a>(
    bytes: &'a [u8],
    header: &str,
) -> Result<Vec<(usize, &'a str)>, (usize, String)> {
    let text = std::str::from_utf8(bytes).map_err(|e| {
        let line = 1
            + (bytes[..e.valid_up_to()].iter())
                .filter(|&&b| b == b'\n')
                .count();
        (line, "not UTF-8 text".to_string())
    })?;
    let Some(body) = text.strip_suffix('\n') else {
        let line = text.lines().count().max(1);
        return Err((
            line,
            "the file does not end with a newline: cut short".to_string(),
        ));
    };
    let mut lines = body.split('\n').enumerate().map(|(i, l)| (i + 1, l));
    let format = header.split(' ').next().unwrap_or(header);
    match lines.next() {
        Some((_, l)) if l == header => {}
        Some((_, l)) if l.starts_with(&format!("{format} ")) => {
            return Err((1, format!("unknown version: {l:?}")));
        }
        _ => return Err((1, format!("expected {header:?}"))),
    }
    Ok(lines.collect())
}

/// `text` with every byte that is not ASCII alphanumeric, `-._~` or in
/// `extra` written `%XX`.
pub fn escape(text: &str, extra: &[u8]) -> String {
    let mut s = String::with_capacity(text.len());
    for b in text.bytes() {
        if plain(b, extra) {
            s.push(b as char);
        } else {
            s.push_str(&format!("%{b:02X}"));
        }
    }
    s
}

/// The text [`escape`] made, or why `s` is not one; `what` names the field
/// in the message ("the user name ").
pub fn unescape(s: &str, extra: &[u8], what: &str) -> Result<String, String> {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'%' => {
                let byte = (b.get(i + 1..i + 3))
                    .and_then(|h| std::str::from_utf8(h).ok())
                    .and_then(|h| u8::from_str_radix(h, 16).ok())
                    .ok_or_else(|| format!("bad escape in {what}{s:?}"))?;
                out.push(byte);
                i += 3;
            }
            c if plain(c, extra) => {
                out.push(c);
                i += 1;
            }
            _ => return Err(format!("unencoded byte in {what}{s:?}")),
        }
    }
    String::from_utf8(out).map_err(|_| format!("{what}{s:?} is not UTF-8"))
}

fn plain(b: u8, extra: &[u8]) -> bool {
    b.is_ascii_alphanumeric() || b"-._~".contains(&b) || extra.contains(&b)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escapes_round_trip_and_refusals_say_why() {
        for (text, extra) in [("User:*", &b"*:"[..]), ("a b%ü", b""), ("", b"")] {
            let e = escape(text, extra);
            assert!(e.bytes().all(|b| b.is_ascii_graphic()), "{e}");
            assert_eq!(unescape(&e, extra, "").unwrap(), text);
        }
        assert_eq!(escape("User:*", b""), "User%3A%2A");
        assert_eq!(
            unescape("a%2", b"", "the user name ").unwrap_err(),
            "bad escape in the user name \"a%2\""
        );
        assert_eq!(
            unescape("a*", b"", "").unwrap_err(),
            "unencoded byte in \"a*\""
        );
        assert_eq!(
            unescape("%FF", b"", "").unwrap_err(),
            "\"%FF\" is not UTF-8"
        );
    }

    #[test]
    fn versioned_lines_check_header_version_and_end() {
        let h = "commitfs-x 1";
        assert_eq!(
            versioned_lines(b"commitfs-x 1\na\nb\n", h).unwrap(),
            vec![(2, "a"), (3, "b")]
        );
        let err = |bytes: &[u8]| versioned_lines(bytes, h).unwrap_err();
        assert_eq!(
            err(b"commitfs-x 2\n"),
            (1, "unknown version: \"commitfs-x 2\"".to_string())
        );
        assert_eq!(
            err(b"other\n"),
            (1, "expected \"commitfs-x 1\"".to_string())
        );
        assert_eq!(
            err(b"commitfs-x 1\na"),
            (
                2,
                "the file does not end with a newline: cut short".to_string()
            )
        );
        assert_eq!(
            err(b"commitfs-x 1\n\xff\n"),
            (2, "not UTF-8 text".to_string())
        );
    }
}
