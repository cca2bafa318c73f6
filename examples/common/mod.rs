//! What the benchmarks share: which `commitfs` binary they measure.

use std::path::PathBuf;

/// The `commitfs` built beside the running example (`target/release/`), or
/// `COMMITFS_BIN` when set.
pub fn commitfs_bin() -> PathBuf {
    if let Some(b) = std::env::var_os("COMMITFS_BIN") {
        return PathBuf::from(b);
    }
    std::env::current_exe()
        .ok()
        .and_then(|p| Some(p.parent()?.parent()?.join("commitfs")))
        .filter(|p| p.exists())
        .unwrap_or_else(|| PathBuf::from("target/release/commitfs"))
}
