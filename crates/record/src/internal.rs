//! Kafka's internal records, decoded to the text `kafka-dump-log` prints for
//! them (Kafka 4.1's `DumpLogSegments` decoders), and encoded back.
//!
//! - `__consumer_offsets` (`--offsets-decoder`), `__transaction_state`
//!   (`--transaction-log-decoder`) and `__share_group_state`
//!   (`--share-group-state-decoder`) hold coordinator records: the key is an
//!   int16 record type then the key message, the value an int16 version then
//!   the value message, a null value a tombstone. Printed as
//!   `key: {"type":"<type>","data":{...}} payload: {"version":"<version>","data":{...}}`,
//!   with `<DELETE>` as the payload of a tombstone. A classic group using the
//!   consumer protocol has each member's subscription and assignment bytes
//!   decoded too.
//! - `__cluster_metadata` (`--cluster-metadata-decoder`) values are an
//!   unsigned-varint frame version (1), record type and version, then the
//!   record. Printed as `payload: {"type":"TOPIC_RECORD","version":0,"data":{...}}`.
//! - `__remote_log_metadata` (`--remote-log-metadata-decoder`) values are
//!   framed the same way; printed as `payload: ` and the Java `toString()`
//!   of what Kafka builds from them (see [`super::remote_log`]).
//!
//! What cannot be decoded is reported in Kafka's words
//! (`Unknown record type 17 at offset 5, skipping.`, `Error at offset 5, skipping. ...`).

use super::remote_log::remote_log_payload;
use super::schema::codec::{put_uvarint, read_framed};
use super::schema::{
    Field, Message, SchemaError, StructValue, Value, decode, encode, group, group_share, metadata,
    share_state, to_json, to_json_with, transaction,
};

/// What kafka-dump-log prints after `key:` and `payload:` for one record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Parsed {
    pub key: Option<String>,
    pub payload: Option<String>,
}

impl Parsed {
    /// `key: K payload: P`, either part left out when absent: the text a
    /// record's line ends with under `kafka-dump-log --print-data-log`.
    pub fn text(&self) -> String {
        match (&self.key, &self.payload) {
            (Some(k), Some(p)) => format!("key: {k} payload: {p}"),
            (Some(k), None) => format!("key: {k}"),
            (None, Some(p)) => format!("payload: {p}"),
            (None, None) => String::new(),
        }
    }
}

/// The decoders kafka-dump-log has for Kafka's internal topics.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum InternalDecoder {
    /// `--offsets-decoder`: `__consumer_offsets`.
    Offsets,
    /// `--transaction-log-decoder`: `__transaction_state`.
    TransactionLog,
    /// `--cluster-metadata-decoder`: `__cluster_metadata`.
    ClusterMetadata,
    /// `--share-group-state-decoder`: `__share_group_state`.
    ShareGroupState,
    /// `--remote-log-metadata-decoder`: `__remote_log_metadata`.
    RemoteLogMetadata,
}

/// Kafka's refusal of a coordinator record without a key, which stops
/// kafka-dump-log: `Failed to decode message at offset N using the specified
/// decoder (message had a missing key)`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "Failed to decode message at offset {0} using the specified decoder (message had a missing key)"
)]
pub struct MissingKey(pub i64);

impl InternalDecoder {
    /// The decoder for a partition directory's topic (`__consumer_offsets`,
    /// `__transaction_state`, `__cluster_metadata`, `__share_group_state`,
    /// `__remote_log_metadata`), None for other topics.
    pub fn for_topic(topic: &str) -> Option<InternalDecoder> {
        match topic {
            "__consumer_offsets" => Some(InternalDecoder::Offsets),
            "__transaction_state" => Some(InternalDecoder::TransactionLog),
            "__cluster_metadata" => Some(InternalDecoder::ClusterMetadata),
            "__share_group_state" => Some(InternalDecoder::ShareGroupState),
            "__remote_log_metadata" => Some(InternalDecoder::RemoteLogMetadata),
            _ => None,
        }
    }

    /// Decodes one record (at `offset`) as kafka-dump-log's parser does.
    pub fn parse(
        self,
        offset: i64,
        key: Option<&[u8]>,
        value: Option<&[u8]>,
    ) -> Result<Parsed, MissingKey> {
        match self {
            InternalDecoder::ClusterMetadata => Ok(Parsed {
                key: None,
                payload: Some(metadata_payload(offset, value)),
            }),
            InternalDecoder::RemoteLogMetadata => Ok(Parsed {
                key: None,
                payload: Some(remote_log_payload(offset, value)),
            }),
            InternalDecoder::Offsets
            | InternalDecoder::TransactionLog
            | InternalDecoder::ShareGroupState => {
                let key = key.ok_or(MissingKey(offset))?;
                Ok(coordinator_record(self, offset, key, value))
            }
        }
    }
}

/// The decoded form of a record of an internal topic, for showing beside
/// the record (the mount's `user.kafka.decoded` xattr): exactly the text
/// kafka-dump-log ends the record's line with, `key: {...} payload: {...}`
/// for `__consumer_offsets`, `__transaction_state` and
/// `__share_group_state`, `payload: {...}` for `__cluster_metadata` and
/// `__remote_log_metadata`. `topic` is the topic name (without the partition).
/// None for any other topic, and for a coordinator record without a key.
pub fn decode_internal_record(
    topic: &str,
    offset: i64,
    key: Option<&[u8]>,
    value: Option<&[u8]>,
) -> Option<String> {
    let decoder = InternalDecoder::for_topic(topic)?;
    decoder.parse(offset, key, value).ok().map(|p| p.text())
}

/// The key and value schemas of a `__consumer_offsets` record type.
pub fn group_schemas(record_type: i16) -> Option<(&'static Message, &'static Message)> {
    use group::*;
    use group_share::*;
    let pairs: [(&'static Message, &'static Message); 16] = [
        (&OFFSET_COMMIT_KEY, &OFFSET_COMMIT_VALUE),
        (&GROUP_METADATA_KEY, &GROUP_METADATA_VALUE),
        (&CONSUMER_GROUP_METADATA_KEY, &CONSUMER_GROUP_METADATA_VALUE),
        (
            &CONSUMER_GROUP_PARTITION_METADATA_KEY,
            &CONSUMER_GROUP_PARTITION_METADATA_VALUE,
        ),
        (
            &CONSUMER_GROUP_MEMBER_METADATA_KEY,
            &CONSUMER_GROUP_MEMBER_METADATA_VALUE,
        ),
        (
            &CONSUMER_GROUP_TARGET_ASSIGNMENT_METADATA_KEY,
            &CONSUMER_GROUP_TARGET_ASSIGNMENT_METADATA_VALUE,
        ),
        (
            &CONSUMER_GROUP_TARGET_ASSIGNMENT_MEMBER_KEY,
            &CONSUMER_GROUP_TARGET_ASSIGNMENT_MEMBER_VALUE,
        ),
        (
            &CONSUMER_GROUP_CURRENT_MEMBER_ASSIGNMENT_KEY,
            &CONSUMER_GROUP_CURRENT_MEMBER_ASSIGNMENT_VALUE,
        ),
        (
            &SHARE_GROUP_PARTITION_METADATA_KEY,
            &SHARE_GROUP_PARTITION_METADATA_VALUE,
        ),
        (
            &SHARE_GROUP_MEMBER_METADATA_KEY,
            &SHARE_GROUP_MEMBER_METADATA_VALUE,
        ),
        (&SHARE_GROUP_METADATA_KEY, &SHARE_GROUP_METADATA_VALUE),
        (
            &SHARE_GROUP_TARGET_ASSIGNMENT_METADATA_KEY,
            &SHARE_GROUP_TARGET_ASSIGNMENT_METADATA_VALUE,
        ),
        (
            &SHARE_GROUP_TARGET_ASSIGNMENT_MEMBER_KEY,
            &SHARE_GROUP_TARGET_ASSIGNMENT_MEMBER_VALUE,
        ),
        (
            &SHARE_GROUP_CURRENT_MEMBER_ASSIGNMENT_KEY,
            &SHARE_GROUP_CURRENT_MEMBER_ASSIGNMENT_VALUE,
        ),
        (
            &SHARE_GROUP_STATE_PARTITION_METADATA_KEY,
            &SHARE_GROUP_STATE_PARTITION_METADATA_VALUE,
        ),
        (
            &CONSUMER_GROUP_REGULAR_EXPRESSION_KEY,
            &CONSUMER_GROUP_REGULAR_EXPRESSION_VALUE,
        ),
    ];
    // A key's valid versions are its record types (0 and 1 for offset commits).
    pairs
        .into_iter()
        .find(|(k, _)| k.valid.contains(record_type))
}

/// The key and value schemas of a `__transaction_state` record type.
pub fn transaction_schemas(record_type: i16) -> Option<(&'static Message, &'static Message)> {
    (record_type == 0).then_some((
        &transaction::TRANSACTION_LOG_KEY,
        &transaction::TRANSACTION_LOG_VALUE,
    ))
}

/// The key and value schemas of a `__share_group_state` record type.
pub fn share_state_schemas(record_type: i16) -> Option<(&'static Message, &'static Message)> {
    use share_state::*;
    [
        (&SHARE_SNAPSHOT_KEY, &SHARE_SNAPSHOT_VALUE),
        (&SHARE_UPDATE_KEY, &SHARE_UPDATE_VALUE),
    ]
    .into_iter()
    .find(|(k, _)| k.api_key == record_type)
}

/// The schema of a `__cluster_metadata` record type.
pub fn metadata_schema(record_type: i16) -> Option<&'static Message> {
    metadata::ALL
        .iter()
        .copied()
        .find(|m| m.api_key == record_type)
}

/// Kafka's `MetadataRecordType` name: the record's name in upper snake case.
pub fn metadata_type_name(msg: &Message) -> String {
    let mut out = String::new();
    let mut prev_upper = true;
    for c in msg.name.chars() {
        if c.is_ascii_uppercase() {
            if !prev_upper {
                out.push('_');
            }
            prev_upper = true;
        } else {
            prev_upper = false;
        }
        out.push(c.to_ascii_uppercase());
    }
    out
}

fn coordinator_record(
    decoder: InternalDecoder,
    offset: i64,
    key: &[u8],
    value: Option<&[u8]>,
) -> Parsed {
    let schemas = match decoder {
        InternalDecoder::Offsets => group_schemas,
        InternalDecoder::ShareGroupState => share_state_schemas,
        _ => transaction_schemas,
    };
    let failed = |msg: String| Parsed {
        key: Some(format!("Error at offset {offset}, skipping. {msg}")),
        payload: None,
    };
    let Some(record_type) = read_i16(key) else {
        return failed("Could not read version from key's buffer.".into());
    };
    let Some((key_msg, value_msg)) = schemas(record_type) else {
        return Parsed {
            key: Some(format!(
                "Unknown record type {record_type} at offset {offset}, skipping."
            )),
            payload: None,
        };
    };
    let key_value = match read_message(key_msg, record_type, &key[2..], "key") {
        Ok(v) => v,
        Err(e) => return failed(e),
    };
    let key_json = format!(
        "{{\"type\":\"{record_type}\",\"data\":{}}}",
        to_json(&key_msg.body, record_type, &key_value)
    );
    let payload = match value {
        None => "<DELETE>".to_string(),
        Some(value) => {
            let Some(version) = read_i16(value) else {
                return failed("Could not read version from value's buffer.".into());
            };
            let v = match read_message(value_msg, version, &value[2..], "value") {
                Ok(v) => v,
                Err(e) => return failed(e),
            };
            let data = if std::ptr::eq(value_msg, &group::GROUP_METADATA_VALUE) {
                group_metadata_json(version, &v)
            } else {
                to_json(&value_msg.body, version, &v)
            };
            format!("{{\"version\":\"{version}\",\"data\":{data}}}")
        }
    };
    Parsed {
        key: Some(key_json),
        payload: Some(payload),
    }
}

fn read_i16(b: &[u8]) -> Option<i16> {
    Some(i16::from_be_bytes(b.get(..2)?.try_into().ok()?))
}

/// `CoordinatorRecordSerde.readMessage`: trailing bytes are not an error.
fn read_message(
    msg: &Message,
    version: i16,
    buf: &[u8],
    word: &str,
) -> Result<StructValue, String> {
    decode(msg, version, buf).map(|(v, _)| v).map_err(|e| {
        format!("Could not read record with version {version} from {word}'s buffer due to: {e}.")
    })
}

/// A classic group's value; with protocol type `consumer`, each member's
/// `subscription` and `assignment` bytes are shown decoded (an int16
/// version, then ConsumerProtocolSubscription/Assignment at it), or left as
/// bytes when they do not decode.
fn group_metadata_json(version: i16, v: &StructValue) -> String {
    let body = &group::GROUP_METADATA_VALUE.body;
    let consumer = matches!(
        v.get(body, "protocolType"),
        Some(Value::Str(Some(p))) if p == "consumer"
    );
    if !consumer {
        return to_json(body, version, v);
    }
    let over = |field: &Field, value: &Value| -> Option<String> {
        let schema = match field.name {
            "subscription" => &group::CONSUMER_PROTOCOL_SUBSCRIPTION,
            "assignment" => &group::CONSUMER_PROTOCOL_ASSIGNMENT,
            _ => return None,
        };
        let Value::Bytes(Some(bytes)) = value else {
            return None;
        };
        let version = read_i16(bytes)?;
        let (inner, _) = decode(schema, version, &bytes[2..]).ok()?;
        Some(to_json(&schema.body, version, &inner))
    };
    to_json_with(body, version, v, &over)
}

/// `ClusterMetadataLogMessageParser`: the payload text, or its error line.
fn metadata_payload(offset: i64, value: Option<&[u8]>) -> String {
    match metadata_json(value.unwrap_or(&[])) {
        Ok(json) => json,
        Err(e) => format!("Error at {offset}, skipping. {e}"),
    }
}

fn metadata_json(buf: &[u8]) -> Result<String, String> {
    let (msg, version, v) = read_framed(buf, metadata_schema)?;
    Ok(format!(
        "{{\"type\":\"{}\",\"version\":{version},\"data\":{}}}",
        metadata_type_name(msg),
        to_json(&msg.body, version, &v)
    ))
}

/// A coordinator record's key bytes: the int16 record type, then the key
/// message (read and written at the record type as its version).
pub fn encode_coordinator_key(
    key_msg: &Message,
    record_type: i16,
    key: &StructValue,
) -> Result<Vec<u8>, SchemaError> {
    let mut out = record_type.to_be_bytes().to_vec();
    encode(key_msg, record_type, key, &mut out)?;
    Ok(out)
}

/// A coordinator record's value bytes: the int16 version, then the message.
pub fn encode_coordinator_value(
    msg: &Message,
    version: i16,
    value: &StructValue,
) -> Result<Vec<u8>, SchemaError> {
    let mut out = version.to_be_bytes().to_vec();
    encode(msg, version, value, &mut out)?;
    Ok(out)
}

/// A `__cluster_metadata` record value: frame version 1, type, version, record.
pub fn encode_metadata_record(
    msg: &Message,
    version: i16,
    value: &StructValue,
) -> Result<Vec<u8>, SchemaError> {
    let mut out = Vec::new();
    put_uvarint(&mut out, 1);
    put_uvarint(&mut out, msg.api_key as u16 as u32);
    put_uvarint(&mut out, version as u16 as u32);
    encode(msg, version, value, &mut out)?;
    Ok(out)
}

/// One committed offset, as the group coordinator stores it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OffsetCommit {
    pub group: String,
    pub topic: String,
    pub partition: i32,
    pub offset: i64,
    /// -1 when unknown.
    pub leader_epoch: i32,
    pub metadata: String,
    pub commit_timestamp: i64,
    /// Only version 1 of the value holds it (-1: none).
    pub expire_timestamp: i64,
}

impl OffsetCommit {
    /// The `(key, value)` of a `__consumer_offsets` record for this commit,
    /// in Kafka's layout: key type 1; value version 1 when an expire
    /// timestamp is set, else version 3 (the versions Kafka's coordinator
    /// writes).
    pub fn to_record(&self) -> Result<(Vec<u8>, Vec<u8>), SchemaError> {
        let (km, vm) = (&group::OFFSET_COMMIT_KEY, &group::OFFSET_COMMIT_VALUE);
        let mut k = StructValue::default_for(&km.body);
        k.set(&km.body, "group", Value::Str(Some(self.group.clone())));
        k.set(&km.body, "topic", Value::Str(Some(self.topic.clone())));
        k.set(&km.body, "partition", Value::Int(self.partition as i64));
        let mut v = StructValue::default_for(&vm.body);
        v.set(&vm.body, "offset", Value::Int(self.offset));
        v.set(
            &vm.body,
            "leaderEpoch",
            Value::Int(self.leader_epoch as i64),
        );
        v.set(
            &vm.body,
            "metadata",
            Value::Str(Some(self.metadata.clone())),
        );
        v.set(
            &vm.body,
            "commitTimestamp",
            Value::Int(self.commit_timestamp),
        );
        v.set(
            &vm.body,
            "expireTimestamp",
            Value::Int(self.expire_timestamp),
        );
        let version = if self.expire_timestamp >= 0 { 1 } else { 3 };
        Ok((
            encode_coordinator_key(km, 1, &k)?,
            encode_coordinator_value(vm, version, &v)?,
        ))
    }
}
