//! Loading a partition: its config, then its log on disk (Kafka's
//! `LogLoader`, in `local_log/loader.rs`), then what the partition keeps
//! around the log: the log start offset, the stream lengths, and producer
//! state, rebuilt from its latest snapshot and the batches after it.

use std::path::Path;
use std::sync::Arc;

use super::config::PartitionConfig;
use super::{LoadContext, PartitionLog};
use crate::storage::error::Result;
use crate::storage::health::Health;
use crate::storage::local_log::{LocalLog, LogId};
use crate::storage::stream::Stream;

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
        log.load_producer_state(&loaded.names)?;
        Ok(log)
    }

    /// The producer state at load: the latest good snapshot at or below the
    /// log end, then the batches after it, their headers walked by the local
    /// log straight into producer state's replay.
    fn load_producer_state(&self, names: &[String]) -> Result<()> {
        let bases = self.local.segment_bases();
        let Some(from) = self.producers.load(names, &bases, self.log_end_offset())? else {
            return Ok(());
        };
        let mut replay = self.producers.replay(from);
        self.local
            .walk_batch_headers(from, |header| replay.apply(header))?;
        replay.finish();
        Ok(())
    }
}
