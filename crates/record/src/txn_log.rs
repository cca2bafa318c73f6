//! The records of `__transaction_state` (Kafka's `TransactionLog`): one per
//! change of a transactional id's state, keyed by the id, written as
//! Kafka 3.x and 4.x write them while `transaction.version` is 0 (value
//! version 0), read at versions 0 and 1.

use super::schema::transaction::{TRANSACTION_LOG_KEY, TRANSACTION_LOG_VALUE};
use super::schema::{SchemaError, StructValue, Value, decode};
use crate::internal::{encode_coordinator_key, encode_coordinator_value};

/// Kafka's `TransactionState`, by its id on disk.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum TxnState {
    Empty,
    Ongoing,
    PrepareCommit,
    PrepareAbort,
    CompleteCommit,
    CompleteAbort,
    Dead,
    PrepareEpochFence,
}

impl TxnState {
    /// Every state, in the order of their ids.
    pub const ALL: [TxnState; 8] = [
        TxnState::Empty,
        TxnState::Ongoing,
        TxnState::PrepareCommit,
        TxnState::PrepareAbort,
        TxnState::CompleteCommit,
        TxnState::CompleteAbort,
        TxnState::Dead,
        TxnState::PrepareEpochFence,
    ];

    pub fn id(self) -> i8 {
        self as i8
    }

    pub fn from_id(id: i8) -> Option<TxnState> {
        Self::ALL.get(usize::try_from(id).ok()?).copied()
    }

    /// As `DescribeTransactions` and kafka-dump-log name it.
    pub fn name(self) -> &'static str {
        match self {
            TxnState::Empty => "Empty",
            TxnState::Ongoing => "Ongoing",
            TxnState::PrepareCommit => "PrepareCommit",
            TxnState::PrepareAbort => "PrepareAbort",
            TxnState::CompleteCommit => "CompleteCommit",
            TxnState::CompleteAbort => "CompleteAbort",
            TxnState::Dead => "Dead",
            TxnState::PrepareEpochFence => "PrepareEpochFence",
        }
    }
}

/// One transactional id's state as the log keeps it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TxnLogEntry {
    pub transactional_id: String,
    pub producer_id: i64,
    pub producer_epoch: i16,
    pub timeout_ms: i32,
    pub state: TxnState,
    /// By topic. Written null in `Empty` (Kafka's `valueToBytes`), empty in
    /// the `Complete*` states.
    pub partitions: Vec<(String, Vec<i32>)>,
    pub last_update_ms: i64,
    /// -1 when no transaction has started.
    pub start_ms: i64,
}

impl TxnLogEntry {
    /// The record's key: version 0, then the id.
    pub fn key(&self) -> Result<Vec<u8>, SchemaError> {
        txn_log_key(&self.transactional_id)
    }

    /// The record's value at version 0.
    pub fn value(&self) -> Result<Vec<u8>, SchemaError> {
        let body = &TRANSACTION_LOG_VALUE.body;
        let mut v = StructValue::default_for(body);
        v.set(body, "producerId", Value::Int(self.producer_id));
        v.set(
            body,
            "producerEpoch",
            Value::Int(self.producer_epoch as i64),
        );
        v.set(
            body,
            "transactionTimeoutMs",
            Value::Int(self.timeout_ms as i64),
        );
        v.set(
            body,
            "transactionStatus",
            Value::Int(self.state.id() as i64),
        );
        let parts = match self.state {
            TxnState::Empty => None,
            _ => Some(
                self.partitions
                    .iter()
                    .map(|(topic, ids)| {
                        let s = partitions_schema();
                        let mut p = StructValue::default_for(s);
                        p.set(s, "topic", Value::Str(Some(topic.clone())));
                        p.set(
                            s,
                            "partitionIds",
                            Value::Array(Some(ids.iter().map(|i| Value::Int(*i as i64)).collect())),
                        );
                        Value::Struct(Some(p))
                    })
                    .collect(),
            ),
        };
        v.set(body, "transactionPartitions", Value::Array(parts));
        v.set(
            body,
            "transactionLastUpdateTimestampMs",
            Value::Int(self.last_update_ms),
        );
        v.set(
            body,
            "transactionStartTimestampMs",
            Value::Int(self.start_ms),
        );
        encode_coordinator_value(&TRANSACTION_LOG_VALUE, 0, &v)
    }

    /// Kafka's `readTxnRecordKey` and `readTxnRecordValue`: the id a
    /// record is about, and its state (`None` for a tombstone: the id
    /// expired).
    pub fn read(key: &[u8], value: Option<&[u8]>) -> Result<(String, Option<TxnLogEntry>), String> {
        let (kv, kversion) = split_version(key)?;
        if kversion != 0 {
            return Err(format!("unknown::version={kversion}"));
        }
        let (k, _) = decode(&TRANSACTION_LOG_KEY, 0, kv).map_err(|e| e.to_string())?;
        let id = match k.get(&TRANSACTION_LOG_KEY.body, "transactionalId") {
            Some(Value::Str(Some(s))) => s.clone(),
            _ => return Err("a transaction log key without an id".into()),
        };
        let Some(value) = value else {
            return Ok((id, None));
        };
        let (vv, version) = split_version(value)?;
        if !(0..=1).contains(&version) {
            return Err(format!(
                "Unknown version {version} from the transaction log message value"
            ));
        }
        let body = &TRANSACTION_LOG_VALUE.body;
        let (v, _) = decode(&TRANSACTION_LOG_VALUE, version, vv).map_err(|e| e.to_string())?;
        let int = |name: &str| match v.get(body, name) {
            Some(Value::Int(n)) => *n,
            _ => -1,
        };
        let state = TxnState::from_id(int("transactionStatus") as i8)
            .ok_or_else(|| format!("unknown transaction state {}", int("transactionStatus")))?;
        let mut partitions = Vec::new();
        if state != TxnState::Empty
            && let Some(Value::Array(Some(items))) = v.get(body, "transactionPartitions")
        {
            let s = partitions_schema();
            for item in items {
                let Value::Struct(Some(p)) = item else {
                    continue;
                };
                let topic = match p.get(s, "topic") {
                    Some(Value::Str(Some(t))) => t.clone(),
                    _ => continue,
                };
                let ids = match p.get(s, "partitionIds") {
                    Some(Value::Array(Some(ids))) => ids
                        .iter()
                        .filter_map(|i| match i {
                            Value::Int(n) => Some(*n as i32),
                            _ => None,
                        })
                        .collect(),
                    _ => Vec::new(),
                };
                partitions.push((topic, ids));
            }
        }
        Ok((
            id.clone(),
            Some(TxnLogEntry {
                transactional_id: id,
                producer_id: int("producerId"),
                producer_epoch: int("producerEpoch") as i16,
                timeout_ms: int("transactionTimeoutMs") as i32,
                state,
                partitions,
                last_update_ms: int("transactionLastUpdateTimestampMs"),
                start_ms: int("transactionStartTimestampMs"),
            }),
        ))
    }
}

/// The key of `transactional_id`'s records (and of its tombstone).
pub fn txn_log_key(transactional_id: &str) -> Result<Vec<u8>, SchemaError> {
    let body = &TRANSACTION_LOG_KEY.body;
    let mut k = StructValue::default_for(body);
    k.set(
        body,
        "transactionalId",
        Value::Str(Some(transactional_id.to_string())),
    );
    encode_coordinator_key(&TRANSACTION_LOG_KEY, 0, &k)
}

fn partitions_schema() -> &'static super::schema::Struct {
    match TRANSACTION_LOG_VALUE
        .body
        .fields
        .iter()
        .find(|f| f.name == "transactionPartitions")
        .map(|f| f.ty)
    {
        Some(super::schema::Type::Array(super::schema::Type::Struct(s))) => s,
        _ => unreachable!("TransactionLogValue's partitions are an array of structs"),
    }
}

fn split_version(bytes: &[u8]) -> Result<(&[u8], i16), String> {
    match bytes {
        [a, b, rest @ ..] => Ok((rest, i16::from_be_bytes([*a, *b]))),
        _ => Err("a transaction log record shorter than its version".into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn unhex(lines: &[&str]) -> Vec<u8> {
        lines
            .concat()
            .split_whitespace()
            .map(|b| u8::from_str_radix(b, 16).unwrap())
            .collect()
    }

    fn ongoing() -> TxnLogEntry {
        TxnLogEntry {
            transactional_id: "my-txn".into(),
            producer_id: 4000,
            producer_epoch: 3,
            timeout_ms: 60000,
            state: TxnState::Ongoing,
            partitions: vec![("t".into(), vec![0, 2])],
            last_update_ms: 1_700_000_000_500,
            start_ms: 1_700_000_000_400,
        }
    }

    /// The shared notes' vectors B.5, from Kafka's `TransactionLog`.
    #[test]
    fn records_are_kafkas_bytes() {
        let e = ongoing();
        assert_eq!(
            e.key().unwrap(),
            [0, 0, 0, 6, b'm', b'y', b'-', b't', b'x', b'n']
        );
        let want = unhex(&[
            "00 00 00 00 00 00 00 00 0f a0 00 03 00 00 ea 60 ",
            "01 00 00 00 01 00 01 74 00 00 00 02 00 00 00 00 ",
            "00 00 00 02 00 00 01 8b cf e5 69 f4 00 00 01 8b ",
            "cf e5 69 90",
        ]);
        assert_eq!(e.value().unwrap(), want);
        let empty = TxnLogEntry {
            producer_epoch: 4,
            state: TxnState::Empty,
            partitions: Vec::new(),
            last_update_ms: 1_700_000_000_600,
            start_ms: -1,
            ..ongoing()
        };
        let want = unhex(&[
            "00 00 00 00 00 00 00 00 0f a0 00 04 00 00 ea 60 ",
            "00 ff ff ff ff 00 00 01 8b cf e5 6a 58 ff ff ff ",
            "ff ff ff ff ff",
        ]);
        assert_eq!(empty.value().unwrap(), want);
        // A completed transaction keeps an empty (not null) partition list.
        let done = TxnLogEntry {
            state: TxnState::CompleteCommit,
            partitions: Vec::new(),
            ..ongoing()
        };
        let v = done.value().unwrap();
        assert_eq!(&v[17..21], &[0, 0, 0, 0]);
    }

    /// Version 1 (flexible, tagged fields) as Kafka writes it with
    /// `transaction.version` 2 (vector B.5's third), read back.
    #[test]
    fn version_1_values_are_read() {
        let v1 = unhex(&[
            "00 01 00 00 00 00 00 00 0f a0 00 03 00 00 ea 60 ",
            "01 02 02 74 03 00 00 00 00 00 00 00 02 00 00 00 ",
            "01 8b cf e5 69 f4 00 00 01 8b cf e5 69 90 01 02 ",
            "02 00 02",
        ]);
        let e = ongoing();
        let (id, got) = TxnLogEntry::read(&e.key().unwrap(), Some(&v1)).unwrap();
        assert_eq!((id.as_str(), got), ("my-txn", Some(e.clone())));
        let (_, gone) = TxnLogEntry::read(&e.key().unwrap(), None).unwrap();
        assert_eq!(gone, None);
        let (_, back) = TxnLogEntry::read(&e.key().unwrap(), Some(&e.value().unwrap())).unwrap();
        assert_eq!(back, Some(e));
    }

    /// What `dump --transaction-log-decoder` prints of a written record.
    #[test]
    fn written_records_dump_as_kafka_prints_them() {
        let e = ongoing();
        let text = crate::internal::decode_internal_record(
            "__transaction_state",
            0,
            Some(&e.key().unwrap()),
            Some(&e.value().unwrap()),
        )
        .unwrap();
        assert!(text.contains("\"transactionalId\":\"my-txn\""), "{text}");
        assert!(text.contains("\"transactionStatus\":1"), "{text}");
    }
}
