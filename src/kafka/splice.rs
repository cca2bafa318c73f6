//! Responses whose record bytes go from the page cache to the socket with
//! `sendfile(2)`, as Kafka's `FileRecords.writeTo` does, while the response
//! itself is still encoded by `kafka-protocol`.
//!
//! How: a Fetch response is built with each partition's records set to a
//! *placeholder*, a slice of the right length of one never-touched mapping.
//! The encoder writes a length prefix and hands the slice to
//! [`SpliceBuf::put_slice`], which recognises the placeholder by its address
//! and records "file bytes go here" instead of copying. Writing the response
//! then alternates between the encoded bytes and `sendfile` of each slice.

use std::collections::VecDeque;
use std::fs::File;
use std::io::Write;
use std::net::TcpStream;
use std::os::fd::AsRawFd;
use std::sync::OnceLock;

use bytes::buf::UninitSlice;
use bytes::{BufMut, Bytes};
use kafka_protocol::protocol::buf::ByteBufMut;

use crate::storage::SegmentSlice;

/// The largest record bytes one partition may send in one response.
pub const MAX_PLACEHOLDER: usize = 64 << 20;

/// The placeholder mapping: reserved address space, never read or written.
fn placeholder_region() -> &'static [u8] {
    static REGION: OnceLock<usize> = OnceLock::new();
    let addr = *REGION.get_or_init(|| {
        // SAFETY: an anonymous read-only mapping that is never unmapped.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                MAX_PLACEHOLDER,
                libc::PROT_READ,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE,
                -1,
                0,
            )
        };
        if p == libc::MAP_FAILED { 0 } else { p as usize }
    });
    if addr == 0 {
        return &[];
    }
    // SAFETY: the mapping lives for the whole process and is readable (as
    // zeros, should anything ever read it).
    unsafe { std::slice::from_raw_parts(addr as *const u8, MAX_PLACEHOLDER) }
}

/// A placeholder of `len` bytes, or `None` if none can be had (then the
/// caller copies the bytes instead).
pub fn placeholder(len: usize) -> Option<Bytes> {
    let region = placeholder_region();
    (len > 0 && len <= region.len()).then(|| Bytes::from_static(&region[..len]))
}

fn is_placeholder(s: &[u8]) -> bool {
    let region = placeholder_region();
    let start = region.as_ptr() as usize;
    let p = s.as_ptr() as usize;
    !s.is_empty() && p >= start && p + s.len() <= start + region.len()
}

/// An encode target that copies everything but placeholders.
pub struct SpliceBuf {
    bytes: Vec<u8>,
    /// Each placeholder's file slice, in the order the encoder meets them.
    pending: VecDeque<SegmentSlice>,
    /// (position in `bytes` where the slice goes, the slice).
    spliced: Vec<(usize, SegmentSlice)>,
    spliced_len: usize,
}

impl SpliceBuf {
    /// `slices` in the order their placeholders appear in the response.
    pub fn new(slices: Vec<SegmentSlice>) -> Self {
        SpliceBuf {
            bytes: Vec::with_capacity(256),
            pending: slices.into(),
            spliced: Vec::new(),
            spliced_len: 0,
        }
    }

    /// A response with nothing to splice.
    pub fn from_bytes(bytes: Vec<u8>) -> Self {
        SpliceBuf {
            bytes,
            pending: VecDeque::new(),
            spliced: Vec::new(),
            spliced_len: 0,
        }
    }

    /// Bytes on the wire: encoded plus spliced.
    pub fn len(&self) -> usize {
        self.bytes.len() + self.spliced_len
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Whether every placeholder met its slice.
    pub fn complete(&self) -> bool {
        self.pending.is_empty()
    }

    /// Writes `prefix`, then the response, sending file slices with sendfile.
    pub fn write_to(&self, sock: &mut TcpStream, prefix: &[u8]) -> std::io::Result<()> {
        if self.spliced.is_empty() {
            // One write: a small response must not wait for Nagle.
            let mut all = Vec::with_capacity(prefix.len() + self.bytes.len());
            all.extend_from_slice(prefix);
            all.extend_from_slice(&self.bytes);
            return sock.write_all(&all);
        }
        let _cork = Cork::new(sock);
        sock.write_all(prefix)?;
        let mut at = 0;
        for (pos, slice) in &self.spliced {
            sock.write_all(&self.bytes[at..*pos])?;
            send_file(sock, slice.file()?, slice.position, slice.len)?;
            at = *pos;
        }
        sock.write_all(&self.bytes[at..])
    }
}

/// Holds TCP_CORK while a response goes out in pieces, so the pieces leave
/// as full packets.
struct Cork(i32);

impl Cork {
    fn new(sock: &TcpStream) -> Cork {
        let fd = sock.as_raw_fd();
        set_cork(fd, 1);
        Cork(fd)
    }
}

impl Drop for Cork {
    fn drop(&mut self) {
        set_cork(self.0, 0);
    }
}

fn set_cork(fd: i32, on: libc::c_int) {
    // SAFETY: setsockopt on a descriptor we hold, with a valid int.
    unsafe {
        libc::setsockopt(
            fd,
            libc::IPPROTO_TCP,
            libc::TCP_CORK,
            (&on as *const libc::c_int).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        );
    }
}

fn send_file(sock: &TcpStream, file: &File, position: u64, len: u64) -> std::io::Result<()> {
    let mut off = position as libc::off_t;
    let end = position + len;
    while (off as u64) < end {
        let want = (end - off as u64).min(1 << 30) as usize;
        // SAFETY: both descriptors are open; sendfile advances `off`.
        let n = unsafe { libc::sendfile(sock.as_raw_fd(), file.as_raw_fd(), &mut off, want) };
        if n < 0 {
            let e = std::io::Error::last_os_error();
            if e.kind() == std::io::ErrorKind::Interrupted {
                continue;
            }
            return Err(e);
        }
        if n == 0 {
            // The file ended early: the frame can no longer be completed.
            return Err(std::io::Error::new(
                std::io::ErrorKind::UnexpectedEof,
                "segment file ended before the fetched bytes",
            ));
        }
    }
    Ok(())
}

// SAFETY: delegates to Vec<u8>'s BufMut, which upholds the contract.
unsafe impl BufMut for SpliceBuf {
    fn remaining_mut(&self) -> usize {
        self.bytes.remaining_mut()
    }

    unsafe fn advance_mut(&mut self, cnt: usize) {
        // SAFETY: the caller initialised `cnt` bytes of chunk_mut().
        unsafe { self.bytes.advance_mut(cnt) }
    }

    fn chunk_mut(&mut self) -> &mut UninitSlice {
        self.bytes.chunk_mut()
    }

    fn put_slice(&mut self, src: &[u8]) {
        if is_placeholder(src)
            && self
                .pending
                .front()
                .is_some_and(|s| s.len == src.len() as u64)
            && let Some(slice) = self.pending.pop_front()
        {
            self.spliced_len += src.len();
            self.spliced.push((self.bytes.len(), slice));
            return;
        }
        self.bytes.extend_from_slice(src);
    }
}

impl ByteBufMut for SpliceBuf {
    fn offset(&self) -> usize {
        self.len()
    }

    // Gaps are used by record-batch encoding only, never by messages; these
    // act on the encoded bytes so they stay defined all the same.
    fn seek(&mut self, offset: usize) {
        let offset = offset.saturating_sub(self.spliced_len);
        self.bytes.resize(offset, 0);
    }

    fn range(&mut self, r: std::ops::Range<usize>) -> &mut [u8] {
        let len = self.bytes.len();
        let start = r.start.saturating_sub(self.spliced_len).min(len);
        let end = r.end.saturating_sub(self.spliced_len).clamp(start, len);
        &mut self.bytes[start..end]
    }
}
