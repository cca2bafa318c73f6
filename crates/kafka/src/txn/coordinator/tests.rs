//! The coordinator's answers, in the order Kafka's `TransactionCoordinator`
//! checks (its `TransactionCoordinatorTest` cases at transactions version
//! 0), over real partitions: the markers an EndTxn writes are read back
//! through the partitions' last stable offsets and `.txnindex` files.

use std::cell::Cell;

use super::*;
use crate::txn::log::TxnStateTopic;
use commitfs_storage::{LogConfig, OpenOptions, PartitionLog};

const NOW: i64 = 1_700_000_000_000;

struct Fixture {
    _tmp: tempfile::TempDir,
    mgr: Arc<LogManager>,
    coord: TxnCoordinator,
    next: Cell<i64>,
}

impl Fixture {
    fn new() -> Fixture {
        let tmp = tempfile::tempdir().unwrap();
        let mgr = Arc::new(
            LogManager::open(
                tmp.path(),
                LogConfig::default(),
                OpenOptions::without_cleaner_threads(),
            )
            .unwrap(),
        );
        for p in ["t-0", "t-1", "u-0"] {
            mgr.create_partition(p).unwrap();
        }
        let states = TxnStateManager::load(TxnStateTopic::new(mgr.clone(), 1));
        let coord = TxnCoordinator::new(states, mgr.clone(), MAX_TIMEOUT_MS);
        Fixture {
            _tmp: tmp,
            mgr,
            coord,
            next: Cell::new(1000),
        }
    }

    fn init(&self, id: &str, expected: (i64, i16)) -> Granted {
        let next = || {
            let n = self.next.get();
            self.next.set(n + 1);
            Ok(n)
        };
        self.coord
            .init_producer_id(id, 60_000, expected, NOW, &next)
    }

    fn log(&self, name: &str) -> Arc<PartitionLog> {
        self.mgr.partition(name).unwrap()
    }

    fn state(&self, id: &str) -> TxnState {
        self.coord.states.lock().ids[id].current.state
    }
}

fn parts(names: &[(&str, i32)]) -> BTreeSet<TopicPartition> {
    names.iter().map(|(t, p)| (t.to_string(), *p)).collect()
}

/// A transactional batch of one record from `pid` at `epoch`.
fn txn_batch(log: &PartitionLog, pid: i64, epoch: i16, seq: i32) {
    let mut b = Vec::new();
    commitfs_record::encode_batch(&mut b, 0, NOW, &[commitfs_record::NewRecord::value(b"v")]);
    b[21..23].copy_from_slice(&0x10i16.to_be_bytes());
    b[43..51].copy_from_slice(&pid.to_be_bytes());
    b[51..53].copy_from_slice(&epoch.to_be_bytes());
    b[53..57].copy_from_slice(&seq.to_be_bytes());
    let crc = commitfs_record::compute_crc(&b);
    b[17..21].copy_from_slice(&crc.to_be_bytes());
    log.append_transactional(&b).unwrap();
}

#[test]
fn init_producer_id_checks_and_epoch_bumps() {
    let f = Fixture::new();
    let none = (NO_PRODUCER_ID, NO_PRODUCER_EPOCH);
    assert_eq!(f.init("", none), Err(ResponseError::InvalidRequest));
    assert_eq!(f.init("a", (5, -1)), Err(ResponseError::InvalidRequest));
    let next = || Ok(1);
    for timeout in [0, -1, MAX_TIMEOUT_MS + 1] {
        assert_eq!(
            f.coord.init_producer_id("a", timeout, none, NOW, &next),
            Err(ResponseError::InvalidTransactionTimeout)
        );
    }
    assert_eq!(f.init("a", none), Ok((1000, 0)));
    assert_eq!(f.init("a", none), Ok((1000, 1)));
    // KIP-360: the current epoch bumps; the last one is a retry of that.
    assert_eq!(f.init("a", (1000, 1)), Ok((1000, 2)));
    assert_eq!(f.init("a", (1000, 1)), Ok((1000, 2)));
    assert_eq!(f.init("a", (1000, 0)), Err(ResponseError::ProducerFenced));
    assert_eq!(f.init("a", (999, 2)), Err(ResponseError::ProducerFenced));
    assert_eq!(f.state("a"), TxnState::Empty);
}

#[test]
fn a_transaction_commits_and_aborts_through_its_markers() {
    let f = Fixture::new();
    let (pid, epoch) = f.init("app", (NO_PRODUCER_ID, NO_PRODUCER_EPOCH)).unwrap();
    let both = parts(&[("t", 0), ("u", 0)]);
    assert_eq!(
        f.coord.add_partitions("app", pid + 1, epoch, &both, NOW),
        Err(ResponseError::InvalidProducerIdMapping)
    );
    assert_eq!(
        f.coord.add_partitions("app", pid, epoch + 1, &both, NOW),
        Err(ResponseError::ProducerFenced)
    );
    assert_eq!(
        f.coord.end_txn("app", pid, epoch, true, NOW),
        Err(ResponseError::InvalidTxnState),
        "nothing open"
    );
    f.coord
        .add_partitions("app", pid, epoch, &both, NOW)
        .unwrap();
    assert_eq!(f.state("app"), TxnState::Ongoing);
    txn_batch(&f.log("t-0"), pid, epoch, 0);
    txn_batch(&f.log("u-0"), pid, epoch, 0);
    assert_eq!(f.log("t-0").last_stable_offset(), 0);
    f.coord.end_txn("app", pid, epoch, true, NOW).unwrap();
    assert_eq!(f.state("app"), TxnState::CompleteCommit);
    for p in ["t-0", "u-0"] {
        let log = f.log(p);
        assert_eq!(
            (log.last_stable_offset(), log.high_watermark()),
            (2, 2),
            "{p}"
        );
        assert_eq!(log.aborted_transactions(0, 2).unwrap(), vec![]);
    }
    // A retried commit is answered; an abort of it is not a valid state.
    assert_eq!(f.coord.end_txn("app", pid, epoch, true, NOW), Ok(()));
    assert_eq!(
        f.coord.end_txn("app", pid, epoch, false, NOW),
        Err(ResponseError::InvalidTxnState)
    );
    assert_eq!(f.log("t-0").high_watermark(), 2, "no second marker");

    // The next transaction aborts: its partition's index holds it.
    f.coord
        .add_partitions("app", pid, epoch, &parts(&[("t", 0)]), NOW)
        .unwrap();
    txn_batch(&f.log("t-0"), pid, epoch, 1);
    f.coord.end_txn("app", pid, epoch, false, NOW).unwrap();
    assert_eq!(f.state("app"), TxnState::CompleteAbort);
    let aborted = f.log("t-0").aborted_transactions(0, 4).unwrap();
    assert_eq!(
        aborted
            .iter()
            .map(|a| (a.producer_id, a.first_offset, a.last_offset))
            .collect::<Vec<_>>(),
        vec![(pid, 2, 3)]
    );
    assert_eq!(f.log("u-0").high_watermark(), 2, "not in this transaction");
}

#[test]
fn add_partitions_checks_each_partition_first() {
    let f = Fixture::new();
    assert_eq!(
        f.coord.check_partitions(&parts(&[("t", 0), ("u", 0)])),
        None
    );
    let checked = f
        .coord
        .check_partitions(&parts(&[("t", 0), ("nope", 0), ("__consumer_offsets", 0)]))
        .unwrap();
    let code = |t: &str| checked.iter().find(|(tp, _)| tp.0 == t).unwrap().1;
    assert_eq!(code("t"), ResponseError::OperationNotAttempted);
    assert_eq!(code("nope"), ResponseError::UnknownTopicOrPartition);
    assert_eq!(
        code("__consumer_offsets"),
        ResponseError::TopicAuthorizationFailed
    );
}

/// A second producer's InitProducerId fences the first one's open
/// transaction: it is aborted under a bumped epoch, the caller is told to
/// retry, and its retry gets the epoch after that.
#[test]
fn init_during_an_open_transaction_fences_and_aborts_it() {
    let f = Fixture::new();
    let (pid, epoch) = f.init("app", (NO_PRODUCER_ID, NO_PRODUCER_EPOCH)).unwrap();
    f.coord
        .add_partitions("app", pid, epoch, &parts(&[("t", 1)]), NOW)
        .unwrap();
    txn_batch(&f.log("t-1"), pid, epoch, 0);
    assert_eq!(
        f.init("app", (NO_PRODUCER_ID, NO_PRODUCER_EPOCH)),
        Err(ResponseError::ConcurrentTransactions)
    );
    assert_eq!(f.state("app"), TxnState::CompleteAbort);
    let log = f.log("t-1");
    assert_eq!((log.last_stable_offset(), log.high_watermark()), (2, 2));
    assert_eq!(log.aborted_transactions(0, 2).unwrap().len(), 1);
    // The zombie's commit is fenced; the retry gets epoch + 2.
    assert_eq!(
        f.coord.end_txn("app", pid, epoch, true, NOW),
        Err(ResponseError::ProducerFenced)
    );
    assert_eq!(
        f.init("app", (NO_PRODUCER_ID, NO_PRODUCER_EPOCH)),
        Ok((pid, epoch + 2))
    );
}

/// The states come back after a restart.
#[test]
fn the_states_are_loaded_again() {
    let f = Fixture::new();
    let (pid, epoch) = f.init("app", (NO_PRODUCER_ID, NO_PRODUCER_EPOCH)).unwrap();
    f.coord
        .add_partitions("app", pid, epoch, &parts(&[("t", 0)]), NOW)
        .unwrap();
    let states = TxnStateManager::load(TxnStateTopic::new(f.mgr.clone(), 1));
    let inner = states.lock();
    let m = &inner.ids["app"];
    assert_eq!(
        (
            m.current.state,
            m.current.producer_id,
            m.current.producer_epoch
        ),
        (TxnState::Ongoing, pid, epoch)
    );
    assert_eq!(m.current.partitions, parts(&[("t", 0)]));
}

/// A transaction whose Prepare record is written but whose markers are
/// not (a stop in between, or a partition that failed): the next EndTxn
/// of the id, or the next start, writes them and completes it.
#[test]
fn a_prepared_transaction_is_completed_by_a_retry_or_at_the_next_start() {
    let f = Fixture::new();
    let prepare_only = |id: &str, commit: bool| {
        let (pid, epoch) = f.init(id, (NO_PRODUCER_ID, NO_PRODUCER_EPOCH)).unwrap();
        let tp = if commit { ("t", 0) } else { ("t", 1) };
        f.coord
            .add_partitions(id, pid, epoch, &parts(&[tp]), NOW)
            .unwrap();
        txn_batch(&f.log(&format!("{}-{}", tp.0, tp.1)), pid, epoch, 0);
        let mut inner = f.coord.states.lock();
        let state = if commit {
            TxnState::PrepareCommit
        } else {
            TxnState::PrepareAbort
        };
        let t = inner
            .ids
            .get_mut(id)
            .unwrap()
            .prepare_abort_or_commit(state, NOW)
            .unwrap();
        f.coord.states.append(&mut inner, id, &t).unwrap();
        pid
    };
    let a = prepare_only("a", true);
    assert_eq!(f.state("a"), TxnState::PrepareCommit);
    assert_eq!(f.log("t-0").last_stable_offset(), 0, "no marker yet");
    // The client's retry of its commit.
    f.coord.end_txn("a", a, 0, true, NOW).unwrap();
    assert_eq!(f.state("a"), TxnState::CompleteCommit);
    assert_eq!(
        f.log("t-0").last_stable_offset(),
        2,
        "the COMMIT marker at 1"
    );

    prepare_only("b", false);
    let states = TxnStateManager::load(TxnStateTopic::new(f.mgr.clone(), 1));
    let again = TxnCoordinator::new(states, f.mgr.clone(), MAX_TIMEOUT_MS);
    assert_eq!(
        again.states.lock().ids["b"].current.state,
        TxnState::PrepareAbort
    );
    again.complete_prepared_at_load(NOW);
    assert_eq!(
        again.states.lock().ids["b"].current.state,
        TxnState::CompleteAbort
    );
    let t1 = f.log("t-1");
    assert_eq!(t1.last_stable_offset(), 2, "the ABORT marker at 1");
    assert_eq!(t1.aborted_transactions(0, 2).unwrap().len(), 1);
}

/// Kafka's `abortTimedOutTransactions`: only an Ongoing transaction past
/// its timeout is aborted, under the next epoch, which fences its producer.
#[test]
fn a_timed_out_transaction_is_aborted_under_a_new_epoch() {
    let f = Fixture::new();
    let (pid, epoch) = f.init("slow", (NO_PRODUCER_ID, NO_PRODUCER_EPOCH)).unwrap();
    f.coord
        .add_partitions("slow", pid, epoch, &parts(&[("t", 0)]), NOW)
        .unwrap();
    txn_batch(&f.log("t-0"), pid, epoch, 0);
    // The fixture's timeout is 60 s from NOW.
    f.coord.abort_timed_out(NOW + 60_000);
    assert_eq!(f.state("slow"), TxnState::Ongoing, "not past it yet");
    f.coord.abort_timed_out(NOW + 60_001);
    assert_eq!(f.state("slow"), TxnState::CompleteAbort);
    assert_eq!(
        f.coord.states.lock().ids["slow"].current.producer_epoch,
        epoch + 1
    );
    let log = f.log("t-0");
    assert_eq!(log.last_stable_offset(), 2);
    assert_eq!(log.aborted_transactions(0, 2).unwrap().len(), 1);
    assert_eq!(
        f.coord.end_txn("slow", pid, epoch, true, NOW),
        Err(ResponseError::ProducerFenced),
        "the producer that left it is fenced"
    );
}

/// Kafka's `removeExpiredTransactionalIds`: an id with no transaction open
/// and no change for the expiration is forgotten, and stays so at load.
#[test]
fn an_idle_id_expires_with_a_tombstone() {
    let f = Fixture::new();
    let (pid, epoch) = f.init("idle", (NO_PRODUCER_ID, NO_PRODUCER_EPOCH)).unwrap();
    let (p2, e2) = f.init("busy", (NO_PRODUCER_ID, NO_PRODUCER_EPOCH)).unwrap();
    f.coord
        .add_partitions("busy", p2, e2, &parts(&[("t", 0)]), NOW)
        .unwrap();
    f.coord.expire_ids(NOW + 999, 1000);
    assert!(f.coord.states.lock().ids.contains_key("idle"), "not yet");
    f.coord.expire_ids(NOW + 1000, 1000);
    let inner = f.coord.states.lock();
    assert!(!inner.ids.contains_key("idle"));
    assert!(
        inner.ids.contains_key("busy"),
        "an open transaction never expires"
    );
    drop(inner);
    let states = TxnStateManager::load(TxnStateTopic::new(f.mgr.clone(), 1));
    assert!(!states.lock().ids.contains_key("idle"), "its tombstone");
    assert_eq!(
        f.coord.end_txn("idle", pid, epoch, true, NOW),
        Err(ResponseError::InvalidProducerIdMapping)
    );
}
