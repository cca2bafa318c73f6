//! A global allocator that keeps a lying array length from aborting the
//! process.
//!
//! Why: `kafka-protocol` 0.18 decodes an array by first calling
//! `Vec::with_capacity(n)` with the element count read off the wire, before
//! it has checked that the bytes for `n` elements are there (upstream issue
//! "Bound Array / CompactArray decoder capacity by remaining buffer", still
//! open). A 12-byte request claiming two billion topics asks for hundreds of
//! GiB at once; the system allocator refuses, and Rust aborts on a refused
//! allocation: one client would take down the daemon, the mount with it.
//!
//! So allocations of [`HUGE`] bytes or more are mapped with `MAP_NORESERVE`:
//! no memory is committed until it is touched, and the kernel's heuristic
//! overcommit check (mode 0, the default, and mode 1) does not count such
//! mappings. The decoder then runs out of bytes after a few elements, returns
//! an error, and the mapping is unmapped having cost a few pages. Nothing the
//! daemon does legitimately allocates this much at once, so no real workload
//! changes path. Under strict overcommit (`vm.overcommit_memory=2`) the
//! mapping is refused as before.

use std::alloc::{GlobalAlloc, Layout, System};

/// Allocations from this size on are mapped lazily.
pub const HUGE: usize = 1 << 30;

/// The system allocator, but for allocations of [`HUGE`] bytes or more.
pub struct LazyHugeAlloc;

fn is_huge(layout: &Layout) -> bool {
    // mmap gives page alignment; anything stricter stays with the system.
    layout.size() >= HUGE && layout.align() <= 4096
}

// SAFETY: every block is returned to the allocator that made it, which is
// decided by the layout alone (the same layout comes back in dealloc).
unsafe impl GlobalAlloc for LazyHugeAlloc {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        if !is_huge(&layout) {
            // SAFETY: forwarded unchanged.
            return unsafe { System.alloc(layout) };
        }
        // SAFETY: an anonymous private mapping of the requested size.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                layout.size(),
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE,
                -1,
                0,
            )
        };
        if p == libc::MAP_FAILED {
            std::ptr::null_mut()
        } else {
            p.cast()
        }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        if !is_huge(&layout) {
            // SAFETY: forwarded unchanged.
            return unsafe { System.alloc_zeroed(layout) };
        }
        // SAFETY: fresh anonymous mappings are zero-filled.
        unsafe { self.alloc(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        if !is_huge(&layout) {
            // SAFETY: this block came from System (same layout rule).
            return unsafe { System.dealloc(ptr, layout) };
        }
        // SAFETY: this block is a mapping of exactly this size.
        unsafe { libc::munmap(ptr.cast(), layout.size()) };
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: the caller guarantees a valid layout for new_size.
        let new_layout = unsafe { Layout::from_size_align_unchecked(new_size, layout.align()) };
        if !is_huge(&layout) && !is_huge(&new_layout) {
            // SAFETY: both ends stay with System.
            return unsafe { System.realloc(ptr, layout, new_size) };
        }
        // SAFETY: a new block from the right allocator, then a copy of the
        // bytes both blocks hold, then the old block back where it came from.
        unsafe {
            let new = self.alloc(new_layout);
            if !new.is_null() {
                std::ptr::copy_nonoverlapping(ptr, new, layout.size().min(new_size));
                self.dealloc(ptr, layout);
            }
            new
        }
    }
}
