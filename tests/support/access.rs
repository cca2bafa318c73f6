//! The tree's root inode and the two access modes the tree tests open
//! files with, as the kernel hands them over.

use commitfs::fs::AccessMode;

pub const ROOT: u64 = 1;
pub const READ: AccessMode = AccessMode {
    read: true,
    write: false,
};
pub const WRITE: AccessMode = AccessMode {
    read: false,
    write: true,
};
