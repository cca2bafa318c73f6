//! Producer ids for InitProducerId, unique across restarts: ids are handed
//! out from blocks of [`BLOCK_SIZE`], as Kafka's controller hands out
//! `ProducerIdsRecord` blocks, and the end of the block in use is saved
//! (written whole, fsynced) in the data directory root before any id of it
//! is given. A restart starts at the saved end, so the ids of a block not
//! used up are skipped, never given twice.
//!
//! The file, [`PRODUCER_IDS_FILE`], is commitfs's own (Kafka keeps the same
//! fact in its metadata log): one line, the first id no block has taken.

use std::path::{Path, PathBuf};

use log::{info, warn};
use parking_lot::Mutex;

use super::checkpoint::write_atomically;
use super::error::{Result, StorageError};

pub const PRODUCER_IDS_FILE: &str = "commitfs.producer-ids";
/// Kafka's `ProducerIdsBlock.PRODUCER_ID_BLOCK_SIZE`.
pub const BLOCK_SIZE: i64 = 1000;

pub struct ProducerIds {
    path: PathBuf,
    read_only: bool,
    /// (next id to give, end of the saved block).
    state: Mutex<Option<(i64, i64)>>,
}

impl ProducerIds {
    pub fn new(data_dir: &Path, read_only: bool) -> ProducerIds {
        ProducerIds {
            path: data_dir.join(PRODUCER_IDS_FILE),
            read_only,
            state: Mutex::new(None),
        }
    }

    /// The next producer id. A new block is saved first when the one in use
    /// is spent (or none was taken since the start).
    pub fn next(&self) -> Result<i64> {
        if self.read_only {
            return Err(StorageError::ReadOnly);
        }
        let mut state = self.state.lock();
        let (next, end) = match *state {
            Some((next, end)) if next < end => (next, end),
            Some((_, end)) => self.take_block(end)?,
            None => self.take_block(self.saved_end())?,
        };
        *state = Some((next + 1, end));
        Ok(next)
    }

    /// Makes every id given from now on greater than `taken`: the largest
    /// id some other record holds (the transaction coordinator's state),
    /// so that ids stay unique even when this file was lost or is behind.
    pub fn ensure_above(&self, taken: i64) {
        if taken < 0 {
            return;
        }
        let mut state = self.state.lock();
        let start = match *state {
            Some((next, _)) => next,
            None => self.saved_end(),
        };
        if start > taken {
            return;
        }
        warn!(
            "{} would give producer id {start}, which a transactional id already holds \
             (up to {taken}); ids start past it",
            self.path.display()
        );
        // The block in use (if any) is given up: the next id takes a block
        // from past `taken`.
        *state = Some((taken + 1, taken + 1));
    }

    /// The first id no block has taken, from the file (0 without one).
    fn saved_end(&self) -> i64 {
        match std::fs::read_to_string(&self.path) {
            Ok(text) => match text.trim().parse::<i64>() {
                Ok(n) if n >= 0 => n,
                _ => {
                    // Ids before the damage may have been given: start far past
                    // anything a block could have reached since the file was
                    // last written whole.
                    warn!(
                        "{} is not a producer id ({text:?}); starting a fresh range",
                        self.path.display()
                    );
                    i64::MAX / 2
                }
            },
            Err(_) => 0,
        }
    }

    fn take_block(&self, start: i64) -> Result<(i64, i64)> {
        // 2^63 ids at a thousand a second last longer than anything here.
        let end = start.saturating_add(BLOCK_SIZE);
        write_atomically(&self.path, format!("{end}\n").as_bytes())?;
        info!("Took producer id block [{start}, {end})");
        Ok((start, end))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_unique_across_restarts() {
        let dir = tempfile::tempdir().unwrap();
        let a = ProducerIds::new(dir.path(), false);
        assert_eq!(a.next().unwrap(), 0);
        assert_eq!(a.next().unwrap(), 1);
        drop(a);
        let b = ProducerIds::new(dir.path(), false);
        assert_eq!(b.next().unwrap(), BLOCK_SIZE);
        for _ in 0..BLOCK_SIZE - 1 {
            b.next().unwrap();
        }
        assert_eq!(b.next().unwrap(), 2 * BLOCK_SIZE);
        assert!(ProducerIds::new(dir.path(), true).next().is_err());
    }

    #[test]
    fn ids_start_past_one_already_held() {
        let dir = tempfile::tempdir().unwrap();
        let a = ProducerIds::new(dir.path(), false);
        a.ensure_above(-1);
        assert_eq!(a.next().unwrap(), 0);
        a.ensure_above(0);
        assert_eq!(
            a.next().unwrap(),
            1,
            "an id below the next is no reason to move"
        );
        a.ensure_above(5000);
        assert_eq!(a.next().unwrap(), 5001);
        drop(a);
        let b = ProducerIds::new(dir.path(), false);
        assert_eq!(
            b.next().unwrap(),
            5001 + BLOCK_SIZE,
            "the block past it was saved"
        );
        let other = tempfile::tempdir().unwrap();
        let c = ProducerIds::new(other.path(), false);
        c.ensure_above(41);
        assert_eq!(c.next().unwrap(), 42, "with no file at all");
    }
}
