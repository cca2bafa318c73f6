//! The codecs of compressed v2 batches, in the exact stream formats Kafka's Java
//! client and broker write (`org.apache.kafka.common.compress.*`), so batches we
//! write are read by Kafka and the other way round.
//!
//! A compressed batch holds its whole records section as one compressed stream.

use std::io::{Read, Write};

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
    match codec {
        Compression::None => {
            if data.len() > limit {
                return Err(RecordError::DecompressedTooLarge { codec, limit });
            }
            Ok(data.to_vec())
        }
        // Java's GZIPInputStream reads concatenated members, so a multi-member
        // stream is valid Kafka data even though Kafka itself writes one member.
        Compression::Gzip => read_capped(codec, flate2::read::MultiGzDecoder::new(data), limit),
        Compression::Snappy => snappy_decompress(data, limit),
        Compression::Lz4 => {
            let frame = &data[..lz4_frame_len(data)?];
            read_capped(codec, lz4_flex::frame::FrameDecoder::new(frame), limit)
        }
        Compression::Zstd => {
            // The decoder's default window limit (2^27, as zstd-jni's) is kept:
            // Kafka at high levels writes frames that need it, and the window is
            // bounded, unlike the output, which `read_capped` bounds.
            let decoder = zstd::stream::read::Decoder::with_buffer(data)
                .map_err(|e| decompress_error(codec, e))?;
            read_capped(codec, decoder, limit)
        }
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
    let codec = Compression::Snappy;
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
    let mut pos = XERIAL_HEADER.len();
    while pos < data.len() {
        let Some(len_bytes) = data.get(pos..pos + 4) else {
            return Err(decompress_error(
                codec,
                format!(
                    "{} stray bytes where a block length belongs",
                    data.len() - pos
                ),
            ));
        };
        // snappy-java reads a concatenated stream's header in place of a block length.
        if data[pos..].starts_with(XERIAL_MAGIC) {
            if data.len() - pos < XERIAL_HEADER.len() {
                return Err(decompress_error(codec, "truncated stream header"));
            }
            pos += XERIAL_HEADER.len();
            continue;
        }
        // `len_bytes` is 4 bytes long: the conversion cannot fail.
        let len = u32::from_be_bytes(len_bytes.try_into().unwrap()) as usize;
        pos += 4;
        let Some(block) = data.get(pos..).and_then(|rest| rest.get(..len)) else {
            return Err(decompress_error(
                codec,
                format!(
                    "block of {len} bytes runs past the end ({} left)",
                    data.len() - pos
                ),
            ));
        };
        pos += len;
        snappy_raw_block(block, &mut out, limit)?;
    }
    Ok(out)
}

/// Appends one raw snappy block to `out`, keeping `out` within `limit`; the
/// block's declared size is checked first so a forged one cannot make us allocate.
fn snappy_raw_block(block: &[u8], out: &mut Vec<u8>, limit: usize) -> Result<(), RecordError> {
    let codec = Compression::Snappy;
    let n = snap::raw::decompress_len(block).map_err(|e| decompress_error(codec, e))?;
    if n > limit - out.len() {
        return Err(RecordError::DecompressedTooLarge { codec, limit });
    }
    let start = out.len();
    out.resize(start + n, 0);
    let written = snap::raw::Decoder::new()
        .decompress(block, &mut out[start..])
        .map_err(|e| decompress_error(codec, e))?;
    out.truncate(start + written);
    Ok(())
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
