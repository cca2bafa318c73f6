//! The coordinator's records in `__consumer_offsets`, in Kafka's layout:
//! offset commits (key type 1, value version 3, or 1 with an expire
//! timestamp: `record::internal::OffsetCommit`), a classic group's metadata
//! (key type 2, value version 3: protocol type, generation, protocol,
//! leader, the state's timestamp, each member with its subscription and
//! assignment bytes), and tombstones (a null value) for both. Read back at
//! start to rebuild committed offsets and groups; records of other types
//! (KIP-848 consumer groups, share groups) are skipped.

use commitfs_record::internal::{OffsetCommit, encode_coordinator_key, encode_coordinator_value};
use commitfs_record::schema::group::{
    GROUP_METADATA_KEY, GROUP_METADATA_VALUE, GROUP_METADATA_VALUE_MEMBER_METADATA,
    OFFSET_COMMIT_KEY, OFFSET_COMMIT_VALUE,
};
use commitfs_record::schema::{SchemaError, StructValue, Value, decode};

/// The value version Kafka 3.x and 4.x write for a classic group.
const GROUP_VALUE_VERSION: i16 = 3;
/// `GroupMetadataKey`'s record type.
const GROUP_KEY_TYPE: i16 = 2;

/// One member as the group record keeps it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StoredMember {
    pub member_id: String,
    pub client_id: String,
    pub client_host: String,
    pub rebalance_timeout_ms: i32,
    pub session_timeout_ms: i32,
    pub subscription: Vec<u8>,
    pub assignment: Vec<u8>,
}

/// A classic group's metadata record.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StoredGroup {
    pub group: String,
    pub protocol_type: String,
    pub generation: i32,
    pub protocol: Option<String>,
    pub leader: Option<String>,
    pub state_timestamp: i64,
    pub members: Vec<StoredMember>,
}

fn str_of(v: Option<&Value>) -> Option<String> {
    match v {
        Some(Value::Str(s)) => s.clone(),
        _ => None,
    }
}

fn int_of(v: Option<&Value>) -> i64 {
    match v {
        Some(Value::Int(n)) => *n,
        _ => -1,
    }
}

fn bytes_of(v: Option<&Value>) -> Vec<u8> {
    match v {
        Some(Value::Bytes(Some(b))) => b.clone(),
        _ => Vec::new(),
    }
}

impl StoredMember {
    fn to_value(&self) -> Value {
        let s = &GROUP_METADATA_VALUE_MEMBER_METADATA;
        let mut m = StructValue::default_for(s);
        let text = |t: &str| Value::Str(Some(t.to_string()));
        m.set(s, "memberId", text(&self.member_id));
        m.set(s, "groupInstanceId", Value::Str(None));
        m.set(s, "clientId", text(&self.client_id));
        m.set(s, "clientHost", text(&self.client_host));
        m.set(
            s,
            "rebalanceTimeout",
            Value::Int(self.rebalance_timeout_ms as i64),
        );
        m.set(
            s,
            "sessionTimeout",
            Value::Int(self.session_timeout_ms as i64),
        );
        m.set(
            s,
            "subscription",
            Value::Bytes(Some(self.subscription.clone())),
        );
        m.set(s, "assignment", Value::Bytes(Some(self.assignment.clone())));
        Value::Struct(Some(m))
    }

    fn from_value(m: &StructValue) -> StoredMember {
        let s = &GROUP_METADATA_VALUE_MEMBER_METADATA;
        StoredMember {
            member_id: str_of(m.get(s, "memberId")).unwrap_or_default(),
            client_id: str_of(m.get(s, "clientId")).unwrap_or_default(),
            client_host: str_of(m.get(s, "clientHost")).unwrap_or_default(),
            rebalance_timeout_ms: int_of(m.get(s, "rebalanceTimeout")) as i32,
            session_timeout_ms: int_of(m.get(s, "sessionTimeout")) as i32,
            subscription: bytes_of(m.get(s, "subscription")),
            assignment: bytes_of(m.get(s, "assignment")),
        }
    }
}

fn group_key(group: &str) -> Result<Vec<u8>, SchemaError> {
    let km = &GROUP_METADATA_KEY;
    let mut k = StructValue::default_for(&km.body);
    k.set(&km.body, "group", Value::Str(Some(group.to_string())));
    encode_coordinator_key(km, GROUP_KEY_TYPE, &k)
}

impl StoredGroup {
    /// The record's `(key, value)`.
    pub fn to_record(&self) -> Result<(Vec<u8>, Vec<u8>), SchemaError> {
        let vm = &GROUP_METADATA_VALUE;
        let b = &vm.body;
        let mut v = StructValue::default_for(b);
        v.set(
            b,
            "protocolType",
            Value::Str(Some(self.protocol_type.clone())),
        );
        v.set(b, "generation", Value::Int(self.generation as i64));
        v.set(b, "protocol", Value::Str(self.protocol.clone()));
        v.set(b, "leader", Value::Str(self.leader.clone()));
        v.set(b, "currentStateTimestamp", Value::Int(self.state_timestamp));
        let members = self.members.iter().map(StoredMember::to_value).collect();
        v.set(b, "members", Value::Array(Some(members)));
        Ok((
            group_key(&self.group)?,
            encode_coordinator_value(vm, GROUP_VALUE_VERSION, &v)?,
        ))
    }
}

/// The key of a group's tombstone (its value is null).
pub fn group_tombstone_key(group: &str) -> Result<Vec<u8>, SchemaError> {
    group_key(group)
}

/// The key of a committed offset's tombstone (its value is null).
pub fn offset_tombstone_key(
    group: &str,
    topic: &str,
    partition: i32,
) -> Result<Vec<u8>, SchemaError> {
    let km = &OFFSET_COMMIT_KEY;
    let mut k = StructValue::default_for(&km.body);
    let text = |t: &str| Value::Str(Some(t.to_string()));
    k.set(&km.body, "group", text(group));
    k.set(&km.body, "topic", text(topic));
    k.set(&km.body, "partition", Value::Int(partition as i64));
    encode_coordinator_key(km, 1, &k)
}

/// What one `__consumer_offsets` record says.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Stored {
    /// A commit, or `None` for a tombstone of (group, topic, partition).
    Offset {
        group: String,
        topic: String,
        partition: i32,
        commit: Option<OffsetCommit>,
    },
    /// A group's metadata, or `None` for its tombstone.
    Group {
        group: String,
        value: Option<StoredGroup>,
    },
    /// A record type the classic coordinator does not keep.
    Other,
}

fn read_i16(b: &[u8]) -> Option<i16> {
    Some(i16::from_be_bytes(b.get(..2)?.try_into().ok()?))
}

/// Decodes one record; `Err` names what does not decode.
pub fn parse(key: &[u8], value: Option<&[u8]>) -> Result<Stored, String> {
    let record_type = read_i16(key).ok_or("a key without its record type")?;
    let bad = |e: SchemaError| e.0;
    match record_type {
        0 | 1 => {
            let km = &OFFSET_COMMIT_KEY;
            let (k, _) = decode(km, record_type, &key[2..]).map_err(bad)?;
            let group = str_of(k.get(&km.body, "group")).unwrap_or_default();
            let topic = str_of(k.get(&km.body, "topic")).unwrap_or_default();
            let partition = int_of(k.get(&km.body, "partition")) as i32;
            let commit = match value {
                None => None,
                Some(v) => {
                    let vm = &OFFSET_COMMIT_VALUE;
                    let version = read_i16(v).ok_or("a value without its version")?;
                    let (v, _) = decode(vm, version, &v[2..]).map_err(bad)?;
                    let b = &vm.body;
                    Some(OffsetCommit {
                        group: group.clone(),
                        topic: topic.clone(),
                        partition,
                        offset: int_of(v.get(b, "offset")),
                        leader_epoch: int_of(v.get(b, "leaderEpoch")) as i32,
                        metadata: str_of(v.get(b, "metadata")).unwrap_or_default(),
                        commit_timestamp: int_of(v.get(b, "commitTimestamp")),
                        expire_timestamp: int_of(v.get(b, "expireTimestamp")),
                    })
                }
            };
            Ok(Stored::Offset {
                group,
                topic,
                partition,
                commit,
            })
        }
        GROUP_KEY_TYPE => {
            let km = &GROUP_METADATA_KEY;
            let (k, _) = decode(km, record_type, &key[2..]).map_err(bad)?;
            let group = str_of(k.get(&km.body, "group")).unwrap_or_default();
            let value = match value {
                None => None,
                Some(v) => Some(parse_group(&group, v)?),
            };
            Ok(Stored::Group { group, value })
        }
        _ => Ok(Stored::Other),
    }
}

fn parse_group(group: &str, v: &[u8]) -> Result<StoredGroup, String> {
    let vm = &GROUP_METADATA_VALUE;
    let version = read_i16(v).ok_or("a value without its version")?;
    let (v, _) = decode(vm, version, &v[2..]).map_err(|e| e.0)?;
    let b = &vm.body;
    let mut members: Vec<StoredMember> = match v.get(b, "members") {
        Some(Value::Array(Some(items))) => items
            .iter()
            .filter_map(|i| match i {
                Value::Struct(Some(m)) => Some(StoredMember::from_value(m)),
                _ => None,
            })
            .collect(),
        _ => Vec::new(),
    };
    // Version 0 has no rebalance timeout: Kafka's loader takes the session's.
    if version == 0 {
        for m in &mut members {
            m.rebalance_timeout_ms = m.session_timeout_ms;
        }
    }
    Ok(StoredGroup {
        group: group.to_string(),
        protocol_type: str_of(v.get(b, "protocolType")).unwrap_or_default(),
        generation: int_of(v.get(b, "generation")) as i32,
        protocol: str_of(v.get(b, "protocol")),
        leader: str_of(v.get(b, "leader")),
        state_timestamp: int_of(v.get(b, "currentStateTimestamp")),
        members,
    })
}

/// Kafka's `partitionFor(groupId)`, as for every coordinator's topic.
pub use crate::coordinator_topic::partition_for;

#[cfg(test)]
mod tests {
    use super::*;
    use commitfs_record::internal::decode_internal_record;

    #[test]
    fn group_records_round_trip_and_decode_as_kafka_dump_log() {
        let g = StoredGroup {
            group: "g".into(),
            protocol_type: "consumer".into(),
            generation: 3,
            protocol: Some("range".into()),
            leader: Some("c-1".into()),
            state_timestamp: 1_700_000_000_000,
            members: vec![StoredMember {
                member_id: "c-1".into(),
                client_id: "c".into(),
                client_host: "/127.0.0.1".into(),
                rebalance_timeout_ms: 300_000,
                session_timeout_ms: 10_000,
                subscription: vec![0, 0, 0, 0, 0, 1, 0, 1, b't', 0, 0, 0, 0],
                assignment: vec![0, 0, 0, 0, 0, 0, 0, 0, 0, 0],
            }],
        };
        let (k, v) = g.to_record().unwrap();
        assert_eq!(
            parse(&k, Some(&v)).unwrap(),
            Stored::Group {
                group: "g".into(),
                value: Some(g.clone())
            }
        );
        let text = decode_internal_record("__consumer_offsets", 0, Some(&k), Some(&v)).unwrap();
        assert!(
            text.starts_with(
                r#"key: {"type":"2","data":{"group":"g"}} payload: {"version":"3","data":{"protocolType":"consumer","generation":3,"protocol":"range","leader":"c-1""#
            ),
            "{text}"
        );
        assert!(text.contains(r#""subscription":{"topics":["t"]"#), "{text}");
    }
}
