//! When a directory another process writes must be listed again: the one
//! rule both the data directory and each partition directory follow on a
//! read-only mount (`manager/follow_dir.rs`, `local_log/follow_log.rs`).

use std::time::{Duration, Instant, SystemTime};

/// A directory timestamp may be coarse (a jiffy, or a second on some
/// filesystems): a change made in the same tick as a listing leaves the
/// mtime where the listing saw it. Until a listing has run this long after
/// the mtime it saw, the directory is listed again now and then.
const SETTLE: Duration = Duration::from_secs(2);
/// How often an unsettled directory is listed again.
const RECHECK: Duration = Duration::from_millis(100);

/// What a directory looked like when it was last listed.
#[derive(Debug)]
pub(crate) struct DirWatch {
    /// The mtime seen just before the last listing.
    seen: Option<SystemTime>,
    /// When that listing started (the wall clock, as mtimes are).
    listed_at: SystemTime,
    checked: Option<Instant>,
}

impl Default for DirWatch {
    fn default() -> Self {
        DirWatch {
            seen: None,
            listed_at: SystemTime::UNIX_EPOCH,
            checked: None,
        }
    }
}

impl DirWatch {
    /// Whether the directory, whose mtime is now `mtime`, must be listed again.
    pub fn must_list(&mut self, mtime: SystemTime) -> bool {
        let Some(seen) = self.seen else {
            return true;
        };
        if seen != mtime {
            return true;
        }
        let settled = self.listed_at >= seen + SETTLE;
        let now = Instant::now();
        if settled || self.checked.is_some_and(|c| now < c + RECHECK) {
            return false;
        }
        self.checked = Some(now);
        true
    }

    /// A listing that started at `at`, when the mtime was `mtime`.
    pub fn listed(&mut self, mtime: SystemTime, at: SystemTime) {
        self.seen = Some(mtime);
        self.listed_at = at;
        self.checked = Some(Instant::now());
    }

    /// The next look lists the directory whatever its mtime.
    pub fn forget(&mut self) {
        self.seen = None;
    }
}
