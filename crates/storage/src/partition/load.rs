//! Loading a partition: its config, then its log on disk (Kafka's
//! `LogLoader`, in `local_log/loader.rs`), then what the partition keeps
//! around the log: the log start offset, the stream lengths, and producer
//! state, rebuilt from its latest snapshot and the batches after it.

use std::path::Path;
use std::sync::Arc;

use super::overrides::PartitionConfig;
use super::{LoadContext, PartitionLog};
use crate::error::Result;
use crate::health::Health;
use crate::local_log::{LocalLog, LogId};
use crate::producer_state::CompletedTxn;
use crate::stream::Stream;
use commitfs_record::state_files::AbortedTxn;

impl PartitionLog {
    /// Loads a partition directory. A load that fails gives a partition
    /// offline from the start, with the failure as its cause, so that the
    /// other partitions mount; a remount tries again.
    pub(crate) fn load(dir: &Path, ctx: &LoadContext) -> Result<Arc<PartitionLog>> {
        let id = LogId::of(dir)?;
        let health = Arc::new(Health::new(&id.name));
        match Self::load_now(dir, ctx, &id, &health) {
            Ok(log) => Ok(log),
            Err(e) => {
                health.fail("loading the log", &e);
                Self::offline_placeholder(dir, ctx, health)
            }
        }
    }

    fn load_now(
        dir: &Path,
        ctx: &LoadContext,
        id: &LogId,
        health: &Arc<Health>,
    ) -> Result<Arc<PartitionLog>> {
        let config = PartitionConfig::load(dir, ctx.defaults, &id.name);
        let checkpointed_start = ctx
            .log
            .checkpoints
            .log_start_offset(&id.topic, id.partition);
        let empty_start = checkpointed_start.unwrap_or(0).max(0);
        let loaded = LocalLog::load(dir, &ctx.log, &config.current(), health, empty_start)?;
        let local = loaded.log;
        let first_base = local.first_segment_base().unwrap_or(0);
        let log_start = checkpointed_start
            .unwrap_or(first_base)
            .max(first_base)
            .min(local.log_end_offset());
        // Stream lengths of segments that recovery may have changed are recomputed.
        let stream = Stream::load(dir, loaded.recovered_from);
        let log = Self::new_arc(local, ctx, config, log_start, stream, health.clone());
        log.load_producer_state(&loaded.names, loaded.recovered_from)?;
        Ok(log)
    }

    /// The producer state at load: the latest good snapshot at or below the
    /// log end, then the batches after it, their headers walked by the local
    /// log straight into producer state's replay.
    fn load_producer_state(&self, names: &[String], recovered_from: Option<i64>) -> Result<()> {
        // A read-only partition rebuilds no `.txnindex`: it reads them as
        // the writer left them, and replays from the latest snapshot.
        let recovered_from = recovered_from.filter(|_| self.local.writable());
        let completed = self.replay_producer_state(names, recovered_from)?;
        // Without a replay (a partition that never had a producer id, so
        // no snapshot) nothing is known to rebuild them from: they stay.
        if let (Some(from), Some(completed)) = (recovered_from, &completed) {
            self.rebuild_txn_indexes(from, completed)?;
        }
        // Kafka's `rebuildProducerState` ends with a snapshot at the log
        // end: what was replayed is not replayed again, and a producer
        // state that the replay found (an open transaction, a sequence)
        // is not lost when the snapshots it came from went with the
        // segments recovery removed.
        if completed.is_some() {
            self.producers.take_snapshot(self.log_end_offset())?;
        }
        self.publish_first_unstable();
        Ok(())
    }

    /// Producer state from its snapshot and the batches after it; the
    /// transactions the replayed markers complete, with their last stable
    /// offsets. After a recovery from `recovered_from`, the snapshot is
    /// one at or below it, so that every marker of the recovered segments
    /// is replayed.
    pub(super) fn replay_producer_state(
        &self,
        names: &[String],
        recovered_from: Option<i64>,
    ) -> Result<Option<Vec<(CompletedTxn, i64)>>> {
        let bases = self.local.segment_bases();
        let at_most = recovered_from.unwrap_or(i64::MAX);
        let Some(from) = self
            .producers
            .load(names, &bases, self.log_end_offset(), at_most)?
        else {
            return Ok(None);
        };
        let mut completed = Vec::new();
        let mut replay = self.producers.replay(from);
        self.local
            .walk_batches_and_markers(from, |header, marker| {
                match marker {
                    Some(marker) => completed.extend(replay.apply_marker(header, marker)),
                    // An empty control batch, whose transaction the cleaner
                    // removed, changes nothing (Kafka's `appendEmptyControlBatch`).
                    None if header.is_control() => {}
                    None => replay.apply(header),
                }
            })?;
        replay.finish();
        Ok(Some(completed))
    }

    /// Kafka's `LogSegment.recover` of a transaction index: each segment
    /// from `from` on loses its entries and gets one for each abort whose
    /// marker it holds, as the replay found them (a marker cut away by the
    /// recovery leaves no entry behind).
    fn rebuild_txn_indexes(&self, from: i64, completed: &[(CompletedTxn, i64)]) -> Result<()> {
        let segs = self.local.segments_from(from);
        for (i, seg) in segs.iter().enumerate() {
            if seg.base_offset < from {
                continue;
            }
            let next = segs.get(i + 1).map_or(i64::MAX, |s| s.base_offset);
            seg.txn_index().reset()?;
            for (txn, lso) in completed {
                if txn.aborted && (seg.base_offset..next).contains(&txn.last_offset) {
                    seg.txn_index().append(AbortedTxn {
                        version: 0,
                        producer_id: txn.producer_id,
                        first_offset: txn.first_offset,
                        last_offset: txn.last_offset,
                        last_stable_offset: *lso,
                    })?;
                }
            }
        }
        Ok(())
    }
}
