//! The codecs of compressed v2 batches, in the exact stream formats Kafka's Java
//! client and broker write (`org.apache.kafka.common.compress.*`), so batches we
//! write are read by Kafka and the other way round.
//!
//! A compressed batch holds its whole records section as one compressed stream.
//!
//! Memory: a section is read as a stream ([`stream`]) with bounded buffers,
//! as Kafka's `LogValidator` does, so validating a batch never holds its
//! inflated records. No claimed length is trusted before it is checked
//! against what the compressed bytes could possibly inflate to (a raw snappy
//! block's preamble, a zstd frame's window). And every decompression, the
//! streamed ones and [`decompress`], first takes its working set from one
//! process-wide budget ([`DECOMPRESS_BUDGET`]), waiting for its turn when
//! the budget is spent: however many clients send compressed batches at
//! once, decompression holds at most that much.

use std::io::{Read, Write};
use std::sync::{Condvar, Mutex};

use super::RecordError;
use super::batch::Compression;

/// Largest records section we are willing to inflate. A few kilobytes of gzip or
/// zstd can claim gigabytes, and the CRC only proves the compressed bytes are
/// what some writer meant, not that the writer was friendly. Kafka's own
/// `max.message.bytes` default (1 MiB compressed) stays far below this.
pub const MAX_DECOMPRESSED_SIZE: usize = 64 << 20;

/// snappy-java's stream header (`SnappyCodec`): magic, then version 1 and
/// minimum compatible version 1 as big-endian ints.
const XERIAL_MAGIC: &[u8; 8] = b"\x82SNAPPY\0";
const XERIAL_HEADER: &[u8; 16] = b"\x82SNAPPY\0\0\0\0\x01\0\0\0\x01";
/// snappy-java's default `SnappyOutputStream` block size, which Kafka keeps.
const XERIAL_BLOCK_SIZE: usize = 32 * 1024;

/// Kafka's zstd default level (`ZstdCompression.DEFAULT_LEVEL`).
const ZSTD_LEVEL: i32 = 3;

/// Bytes of decompression buffers (codec windows and blocks, inflated
/// sections) the whole process holds at once; a decompression that would
/// go past it waits until others finish.
pub const DECOMPRESS_BUDGET: usize = 128 << 20;

/// A raw snappy block inflates at most 64 bytes per 3-byte copy tag: a
/// block claiming more than this many times its size is lying.
const SNAPPY_MAX_RATIO: usize = 22;
/// The most gzip (deflate) inflates: 258 bytes per 2 bits, about 1032:1.
const GZIP_MAX_RATIO: usize = 1032;
/// The most an LZ4 block inflates: about 255 bytes per byte of match length.
const LZ4_MAX_RATIO: usize = 256;
/// What a gzip stream's inflater holds (a 32 KiB window and its tables).
const GZIP_WORKING_SET: usize = 64 << 10;
/// A zstd block is at most 128 KiB; the decoder holds about two.
const ZSTD_BLOCK: usize = 256 << 10;

/// The process-wide decompression budget.
struct Budget {
    used: Mutex<usize>,
    freed: Condvar,
}

static BUDGET: Budget = Budget {
    used: Mutex::new(0),
    freed: Condvar::new(),
};

/// Bytes taken from the decompression budget, given back on drop.
pub struct Reservation(usize);

/// Takes `bytes` (at most the whole budget) from the budget, waiting while
/// other decompressions hold too much of it.
pub fn reserve(bytes: usize) -> Reservation {
    let bytes = bytes.min(DECOMPRESS_BUDGET);
    let mut used = BUDGET.used.lock().unwrap_or_else(|e| e.into_inner());
    while *used + bytes > DECOMPRESS_BUDGET {
        used = BUDGET.freed.wait(used).unwrap_or_else(|e| e.into_inner());
    }
    *used += bytes;
    Reservation(bytes)
}

/// Bytes of the budget held right now.
pub fn budget_in_use() -> usize {
    *BUDGET.used.lock().unwrap_or_else(|e| e.into_inner())
}

impl Drop for Reservation {
    fn drop(&mut self) {
        let mut used = BUDGET.used.lock().unwrap_or_else(|e| e.into_inner());
        *used -= self.0;
        BUDGET.freed.notify_all();
    }
}

/// A records section being inflated, with its share of the budget.
pub struct Decoder<'a> {
    reader: Box<dyn Read + 'a>,
    _reserved: Reservation,
}

impl Read for Decoder<'_> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        self.reader.read(buf)
    }
}

/// A compressed records section as a stream of its inflated bytes, with
/// buffers bounded by the codec's own framing (checked before anything is
/// allocated) and taken from the budget. The caller bounds the output.
pub fn stream(codec: Compression, data: &[u8]) -> Result<Decoder<'_>, RecordError> {
    stream_holding(codec, data, 0)
}

/// [`stream`], with `extra` bytes (the caller's output) taken from the
/// budget in the same reservation: a thread never holds one reservation
/// while it waits for another, so decompressions cannot wait on each other
/// in a circle.
fn stream_holding(
    codec: Compression,
    data: &[u8],
    extra: usize,
) -> Result<Decoder<'_>, RecordError> {
    let (reader, working_set): (Box<dyn Read + '_>, usize) = match codec {
        Compression::None => (Box::new(data), 0),
        // Java's GZIPInputStream reads concatenated members, so a multi-member
        // stream is valid Kafka data even though Kafka itself writes one member.
        Compression::Gzip => (
            Box::new(flate2::read::MultiGzDecoder::new(data)),
            GZIP_WORKING_SET,
        ),
        Compression::Snappy => {
            if data.len() < XERIAL_HEADER.len() || !data.starts_with(XERIAL_MAGIC) {
                // One raw block: it inflates whole, so its claimed size is
                // checked, then reserved, before it is allocated.
                let n = snappy_claimed_len(data, MAX_DECOMPRESSED_SIZE, MAX_DECOMPRESSED_SIZE)?;
                let reserved = reserve(n.saturating_add(extra));
                let mut out = Vec::new();
                if !data.is_empty() {
                    snappy_raw_block(data, &mut out, MAX_DECOMPRESSED_SIZE)?;
                }
                return Ok(Decoder {
                    reader: Box::new(std::io::Cursor::new(out)),
                    _reserved: reserved,
                });
            }
            let largest = xerial_largest_block(data)?;
            (Box::new(XerialReader::new(data)), largest)
        }
        Compression::Lz4 => {
            let frame = &data[..lz4_frame_len(data)?];
            // The decoder holds a compressed and an inflated block of the
            // frame's maximum block size, and a 64 KiB window.
            let block = lz4_block_max(frame);
            (
                Box::new(lz4_flex::frame::FrameDecoder::new(frame)),
                2 * block + (64 << 10),
            )
        }
        Compression::Zstd => {
            let window = zstd_window(data)?;
            let decoder = zstd::stream::read::Decoder::with_buffer(data)
                .map_err(|e| decompress_error(codec, e))?;
            // A window's pages are touched only as output fills them, and the
            // caller bounds the output: reserve no more than that.
            (
                Box::new(decoder),
                window.min(MAX_DECOMPRESSED_SIZE) + ZSTD_BLOCK,
            )
        }
    };
    Ok(Decoder {
        reader,
        _reserved: reserve(working_set.saturating_add(extra)),
    })
}

/// Inflates a records section, refusing to produce more than [`MAX_DECOMPRESSED_SIZE`].
pub fn decompress(codec: Compression, data: &[u8]) -> Result<Vec<u8>, RecordError> {
    decompress_with_limit(codec, data, MAX_DECOMPRESSED_SIZE)
}

/// [`decompress`] with a caller-chosen cap on the output size.
pub fn decompress_with_limit(
    codec: Compression,
    data: &[u8],
    limit: usize,
) -> Result<Vec<u8>, RecordError> {
    // The output is memory too: reserve what it can at most become.
    let ratio = match codec {
        Compression::None => 1,
        Compression::Gzip => GZIP_MAX_RATIO,
        Compression::Snappy => SNAPPY_MAX_RATIO,
        Compression::Lz4 => LZ4_MAX_RATIO,
        Compression::Zstd => usize::MAX,
    };
    let output = data.len().saturating_mul(ratio).min(limit);
    match codec {
        Compression::None => {
            if data.len() > limit {
                return Err(RecordError::DecompressedTooLarge { codec, limit });
            }
            let _output = reserve(output);
            Ok(data.to_vec())
        }
        Compression::Snappy => {
            let _output = reserve(output);
            snappy_decompress(data, limit)
        }
        // The zstd decoder's default window limit (2^27, as zstd-jni's) is
        // kept: Kafka at high levels writes frames that need it.
        _ => read_capped(codec, stream_holding(codec, data, output)?, limit),
    }
}

/// Compresses a records section the way Kafka's Java producer does.
pub fn compress(codec: Compression, data: &[u8]) -> Result<Vec<u8>, RecordError> {
    let fail = |e: std::io::Error| {
        RecordError::Corrupt(format!("{} compression failed: {e}", codec.name()))
    };
    match codec {
        Compression::None => Ok(data.to_vec()),
        Compression::Gzip => {
            let mut enc = flate2::write::GzEncoder::new(
                Vec::with_capacity(data.len() / 2 + 32),
                flate2::Compression::default(),
            );
            enc.write_all(data).map_err(fail)?;
            enc.finish().map_err(fail)
        }
        Compression::Snappy => snappy_compress(data),
        Compression::Lz4 => {
            // KafkaLZ4BlockOutputStream's frame: 64 KiB independent blocks, no
            // block or content checksum, no content size.
            let info = lz4_flex::frame::FrameInfo::new()
                .block_size(lz4_flex::frame::BlockSize::Max64KB)
                .block_mode(lz4_flex::frame::BlockMode::Independent)
                .block_checksums(false)
                .content_checksum(false);
            let mut enc = lz4_flex::frame::FrameEncoder::with_frame_info(
                info,
                Vec::with_capacity(data.len() / 2 + 32),
            );
            enc.write_all(data).map_err(fail)?;
            enc.finish()
                .map_err(|e| RecordError::Corrupt(format!("lz4 compression failed: {e}")))
        }
        Compression::Zstd => zstd::stream::encode_all(data, ZSTD_LEVEL).map_err(fail),
    }
}

fn decompress_error(codec: Compression, e: impl std::fmt::Display) -> RecordError {
    RecordError::Decompress {
        codec,
        reason: e.to_string(),
    }
}

/// Reads a decoder to its end, or to one byte past `limit`, whichever is first.
fn read_capped(
    codec: Compression,
    reader: impl Read,
    limit: usize,
) -> Result<Vec<u8>, RecordError> {
    let mut out = Vec::new();
    reader
        .take(limit as u64 + 1)
        .read_to_end(&mut out)
        .map_err(|e| decompress_error(codec, e))?;
    if out.len() > limit {
        return Err(RecordError::DecompressedTooLarge { codec, limit });
    }
    Ok(out)
}

/// Length of the LZ4 frame at the start of `data`, end mark and content checksum
/// included.
///
/// Kafka's KafkaLZ4BlockInputStream reads one frame, fails if its end mark is
/// missing and ignores whatever follows it; lz4_flex would take a frame cut short
/// at a block boundary as complete, so the frame's extent is checked here first.
fn lz4_frame_len(data: &[u8]) -> Result<usize, RecordError> {
    let err = |m: String| decompress_error(Compression::Lz4, m);
    let truncated = |what: &str| err(format!("frame truncated in its {what}"));
    if data.len() < 7 {
        return Err(truncated("header"));
    }
    if data[..4] != [0x04, 0x22, 0x4d, 0x18] {
        return Err(err(format!("bad frame magic {:02x?}", &data[..4])));
    }
    let flg = data[4];
    let block_checksums = flg & 0x10 != 0;
    let content_size = flg & 0x08 != 0;
    let content_checksum = flg & 0x04 != 0;
    let dict_id = flg & 0x01 != 0;
    // magic, FLG, BD, optional content size and dictionary id, header checksum.
    let mut pos = 7 + if content_size { 8 } else { 0 } + if dict_id { 4 } else { 0 };
    if pos > data.len() {
        return Err(truncated("header"));
    }
    loop {
        let Some(word) = data.get(pos..pos + 4) else {
            return Err(truncated("block sizes (no end mark)"));
        };
        pos += 4;
        // The high bit flags a block stored uncompressed.
        // `word` is the 4 bytes `get` returned: the conversion cannot fail.
        let size = (u32::from_le_bytes(word.try_into().unwrap()) & 0x7fff_ffff) as usize;
        if size == 0 {
            break;
        }
        pos = pos
            .checked_add(size + if block_checksums { 4 } else { 0 })
            .filter(|&end| end <= data.len())
            .ok_or_else(|| truncated("blocks"))?;
    }
    if content_checksum {
        pos += 4;
        if pos > data.len() {
            return Err(truncated("content checksum"));
        }
    }
    Ok(pos)
}

/// Kafka writes snappy-java's framed stream, but snappy-java's reader falls back
/// to one raw snappy block when the magic is missing (or the data is shorter
/// than the header), and some clients write exactly that; so do we.
fn snappy_decompress(data: &[u8], limit: usize) -> Result<Vec<u8>, RecordError> {
    if data.is_empty() {
        // snappy-java treats an empty stream as empty content.
        return Ok(Vec::new());
    }
    if data.len() < XERIAL_HEADER.len() || !data.starts_with(XERIAL_MAGIC) {
        let mut out = Vec::new();
        snappy_raw_block(data, &mut out, limit)?;
        return Ok(out);
    }
    let mut out = Vec::new();
    let mut blocks = XerialReader::new(data);
    while let Some(block) = blocks.next_block()? {
        snappy_raw_block(block, &mut out, limit)?;
    }
    Ok(out)
}

/// Appends one raw snappy block to `out`, keeping `out` within `limit`; the
/// block's declared size is checked first so a forged one cannot make us allocate.
fn snappy_raw_block(block: &[u8], out: &mut Vec<u8>, limit: usize) -> Result<(), RecordError> {
    let codec = Compression::Snappy;
    let n = snappy_claimed_len(block, limit - out.len(), limit)?;
    let start = out.len();
    out.resize(start + n, 0);
    let written = snap::raw::Decoder::new()
        .decompress(block, &mut out[start..])
        .map_err(|e| decompress_error(codec, e))?;
    out.truncate(start + written);
    Ok(())
}

/// A raw snappy block's claimed inflated size: refused past `room` (the
/// output's `limit` less what is already out), and when the block's bytes
/// could not possibly inflate to it. Never trusted to size an allocation
/// before both checks.
fn snappy_claimed_len(block: &[u8], room: usize, limit: usize) -> Result<usize, RecordError> {
    let codec = Compression::Snappy;
    if block.is_empty() {
        return Ok(0);
    }
    let n = snap::raw::decompress_len(block).map_err(|e| decompress_error(codec, e))?;
    if n > room {
        return Err(RecordError::DecompressedTooLarge { codec, limit });
    }
    if n > block.len().saturating_mul(SNAPPY_MAX_RATIO) {
        return Err(decompress_error(
            codec,
            format!(
                "a {}-byte block claims to inflate to {n} bytes, more than snappy can encode in it",
                block.len()
            ),
        ));
    }
    Ok(n)
}

/// The largest claimed size among a snappy-java framed stream's blocks
/// (each checked), which is what reading it block by block holds.
fn xerial_largest_block(data: &[u8]) -> Result<usize, RecordError> {
    let mut r = XerialReader::new(data);
    let mut largest = 0;
    while let Some(block) = r.next_block()? {
        let n = snappy_claimed_len(block, MAX_DECOMPRESSED_SIZE, MAX_DECOMPRESSED_SIZE)?;
        largest = largest.max(n);
    }
    Ok(largest)
}

/// A snappy-java framed stream (`SnappyInputStream`), inflated one block at
/// a time.
struct XerialReader<'a> {
    data: &'a [u8],
    pos: usize,
    out: Vec<u8>,
    at: usize,
}

impl<'a> XerialReader<'a> {
    fn new(data: &'a [u8]) -> Self {
        XerialReader {
            data,
            pos: XERIAL_HEADER.len().min(data.len()),
            out: Vec::new(),
            at: 0,
        }
    }

    /// The next compressed block, stepping over concatenated stream headers.
    fn next_block(&mut self) -> Result<Option<&'a [u8]>, RecordError> {
        let codec = Compression::Snappy;
        let data = self.data;
        loop {
            if self.pos >= data.len() {
                return Ok(None);
            }
            // snappy-java reads a concatenated stream's header in place of a block length.
            if data[self.pos..].starts_with(XERIAL_MAGIC) {
                if data.len() - self.pos < XERIAL_HEADER.len() {
                    return Err(decompress_error(codec, "truncated stream header"));
                }
                self.pos += XERIAL_HEADER.len();
                continue;
            }
            let Some(len_bytes) = data.get(self.pos..self.pos + 4) else {
                return Err(decompress_error(
                    codec,
                    format!(
                        "{} stray bytes where a block length belongs",
                        data.len() - self.pos
                    ),
                ));
            };
            // `len_bytes` is 4 bytes long: the conversion cannot fail.
            let len = u32::from_be_bytes(len_bytes.try_into().unwrap()) as usize;
            self.pos += 4;
            let Some(block) = data.get(self.pos..).and_then(|rest| rest.get(..len)) else {
                return Err(decompress_error(
                    codec,
                    format!(
                        "block of {len} bytes runs past the end ({} left)",
                        data.len() - self.pos
                    ),
                ));
            };
            self.pos += len;
            return Ok(Some(block));
        }
    }
}

impl Read for XerialReader<'_> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        while self.at == self.out.len() {
            let Some(block) = self.next_block().map_err(std::io::Error::other)? else {
                return Ok(0);
            };
            self.out.clear();
            self.at = 0;
            snappy_raw_block(block, &mut self.out, MAX_DECOMPRESSED_SIZE)
                .map_err(std::io::Error::other)?;
        }
        let n = buf.len().min(self.out.len() - self.at);
        buf[..n].copy_from_slice(&self.out[self.at..self.at + n]);
        self.at += n;
        Ok(n)
    }
}

/// An LZ4 frame's maximum block size (its BD byte), 4 MiB if unreadable.
fn lz4_block_max(frame: &[u8]) -> usize {
    match frame.get(5).map(|bd| (bd >> 4) & 0x7) {
        Some(4) => 64 << 10,
        Some(5) => 256 << 10,
        Some(6) => 1 << 20,
        _ => 4 << 20,
    }
}

/// The window a zstd frame declares (its frame header), which is what its
/// decoder may hold; refused past the decoder's limit (2^27, zstd-jni's).
fn zstd_window(data: &[u8]) -> Result<usize, RecordError> {
    let codec = Compression::Zstd;
    let bad = |why: &str| Err(decompress_error(codec, why));
    if data.len() < 6 || data[..4] != [0x28, 0xb5, 0x2f, 0xfd] {
        // Skippable frames and garbage: the decoder says what is wrong.
        return Ok(0);
    }
    let fhd = data[4];
    let single_segment = fhd & 0x20 != 0;
    let window = if single_segment {
        // The window is the content size, whose field follows the dictionary id.
        let dict = [0usize, 1, 2, 4][(fhd & 3) as usize];
        let fcs = [1usize, 2, 4, 8][(fhd >> 6) as usize];
        let at = 5 + dict;
        let Some(b) = data.get(at..at + fcs) else {
            return bad("frame header truncated");
        };
        let mut v = 0u64;
        for (i, byte) in b.iter().enumerate() {
            v |= (*byte as u64) << (8 * i);
        }
        if fcs == 2 {
            v += 256;
        }
        usize::try_from(v).unwrap_or(usize::MAX)
    } else {
        let wd = data[5];
        let log = 10 + (wd >> 3) as u32;
        if log > 27 {
            return bad("frame window larger than 128 MiB");
        }
        let base = 1usize << log;
        base + (base / 8) * (wd & 7) as usize
    };
    Ok(window)
}

fn snappy_compress(data: &[u8]) -> Result<Vec<u8>, RecordError> {
    let mut out = Vec::with_capacity(XERIAL_HEADER.len() + data.len() / 2 + 32);
    out.extend_from_slice(XERIAL_HEADER);
    let mut encoder = snap::raw::Encoder::new();
    for chunk in data.chunks(XERIAL_BLOCK_SIZE) {
        let block = encoder
            .compress_vec(chunk)
            .map_err(|e| RecordError::Corrupt(format!("snappy compression failed: {e}")))?;
        out.extend_from_slice(&(block.len() as u32).to_be_bytes());
        out.extend_from_slice(&block);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn every_codec() -> [Compression; 5] {
        [
            Compression::None,
            Compression::Gzip,
            Compression::Snappy,
            Compression::Lz4,
            Compression::Zstd,
        ]
    }

    #[test]
    fn streams_inflate_what_decompress_does() {
        let data: Vec<u8> = (0..200_000u32)
            .flat_map(|i| (i % 251).to_le_bytes())
            .collect();
        for codec in every_codec() {
            let z = compress(codec, &data).unwrap();
            let mut out = Vec::new();
            stream(codec, &z).unwrap().read_to_end(&mut out).unwrap();
            assert_eq!(out, data, "{codec:?}");
            assert_eq!(decompress(codec, &z).unwrap(), data, "{codec:?}");
        }
        // librdkafka's raw snappy block.
        let raw = snap::raw::Encoder::new().compress_vec(&data).unwrap();
        let mut out = Vec::new();
        stream(Compression::Snappy, &raw)
            .unwrap()
            .read_to_end(&mut out)
            .unwrap();
        assert_eq!(out, data);
    }

    #[test]
    fn a_snappy_block_claiming_more_than_it_can_hold_is_refused_unread() {
        // A preamble claiming 64 MiB, then a few bytes: no allocation is made.
        let mut block = Vec::new();
        let mut n = 64u32 << 20;
        while n >= 0x80 {
            block.push((n as u8) | 0x80);
            n >>= 7;
        }
        block.push(n as u8);
        block.extend_from_slice(&[0u8; 100]);
        for r in [
            stream(Compression::Snappy, &block).map(drop),
            decompress(Compression::Snappy, &block).map(drop),
        ] {
            match r {
                Err(RecordError::Decompress { reason, .. }) => {
                    assert!(reason.contains("more than snappy can encode"), "{reason}")
                }
                other => panic!("refused, not {:?}", other.err()),
            }
        }
        // The same claim in a snappy-java framed stream.
        let mut framed = XERIAL_HEADER.to_vec();
        framed.extend_from_slice(&(block.len() as u32).to_be_bytes());
        framed.extend_from_slice(&block);
        assert!(stream(Compression::Snappy, &framed).is_err());
    }

    #[test]
    fn zstd_windows_are_read_from_the_frame_header() {
        let z = compress(Compression::Zstd, &[7u8; 1000]).unwrap();
        let w = zstd_window(&z).unwrap();
        assert!((1000..=1 << 21).contains(&w), "{w}");
        // A window descriptor of 2^31 is refused before a decoder exists.
        let mut big = vec![0x28, 0xb5, 0x2f, 0xfd, 0x00, (31 - 10) << 3];
        big.extend_from_slice(&[0; 8]);
        assert!(zstd_window(&big).is_err());
        assert!(stream(Compression::Zstd, &big).is_err());
    }

    /// Joins `t`, failing the test if it has not ended within 60 s: a
    /// deadlock fails, it does not hang the run.
    fn join_within<T>(what: &str, t: std::thread::JoinHandle<T>) -> T {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
        while !t.is_finished() {
            assert!(
                std::time::Instant::now() < deadline,
                "{what}: not done after 60 s"
            );
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        t.join().unwrap()
    }

    #[test]
    fn the_budget_makes_decompressions_wait_their_turn() {
        let held = reserve(DECOMPRESS_BUDGET);
        let waiter = std::thread::spawn(|| {
            let _r = reserve(1);
        });
        std::thread::sleep(std::time::Duration::from_millis(50));
        assert!(!waiter.is_finished(), "a reservation past the budget waits");
        drop(held);
        join_within("the waiting reservation", waiter);
        // Decompressions as large as the budget allows, from many threads
        // at once, all finish: none waits on another while holding a share.
        let z = compress(Compression::Zstd, &vec![1u8; 40 << 20]).unwrap();
        let threads: Vec<_> = (0..4)
            .map(|_| {
                let z = z.clone();
                std::thread::spawn(move || decompress(Compression::Zstd, &z).unwrap().len())
            })
            .collect();
        for t in threads {
            assert_eq!(join_within("a decompression", t), 40 << 20);
        }
    }
}
