//! What every handler shares: the storage, the settings, and who this
//! broker says it is.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use commitfs_storage::producer_ids::ProducerIds;
use commitfs_storage::{LogManager, PartitionLog};

use super::acl::{AuthHelper, Authorizer};
use super::auth::CredentialStore;
use super::config::{Endpoint, Listener, ListenerConfig};
use super::group::coordinator::GroupCoordinator;
use super::group::offsets::OFFSETS_TOPIC;
use super::txn::coordinator::TxnCoordinator;
use super::txn::log::TxnStateTopic;
use super::txn::state::TxnStateManager;

pub struct Broker {
    pub mgr: Arc<LogManager>,
    pub config: ListenerConfig,
    /// What Metadata advertises, one per listener in the order of
    /// `listeners` (a listener's actual port if it bound port 0).
    pub advertised: Vec<Listener>,
    pub cluster_id: String,
    /// The group coordinator (every group's: there is one broker).
    pub groups: Arc<GroupCoordinator>,
    /// InitProducerId's ids, unique across restarts.
    pub producer_ids: ProducerIds,
    /// The transaction coordinator (every transactional id's).
    pub txns: TxnCoordinator,
    /// The users' SCRAM credentials (`commitfs.scram-credentials`).
    pub scram: Arc<CredentialStore>,
    /// The ACLs and their decisions; `None` without `authorizer.class.name`:
    /// everything is allowed.
    pub authorizer: Option<Authorizer>,
    stopping: AtomicBool,
}

impl Broker {
    /// The broker over `mgr`; groups and committed offsets are read back
    /// from `__consumer_offsets` here, then transactional ids from
    /// `__transaction_state`, and the transactions left prepared at the
    /// last stop are completed (their markers may go to
    /// `__consumer_offsets`, so the groups are loaded first).
    pub fn new(
        mgr: Arc<LogManager>,
        config: ListenerConfig,
        advertised: Vec<Listener>,
        scram: Arc<CredentialStore>,
    ) -> Broker {
        let cluster_id = cluster_id(&mgr);
        let groups = Arc::new(GroupCoordinator::new(mgr.clone(), config.groups.clone()));
        let producer_ids = ProducerIds::new(mgr.dir(), mgr.read_only());
        let states =
            TxnStateManager::load(TxnStateTopic::new(mgr.clone(), config.txn_state_partitions));
        let held = (states.lock().ids.values())
            .map(|m| m.current.producer_id.max(m.current.prev_producer_id))
            .max();
        producer_ids.ensure_above(held.unwrap_or(-1));
        let txns = TxnCoordinator::new(states, mgr.clone(), config.txn_max_timeout_ms);
        let offsets = groups.clone();
        txns.on_marker(Box::new(move |topic, _, producer_id, commit| {
            if topic == OFFSETS_TOPIC {
                offsets.complete_txn(producer_id, commit);
            }
        }));
        if !mgr.read_only() {
            txns.complete_prepared_at_load(commitfs_storage::now_ms());
        }
        Broker {
            groups,
            producer_ids,
            txns,
            scram,
            authorizer: None,
            mgr,
            config,
            advertised,
            cluster_id,
            stopping: AtomicBool::new(false),
        }
    }

    /// The address the clients of `listener` are told to connect to.
    pub fn advertised(&self, listener: usize) -> &Endpoint {
        let i = listener.min(self.advertised.len().saturating_sub(1));
        &self.advertised[i].endpoint
    }

    pub fn node_id(&self) -> i32 {
        self.config.node_id
    }

    /// Partition `index` of `topic`, if it exists.
    pub fn partition(&self, topic: &str, index: i32) -> Option<Arc<PartitionLog>> {
        if index < 0 {
            return None;
        }
        self.mgr.partition(&format!("{topic}-{index}"))
    }

    pub fn stopping(&self) -> bool {
        self.stopping.load(Ordering::Acquire)
    }

    /// Marks the broker as stopping: long polls end at once. Called by the
    /// server's shutdown (and by the fuzz target, so no request waits).
    pub fn stop(&self) {
        self.stopping.store(true, Ordering::Release);
        // Long polls wake up and see the flag; group waits see it within a tick.
        self.mgr.appends().notify();
    }
}

impl AuthHelper for Broker {
    fn authorizer(&self) -> Option<&Authorizer> {
        self.authorizer.as_ref()
    }
}

/// The data directory's `cluster.id` from Kafka's `meta.properties` when there
/// is one, so a broker's directory keeps its identity; else a fixed name.
fn cluster_id(mgr: &LogManager) -> String {
    std::fs::read_to_string(mgr.dir().join("meta.properties"))
        .ok()
        .and_then(|t| {
            t.lines()
                .filter_map(|l| l.split_once('='))
                .find(|(k, _)| k.trim() == "cluster.id")
                .map(|(_, v)| v.trim().to_string())
        })
        .filter(|v| !v.is_empty())
        .unwrap_or_else(|| "commitfs".to_string())
}
