//! Kafka's `TransactionMetadataTest` (the transactions version 0 cases),
//! and the transitions each state allows.

use super::*;
use TxnState::*;

const PID: i64 = 23423;
const NOW: i64 = 1_700_000_000_000;

fn meta(epoch: i16, last_epoch: i16, state: TxnState, start: i64) -> TxnMetadata {
    let m = TxnMetadata::new("txnlId", PID, 30000, NOW);
    TxnMetadata {
        current: Transit {
            producer_epoch: epoch,
            last_producer_epoch: last_epoch,
            state,
            start_ms: start,
            ..m.current
        },
        ..m
    }
}

fn tp(topic: &str, p: i32) -> TopicPartition {
    (topic.to_string(), p)
}

fn bump(m: &mut TxnMetadata, expected: Option<i16>, now: i64) -> Transit {
    m.prepare_increment_epoch(30000, expected, now)
        .unwrap()
        .unwrap()
}

#[test]
fn initialize_epoch() {
    let mut m = meta(NO_PRODUCER_EPOCH, NO_PRODUCER_EPOCH, Empty, -1);
    let t = bump(&mut m, None, NOW);
    m.complete(&t).unwrap();
    assert_eq!(
        (
            m.current.producer_id,
            m.current.producer_epoch,
            m.current.last_producer_epoch
        ),
        (PID, 0, -1)
    );
}

#[test]
fn normal_epoch_bump() {
    let mut m = meta(735, NO_PRODUCER_EPOCH, Empty, -1);
    let t = bump(&mut m, None, NOW);
    m.complete(&t).unwrap();
    assert_eq!(
        (m.current.producer_epoch, m.current.last_producer_epoch),
        (736, -1)
    );
}

#[test]
fn bump_epoch_not_allowed_if_epochs_exhausted() {
    let mut m = meta(i16::MAX - 1, NO_PRODUCER_EPOCH, Empty, -1);
    assert!(m.epoch_exhausted());
    assert!(m.prepare_increment_epoch(30000, None, NOW).is_err());
}

#[test]
fn tolerate_update_time_shift_during_epoch_bump() {
    let mut m = meta(1, NO_PRODUCER_EPOCH, Empty, 1);
    let t = bump(&mut m, Some(1), NOW - 1);
    m.complete(&t).unwrap();
    assert_eq!(
        (m.current.producer_epoch, m.current.last_producer_epoch),
        (2, 1)
    );
    assert_eq!((m.current.start_ms, m.current.last_update_ms), (1, NOW - 1));
}

#[test]
fn tolerate_update_time_reset_during_producer_id_rotation() {
    let mut m = meta(1, NO_PRODUCER_EPOCH, Empty, 1);
    let t = m
        .prepare_rotate_producer_id(PID + 1, 30000, NOW - 1, true)
        .unwrap();
    m.complete(&t).unwrap();
    assert_eq!(
        (
            m.current.producer_id,
            m.current.producer_epoch,
            m.current.last_producer_epoch
        ),
        (PID + 1, 0, 1)
    );
    assert_eq!((m.current.start_ms, m.current.last_update_ms), (1, NOW - 1));
}

#[test]
fn tolerate_time_shift_during_add_partitions() {
    let mut m = meta(1, NO_PRODUCER_EPOCH, Empty, NOW);
    let t = m
        .prepare_add_partitions(&[tp("topic1", 0)].into(), NOW - 1)
        .unwrap();
    m.complete(&t).unwrap();
    assert_eq!(m.current.partitions, [tp("topic1", 0)].into());
    assert_eq!(
        (m.current.start_ms, m.current.last_update_ms),
        (NOW - 1, NOW - 1)
    );
    // In Ongoing the start time stays.
    let t = m
        .prepare_add_partitions(&[tp("topic2", 0)].into(), NOW - 2)
        .unwrap();
    m.complete(&t).unwrap();
    assert_eq!(
        m.current.partitions,
        [tp("topic1", 0), tp("topic2", 0)].into()
    );
    assert_eq!(
        (m.current.start_ms, m.current.last_update_ms),
        (NOW - 1, NOW - 2)
    );
    assert_eq!(
        (m.current.producer_epoch, m.current.last_producer_epoch),
        (1, -1)
    );
}

#[test]
fn tolerate_time_shift_during_prepare_and_complete() {
    for (prepare, complete) in [
        (PrepareCommit, CompleteCommit),
        (PrepareAbort, CompleteAbort),
    ] {
        let mut m = meta(1, NO_PRODUCER_EPOCH, Ongoing, 1);
        let t = m.prepare_abort_or_commit(prepare, NOW - 1).unwrap();
        m.complete(&t).unwrap();
        assert_eq!(m.current.state, prepare);
        assert_eq!((m.current.start_ms, m.current.last_update_ms), (1, NOW - 1));
        let t = m.prepare_complete(NOW - 2).unwrap();
        m.complete(&t).unwrap();
        assert_eq!(m.current.state, complete);
        assert_eq!((m.current.producer_id, m.current.producer_epoch), (PID, 1));
        assert_eq!((m.current.start_ms, m.current.last_update_ms), (1, NOW - 2));
    }
}

#[test]
fn fence_producer_after_epochs_exhausted() {
    let mut m = meta(i16::MAX - 1, NO_PRODUCER_EPOCH, Ongoing, 1);
    assert!(m.epoch_exhausted());
    let fence = m.prepare_fence_epoch().unwrap();
    assert_eq!(
        (fence.producer_epoch, fence.last_producer_epoch),
        (i16::MAX, -1)
    );
    assert_eq!(m.pending, Some(PrepareEpochFence));
    m.take_fence(&fence);
    let t = m.prepare_abort_or_commit(PrepareAbort, NOW).unwrap();
    m.complete(&t).unwrap();
    assert_eq!(
        (t.producer_id, m.current.producer_epoch, m.current.state),
        (PID, i16::MAX, PrepareAbort)
    );
}

#[test]
fn fence_producer_not_allowed_if_it_would_overflow() {
    let mut m = meta(i16::MAX, NO_PRODUCER_EPOCH, Ongoing, 1);
    assert!(m.epoch_exhausted());
    assert!(m.prepare_fence_epoch().is_err());
}

#[test]
fn rotate_producer_id() {
    let mut m = meta(i16::MAX - 1, NO_PRODUCER_EPOCH, Empty, -1);
    let t = m
        .prepare_rotate_producer_id(9893, 30000, NOW, true)
        .unwrap();
    m.complete(&t).unwrap();
    assert_eq!(
        (
            m.current.producer_id,
            m.current.prev_producer_id,
            m.current.producer_epoch,
            m.current.last_producer_epoch
        ),
        (9893, PID, 0, i16::MAX - 1)
    );
}

#[test]
fn rotate_producer_id_in_a_pending_transaction() {
    for state in [Ongoing, PrepareAbort, PrepareCommit] {
        let mut m = meta(i16::MAX - 1, NO_PRODUCER_EPOCH, state, 1);
        assert!(
            m.prepare_rotate_producer_id(9893, 30000, NOW, false)
                .is_err()
        );
    }
}

#[test]
fn epoch_bumps_with_expected_epochs() {
    // Newly created: any expected epoch starts at 0.
    let mut m = meta(NO_PRODUCER_EPOCH, NO_PRODUCER_EPOCH, Empty, -1);
    let t = bump(&mut m, Some(735), NOW);
    m.complete(&t).unwrap();
    assert_eq!(
        (m.current.producer_epoch, m.current.last_producer_epoch),
        (0, -1)
    );
    // The current epoch: bumped, the current one kept as the last.
    let mut m = meta(735, NO_PRODUCER_EPOCH, Empty, -1);
    let t = bump(&mut m, Some(735), NOW);
    m.complete(&t).unwrap();
    assert_eq!(
        (m.current.producer_epoch, m.current.last_producer_epoch),
        (736, 735)
    );
    // The last epoch (a retry of the bump): answered with the same.
    let mut m = meta(735, 734, Empty, -1);
    let t = bump(&mut m, Some(734), NOW);
    m.complete(&t).unwrap();
    assert_eq!(
        (m.current.producer_epoch, m.current.last_producer_epoch),
        (735, 734)
    );
    // An older one: fenced.
    let mut m = meta(735, 734, Empty, -1);
    assert_eq!(
        m.prepare_increment_epoch(30000, Some(733), NOW),
        Ok(Err(ProducerFenced))
    );
    assert_eq!(m.pending, None, "nothing prepared");
}

#[test]
fn a_pending_state_blocks_another_and_an_abandon_frees_it() {
    let mut m = meta(0, NO_PRODUCER_EPOCH, Empty, -1);
    m.prepare_add_partitions(&[tp("t", 0)].into(), NOW).unwrap();
    let err = m
        .prepare_add_partitions(&[tp("t", 1)].into(), NOW)
        .unwrap_err();
    assert!(
        err.0.contains("while it already a pending state Ongoing"),
        "{err}"
    );
    m.abandon();
    let t = m.prepare_add_partitions(&[tp("t", 1)].into(), NOW).unwrap();
    m.complete(&t).unwrap();
    assert_eq!(m.current.partitions, [tp("t", 1)].into());
}

/// Each state may be reached from Kafka's valid previous states only.
#[test]
fn transitions_follow_the_valid_previous_states() {
    for from in TxnState::ALL {
        let reach = |to: TxnState| {
            let mut m = meta(0, NO_PRODUCER_EPOCH, from, 1);
            m.current.partitions.insert(tp("t", 0));
            match to {
                Empty => m.prepare_increment_epoch(30000, None, NOW).map(|_| ()),
                Ongoing => m
                    .prepare_add_partitions(&[tp("t", 1)].into(), NOW)
                    .map(|_| ()),
                PrepareCommit | PrepareAbort => m.prepare_abort_or_commit(to, NOW).map(|_| ()),
                Dead => m.prepare_dead().map(|_| ()),
                PrepareEpochFence => m.prepare_fence_epoch().map(|_| ()),
                CompleteCommit | CompleteAbort => m.prepare_complete(NOW).map(|_| ()),
            }
            .is_ok()
        };
        for to in [
            Empty,
            Ongoing,
            PrepareCommit,
            PrepareAbort,
            Dead,
            PrepareEpochFence,
        ] {
            assert_eq!(
                reach(to),
                valid_previous(to).contains(&from),
                "{} -> {}",
                from.name(),
                to.name()
            );
        }
    }
}

#[test]
fn a_transit_is_its_log_record() {
    let mut m = meta(3, NO_PRODUCER_EPOCH, Empty, -1);
    let t = m
        .prepare_add_partitions(&[tp("b", 1), tp("a", 2), tp("b", 0)].into(), NOW)
        .unwrap();
    let e = t.log_entry("txnlId");
    assert_eq!(e.state, Ongoing);
    assert_eq!(
        e.partitions,
        vec![("a".to_string(), vec![2]), ("b".to_string(), vec![0, 1])]
    );
    assert_eq!((e.producer_id, e.producer_epoch, e.start_ms), (PID, 3, NOW));
    let back = TxnMetadata::from_log(&e);
    assert_eq!(back.current.partitions, t.partitions);
    assert_eq!(back.current.last_producer_epoch, -1, "not in the log");
}
