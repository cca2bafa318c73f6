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
use std::io::{IoSlice, Write};
use std::os::fd::AsRawFd;
use std::sync::OnceLock;

use bytes::buf::UninitSlice;
use bytes::{BufMut, Bytes};
use kafka_protocol::protocol::buf::ByteBufMut;

use commitfs_storage::SegmentSlice;

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
}

/// Where a part of a response's bytes comes from.
#[derive(Clone, Copy)]
enum Part {
    Prefix,
    /// A range of the encoded bytes.
    Mem(usize, usize),
    /// The `i`th spliced file slice.
    File(usize),
}

/// How far a write got.
#[derive(Debug, PartialEq, Eq)]
pub enum Progress {
    Done,
    /// The socket would block: wait until it is writable and call again.
    Blocked,
}

/// A response on its way out of a non-blocking socket, resumable where the
/// socket's buffer filled: the size prefix, the encoded bytes, and the file
/// slices sent with `sendfile(2)`.
pub struct Outgoing {
    prefix: [u8; 4],
    body: SpliceBuf,
    parts: Vec<Part>,
    at: usize,
    /// Bytes of `parts[at]` already sent.
    off: u64,
    corked: bool,
}

impl Outgoing {
    pub fn new(prefix: [u8; 4], body: SpliceBuf) -> Outgoing {
        let mut parts = vec![Part::Prefix];
        let mut at = 0;
        for (i, (pos, _)) in body.spliced.iter().enumerate() {
            parts.push(Part::Mem(at, *pos));
            parts.push(Part::File(i));
            at = *pos;
        }
        parts.push(Part::Mem(at, body.bytes.len()));
        Outgoing {
            prefix,
            body,
            parts,
            at: 0,
            off: 0,
            corked: false,
        }
    }

    /// Bytes on the wire, prefix included.
    pub fn len(&self) -> usize {
        4 + self.body.len()
    }

    pub fn is_empty(&self) -> bool {
        false
    }

    fn part_len(&self, p: Part) -> u64 {
        match p {
            Part::Prefix => 4,
            Part::Mem(a, b) => (b - a) as u64,
            Part::File(i) => self.body.spliced[i].1.len,
        }
    }

    fn advance(&mut self, mut n: u64) {
        while n > 0 && self.at < self.parts.len() {
            let rem = self.part_len(self.parts[self.at]) - self.off;
            if n >= rem {
                n -= rem;
                self.at += 1;
                self.off = 0;
            } else {
                self.off += n;
                n = 0;
            }
        }
    }

    /// Writes as much as the socket takes. `Done` once the whole response
    /// is out; `Blocked` when the socket would block.
    pub fn write_to<S: Write + AsRawFd>(&mut self, sock: &mut S) -> std::io::Result<Progress> {
        self.write_into(&mut Plain(sock))
    }

    /// [`Outgoing::write_to`] through any [`Sink`] (TLS, say).
    pub fn write_into<K: Sink>(&mut self, sock: &mut K) -> std::io::Result<Progress> {
        if !self.corked && !self.body.spliced.is_empty() {
            // The pieces leave as full packets, not one per write.
            sock.cork(true);
            self.corked = true;
        }
        loop {
            // Zero-length parts are stepped over.
            while self.at < self.parts.len() && self.part_len(self.parts[self.at]) == self.off {
                self.at += 1;
                self.off = 0;
            }
            if self.at == self.parts.len() {
                if self.corked {
                    sock.cork(false);
                    self.corked = false;
                }
                return Ok(Progress::Done);
            }
            let off = self.off as usize;
            let written = match self.parts[self.at] {
                Part::Prefix => {
                    // The prefix and the bytes after it in one write, so a
                    // small response is one packet.
                    let next = match self.parts.get(1) {
                        Some(Part::Mem(a, b)) => &self.body.bytes[*a..*b],
                        _ => &[][..],
                    };
                    let bufs = [IoSlice::new(&self.prefix[off..]), IoSlice::new(next)];
                    sock.write_vectored(&bufs).map(|n| n as u64)
                }
                Part::Mem(a, b) => sock.write(&self.body.bytes[a + off..b]).map(|n| n as u64),
                Part::File(i) => {
                    let slice = &self.body.spliced[i].1;
                    let file = slice.file()?;
                    sock.send_file(file, slice.position + self.off, slice.len - self.off)
                }
            };
            match written {
                Ok(0) => {
                    return Err(std::io::Error::new(
                        std::io::ErrorKind::WriteZero,
                        "the socket took no bytes",
                    ));
                }
                Ok(n) => self.advance(n),
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                    return Ok(Progress::Blocked);
                }
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
    }
}

/// Where a response's bytes go: a plain socket (with `sendfile(2)` for file
/// slices) or a TLS connection (which reads file slices and encrypts them).
pub trait Sink {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize>;
    fn write_vectored(&mut self, bufs: &[IoSlice<'_>]) -> std::io::Result<usize>;
    /// At most `len` bytes of `file` from `position`: how many went.
    fn send_file(&mut self, file: &File, position: u64, len: u64) -> std::io::Result<u64>;
    /// Hold partial packets back while a response's pieces go out.
    fn cork(&mut self, on: bool);
}

/// A plaintext socket.
pub struct Plain<'a, S>(pub &'a mut S);

impl<S: Write + AsRawFd> Sink for Plain<'_, S> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.write(buf)
    }

    fn write_vectored(&mut self, bufs: &[IoSlice<'_>]) -> std::io::Result<usize> {
        self.0.write_vectored(bufs)
    }

    fn send_file(&mut self, file: &File, position: u64, len: u64) -> std::io::Result<u64> {
        send_file(self.0.as_raw_fd(), file, position, len)
    }

    fn cork(&mut self, on: bool) {
        set_cork(self.0.as_raw_fd(), on as libc::c_int);
    }
}

fn set_cork(fd: i32, on: libc::c_int) {
    set_int_option(fd, libc::IPPROTO_TCP, libc::TCP_CORK, on);
}

/// Sets a socket's integer option, best effort: each caller's option only
/// changes how packets leave or are acknowledged, never what is sent.
pub(super) fn set_int_option(fd: i32, level: libc::c_int, name: libc::c_int, value: libc::c_int) {
    // SAFETY: setsockopt on a descriptor the caller holds, with a valid int.
    unsafe {
        libc::setsockopt(
            fd,
            level,
            name,
            (&value as *const libc::c_int).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        );
    }
}

/// One `sendfile(2)` call of at most `len` bytes from `position`: the bytes
/// it sent, `WouldBlock` when the socket is full.
fn send_file(sock: i32, file: &File, position: u64, len: u64) -> std::io::Result<u64> {
    let mut off = position as libc::off_t;
    let want = len.min(1 << 30) as usize;
    // SAFETY: both descriptors are open; sendfile advances `off`.
    let n = unsafe { libc::sendfile(sock, file.as_raw_fd(), &mut off, want) };
    if n < 0 {
        return Err(std::io::Error::last_os_error());
    }
    if n == 0 && want > 0 {
        // The file ended early: the frame can no longer be completed.
        return Err(std::io::Error::new(
            std::io::ErrorKind::UnexpectedEof,
            "segment file ended before the fetched bytes",
        ));
    }
    Ok(n as u64)
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
