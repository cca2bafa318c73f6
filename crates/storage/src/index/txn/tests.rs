//! Kafka's `TransactionIndexTest` (but for `truncateTo` and `sanityCheck`:
//! the log is never cut at an offset here, and recovery rebuilds an index
//! whole), and what this index does beyond it: a torn entry at the end, a
//! read-only reader beside a writer, an entry of an unknown version, an
//! undone append.

use super::*;
use commitfs_record::state_files::AbortedTxn;

fn txn(pid: i64, first: i64, last: i64, lso: i64) -> AbortedTxn {
    AbortedTxn {
        version: 0,
        producer_id: pid,
        first_offset: first,
        last_offset: last,
        last_stable_offset: lso,
    }
}

fn index(dir: &Path, base: i64) -> TransactionIndex {
    TransactionIndex::new(&dir.join(format!("{base:020}.log")), true)
}

fn four() -> Vec<AbortedTxn> {
    vec![
        txn(0, 0, 10, 11),
        txn(1, 5, 15, 13),
        txn(2, 18, 35, 25),
        txn(3, 32, 50, 40),
    ]
}

impl TransactionIndex {
    /// Every entry (Kafka's `allAbortedTxns`). Only tests need them all (the
    /// scan of `storage::disk`'s tests reads this file's parent up to its
    /// first test attribute, so this lives here).
    fn all(&self) -> Result<Vec<AbortedTxn>> {
        self.with_entries(|e| Ok(e.clone()))
    }
}

#[test]
fn position_set_correctly_when_opened() {
    let tmp = tempfile::tempdir().unwrap();
    let mut txns = four();
    let ix = index(tmp.path(), 0);
    for t in &txns {
        ix.append(*t).unwrap();
    }
    drop(ix);
    let reopened = index(tmp.path(), 0);
    let another = txn(3, 50, 60, 55);
    reopened.append(another).unwrap();
    txns.push(another);
    assert_eq!(reopened.all().unwrap(), txns);
    assert_eq!(
        std::fs::metadata(reopened.path()).unwrap().len(),
        5 * ABORTED_TXN_SIZE as u64
    );
}

#[test]
fn last_offset_must_increase() {
    let tmp = tempfile::tempdir().unwrap();
    let ix = index(tmp.path(), 0);
    ix.append(txn(1, 5, 15, 13)).unwrap();
    for refused in [txn(0, 0, 15, 11), txn(0, 0, 10, 11)] {
        let err = ix.append(refused).unwrap_err();
        assert!(
            err.to_string()
                .contains("must increase sequentially, but 1"),
            "{err}"
        );
    }
    // Nothing of the refused entries reached the file.
    assert_eq!(index(tmp.path(), 0).all().unwrap(), vec![txn(1, 5, 15, 13)]);
}

#[test]
fn collect_aborted_transactions() {
    let tmp = tempfile::tempdir().unwrap();
    let ix = index(tmp.path(), 0);
    let all = four();
    for t in &all {
        ix.append(*t).unwrap();
    }
    let search = |from, upper| ix.collect_aborted(from, upper).unwrap();
    let expect = |aborted: &[AbortedTxn], complete| TxnSearch {
        aborted: aborted.to_vec(),
        complete,
    };
    assert_eq!(search(0, 100), expect(&all, false));
    assert_eq!(search(0, 32), expect(&all[..3], true));
    assert_eq!(search(0, 35), expect(&all, true));
    assert_eq!(search(10, 35), expect(&all, true));
    assert_eq!(search(11, 35), expect(&all[1..], true));
    assert_eq!(search(20, 41), expect(&all[2..], false));
}

#[test]
fn reset_and_rollback() {
    let tmp = tempfile::tempdir().unwrap();
    let ix = index(tmp.path(), 0);
    let all = four();
    for t in &all {
        ix.append(*t).unwrap();
    }
    // An append undone: back to the first three, on disk too.
    ix.rollback(3).unwrap();
    assert_eq!(ix.collect_aborted(0, 100).unwrap().aborted, all[..3]);
    assert_eq!(index(tmp.path(), 0).all().unwrap(), all[..3]);
    ix.rollback(5).unwrap();
    assert_eq!(ix.len().unwrap(), 3);
    ix.reset().unwrap();
    assert_eq!(ix.collect_aborted(0, 100).unwrap().aborted, vec![]);
    assert_eq!(std::fs::metadata(ix.path()).unwrap().len(), 0);
}

#[test]
fn flush_makes_no_file_and_then_syncs_one() {
    let tmp = tempfile::tempdir().unwrap();
    let ix = index(tmp.path(), 0);
    ix.flush().unwrap();
    ix.reset().unwrap();
    ix.rollback(0).unwrap();
    assert!(!ix.path().exists(), "no entry, no file");
    ix.append(txn(0, 0, 10, 2)).unwrap();
    ix.flush().unwrap();
    assert_eq!(std::fs::metadata(ix.path()).unwrap().len(), 34);
}

#[test]
fn an_append_overwrites_a_torn_entry() {
    let tmp = tempfile::tempdir().unwrap();
    let ix = index(tmp.path(), 0);
    ix.append(txn(0, 0, 10, 2)).unwrap();
    drop(ix);
    // A crash in the middle of the second entry's write.
    let path = tmp.path().join(format!("{:020}.txnindex", 0));
    let mut bytes = std::fs::read(&path).unwrap();
    bytes.extend_from_slice(&txn(1, 5, 15, 16).to_bytes()[..20]);
    std::fs::write(&path, &bytes).unwrap();
    let ix = index(tmp.path(), 0);
    assert_eq!(ix.all().unwrap(), vec![txn(0, 0, 10, 2)]);
    ix.append(txn(2, 18, 35, 25)).unwrap();
    let on_disk = std::fs::read(&path).unwrap();
    assert_eq!(on_disk.len(), 68);
    let (read, bad) = read_txn_index(&on_disk, "x");
    assert_eq!(
        (read, bad),
        (vec![txn(0, 0, 10, 2), txn(2, 18, 35, 25)], None)
    );
}

#[test]
fn a_read_only_index_sees_what_a_writer_appends_since() {
    let tmp = tempfile::tempdir().unwrap();
    let log = tmp.path().join(format!("{:020}.log", 0));
    let writer = TransactionIndex::new(&log, true);
    let reader = TransactionIndex::new(&log, false);
    assert_eq!(reader.all().unwrap(), vec![]);
    writer.append(txn(0, 0, 10, 2)).unwrap();
    assert_eq!(reader.all().unwrap(), vec![txn(0, 0, 10, 2)]);
    writer.append(txn(1, 5, 15, 16)).unwrap();
    assert_eq!(reader.collect_aborted(0, 100).unwrap().aborted.len(), 2);
}

#[test]
fn an_entry_of_an_unknown_version_is_kafkas_error() {
    let tmp = tempfile::tempdir().unwrap();
    let path = tmp.path().join(format!("{:020}.txnindex", 0));
    let mut bytes = txn(0, 0, 10, 2).to_bytes().to_vec();
    let mut second = txn(1, 5, 15, 16).to_bytes();
    second[0] = 1;
    bytes.extend_from_slice(&second);
    std::fs::write(&path, &bytes).unwrap();
    let err = index(tmp.path(), 0).all().unwrap_err();
    assert!(
        err.to_string()
            .contains("Unexpected aborted transaction version 1 in transaction index"),
        "{err}"
    );
    assert!(err.to_string().contains("at position 34"), "{err}");
}
