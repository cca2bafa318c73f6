//! Framing: a request is a 4-byte big-endian size, then that many bytes.
//! The size is checked against `socket.request.max.bytes` before anything
//! is buffered, and the buffer grows with the bytes that actually arrive, so
//! a client that claims 100 MB and sends nothing holds no 100 MB.

use std::io::{ErrorKind, Read};

use bytes::Bytes;

use super::error::Refusal;

/// What reading the next request found.
pub enum Incoming {
    Frame(Bytes),
    /// The peer closed the connection between requests.
    Closed,
}

/// Why reading stopped.
pub enum ReadError {
    Refused(Refusal),
    Io(std::io::Error),
}

/// Reads one request frame.
pub fn read_frame(r: &mut impl Read, max: usize) -> Result<Incoming, ReadError> {
    let mut size = [0u8; 4];
    let mut got = 0;
    while got < 4 {
        match r.read(&mut size[got..]) {
            Ok(0) if got == 0 => return Ok(Incoming::Closed),
            Ok(0) => {
                return Err(ReadError::Io(std::io::Error::new(
                    ErrorKind::UnexpectedEof,
                    "connection closed inside a request size",
                )));
            }
            Ok(n) => got += n,
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            Err(e) => return Err(ReadError::Io(e)),
        }
    }
    let size = i32::from_be_bytes(size);
    if size < 0 {
        return Err(ReadError::Refused(Refusal::NegativeSize(size)));
    }
    if size as usize > max {
        return Err(ReadError::Refused(Refusal::FrameTooLarge {
            size: size as i64,
            max,
        }));
    }
    let size = size as usize;
    let mut body = Vec::with_capacity(size.min(64 * 1024));
    let n = r
        .take(size as u64)
        .read_to_end(&mut body)
        .map_err(ReadError::Io)?;
    if n < size {
        return Err(ReadError::Io(std::io::Error::new(
            ErrorKind::UnexpectedEof,
            format!("connection closed after {n} of a {size}-byte request"),
        )));
    }
    Ok(Incoming::Frame(Bytes::from(body)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(bytes: &[u8], max: usize) -> Result<Incoming, ReadError> {
        read_frame(&mut &bytes[..], max)
    }

    #[test]
    fn frames() {
        assert!(matches!(read(&[], 10), Ok(Incoming::Closed)));
        match read(&[0, 0, 0, 2, 7, 8, 9], 10) {
            Ok(Incoming::Frame(b)) => assert_eq!(&b[..], &[7, 8]),
            _ => panic!("a frame"),
        }
        assert!(matches!(
            read(&[0, 0, 0, 11], 10),
            Err(ReadError::Refused(Refusal::FrameTooLarge { size: 11, .. }))
        ));
        assert!(matches!(
            read(&[0xff, 0xff, 0xff, 0xff], 10),
            Err(ReadError::Refused(Refusal::NegativeSize(-1)))
        ));
        assert!(matches!(read(&[0, 0], 10), Err(ReadError::Io(_))));
        assert!(matches!(read(&[0, 0, 0, 5, 1], 10), Err(ReadError::Io(_))));
    }
}
