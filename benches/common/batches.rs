//! The lookup oracle of the storage bench and the mount bench
//! (`examples/bench_mount.rs` includes this file by path): every batch's
//! place in the `.log` files, found by walking the framing without the
//! library.

use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::PathBuf;

use commitfs::record::peek_frame;

/// One batch in a `.log`.
#[derive(Clone, Copy)]
pub struct BatchLoc {
    pub last_offset: i64,
    pub file: usize,
    pub pos: u64,
    pub size: usize,
}

/// Walks the batch framing of every `.log` file with large plain reads.
/// A file whose rest holds no whole batch has a torn tail: with
/// `torn_tail_ok` the walk leaves that file there, not its to judge;
/// without it the tail fails the walk.
pub fn walk_batches(files: &[PathBuf], torn_tail_ok: bool) -> Vec<BatchLoc> {
    const CHUNK: usize = 8 << 20;
    let mut out = Vec::new();
    let mut buf = vec![0u8; CHUNK];
    for (fi, path) in files.iter().enumerate() {
        let f = File::open(path).expect("open log");
        let len = f.metadata().expect("stat").len();
        let mut pos = 0u64;
        while pos < len {
            let want = (CHUNK as u64).min(len - pos) as usize;
            f.read_exact_at(&mut buf[..want], pos).expect("read log");
            let mut off = 0usize;
            while off + 61 <= want {
                let frame = peek_frame(&buf[off..want]).expect("a v2 batch");
                if off + frame.size > want {
                    break;
                }
                let last_delta =
                    i32::from_be_bytes(buf[off + 23..off + 27].try_into().unwrap()) as i64;
                out.push(BatchLoc {
                    last_offset: frame.base_offset + last_delta,
                    file: fi,
                    pos: pos + off as u64,
                    size: frame.size,
                });
                off += frame.size;
            }
            if off == 0 && torn_tail_ok {
                break;
            }
            assert!(off > 0, "batch larger than the walk chunk");
            pos += off as u64;
        }
    }
    out
}
