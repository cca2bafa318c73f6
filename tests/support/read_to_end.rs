//! A whole file read through the tree as the kernel reads it: one request
//! of a set size after another, until one comes back empty.

use commitfs::fs::Tree;

/// The file open as `fh`, from offset 0, in `chunk`-byte reads, each through
/// the tree `tree` gives then; the handle is released either way. An error
/// is its errno, for comparing with a model's.
pub fn read_to_end<'a>(tree: impl Fn() -> &'a Tree, fh: u64, chunk: u32) -> Result<Vec<u8>, i32> {
    let mut out = Vec::new();
    // One buffer for every request, as the kernel's: `read_into` then
    // neither allocates nor zeroes it per request.
    let mut buf = Vec::new();
    loop {
        let tree = tree();
        let n = match tree.read_into(fh, out.len() as u64, chunk, &mut buf) {
            Ok(n) => n,
            Err(e) => {
                let _ = tree.release(fh);
                return Err(e.errno);
            }
        };
        if n == 0 {
            break;
        }
        out.extend_from_slice(&buf[..n]);
    }
    tree().release(fh).map_err(|e| e.errno)?;
    Ok(out)
}
