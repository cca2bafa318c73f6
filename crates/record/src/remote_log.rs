//! `__remote_log_metadata` values as `kafka-dump-log
//! --remote-log-metadata-decoder` prints them (Kafka 4.1's
//! `RemoteMetadataLogMessageParser`): `RemoteLogMetadataSerde` reads the
//! value (framed as a `__cluster_metadata` value: frame version, record
//! type, version, record), turns the record into a `RemoteLogSegmentMetadata`,
//! `RemoteLogSegmentMetadataUpdate`, `RemotePartitionDeleteMetadata` or
//! `RemoteLogSegmentMetadataSnapshot`, and the payload is that object's Java
//! `toString()`. What those objects refuse (a negative start offset, an
//! unknown state, no leader epochs) is reported as the exception Kafka's
//! parser catches: `Error at offset N, skipping. <message>`.

use std::collections::BTreeMap;

use super::schema::codec::read_framed;
use super::schema::{Message, Struct, StructValue, Type, Value, remote_log, uuid_string};

/// The payload kafka-dump-log prints for the record at `offset`.
pub fn remote_log_payload(offset: i64, value: Option<&[u8]>) -> String {
    let text = match value {
        Some(value) => metadata_text(value),
        // `record.value().remaining()` on a record without a value.
        None => Err(
            "Cannot invoke \"java.nio.ByteBuffer.remaining()\" because the return \
                     value of \"org.apache.kafka.common.record.Record.value()\" is null"
                .to_string(),
        ),
    };
    text.unwrap_or_else(|e| format!("Error at offset {offset}, skipping. {e}"))
}

/// The record type's message.
fn schema(record_type: i16) -> Option<&'static Message> {
    remote_log::ALL
        .iter()
        .copied()
        .find(|m| m.api_key == record_type)
}

/// `RemoteLogMetadataSerde.deserialize(value).toString()`, or the message
/// of the exception it throws.
pub fn metadata_text(value: &[u8]) -> Result<String, String> {
    let (msg, _, v) = read_framed(value, schema)?;
    let r = Fields(&msg.body, &v);
    match msg.api_key {
        0 => segment_metadata(&r),
        1 => segment_update(&r),
        2 => partition_delete(&r),
        _ => segment_snapshot(&r),
    }
}

/// `RemoteLogSegmentMetadataTransform.fromApiMessageAndVersion`: a
/// `RemoteLogSegmentMetadata` built, then updated with the record's state.
fn segment_metadata(r: &Fields) -> Result<String, String> {
    let (start, end) = (r.int("startOffset"), r.int("endOffset"));
    if start < 0 {
        return Err(format!(
            "Unexpected start offset = {start}. StartOffset for a remote segment cannot be negative"
        ));
    }
    if end < start {
        return Err(format!(
            "Unexpected end offset = {end}. EndOffset for a remote segment cannot be less than startOffset = {start}"
        ));
    }
    let epochs = leader_epochs(r)?;
    let state = segment_state(r)?;
    Ok(format!(
        "RemoteLogSegmentMetadata{{remoteLogSegmentId={}, startOffset={start}, endOffset={end}, \
         brokerId={}, maxTimestampMs={}, eventTimestampMs={}, segmentLeaderEpochs={epochs}, \
         segmentSizeInBytes={}, customMetadata={}, state={state}, txnIdxEmpty={}}}",
        segment_id(&r.nested("remoteLogSegmentId")),
        r.int("brokerId"),
        r.int("maxTimestampMs"),
        r.int("eventTimestampMs"),
        r.int("segmentSizeInBytes"),
        custom_metadata(r),
        matches!(r.get("txnIndexEmpty"), Some(Value::Bool(true))),
    ))
}

fn segment_update(r: &Fields) -> Result<String, String> {
    let state = segment_state(r)?;
    Ok(format!(
        "RemoteLogSegmentMetadataUpdate{{remoteLogSegmentId={}, customMetadata={}, \
         state={state}, eventTimestampMs={}, brokerId={}}}",
        segment_id(&r.nested("remoteLogSegmentId")),
        custom_metadata(r),
        r.int("eventTimestampMs"),
        r.int("brokerId"),
    ))
}

fn partition_delete(r: &Fields) -> Result<String, String> {
    let state = match r.int("remotePartitionDeleteState") {
        0 => "DELETE_PARTITION_MARKED",
        1 => "DELETE_PARTITION_STARTED",
        2 => "DELETE_PARTITION_FINISHED",
        // `Objects.requireNonNull(state)`: a NullPointerException without a message.
        _ => return Err("null".into()),
    };
    Ok(format!(
        "RemotePartitionDeleteMetadata{{topicPartition={}, state={state}, \
         eventTimestampMs={}, brokerId={}}}",
        topic_id_partition(&r.nested("topicIdPartition")),
        r.int("eventTimestampMs"),
        r.int("brokerId"),
    ))
}

/// `RemoteLogSegmentMetadataSnapshot`: Kafka neither checks its offsets nor
/// shows its `txnIndexEmpty`.
fn segment_snapshot(r: &Fields) -> Result<String, String> {
    let state = segment_state(r)?;
    let epochs = leader_epochs(r)?;
    Ok(format!(
        "RemoteLogSegmentMetadataSnapshot{{segmentId={}, startOffset={}, endOffset={}, \
         maxTimestampMs={}, segmentLeaderEpochs={epochs}, segmentSizeInBytes={}, \
         customMetadata={}, state={state}}}",
        r.uuid("segmentId"),
        r.int("startOffset"),
        r.int("endOffset"),
        r.int("maxTimestampMs"),
        r.int("segmentSizeInBytes"),
        custom_metadata(r),
    ))
}

/// `RemoteLogSegmentState.forId`; an unknown id is refused by the object's
/// `requireNonNull(state, ...)`.
fn segment_state(r: &Fields) -> Result<&'static str, String> {
    match r.int("remoteLogSegmentState") {
        0 => Ok("COPY_SEGMENT_STARTED"),
        1 => Ok("COPY_SEGMENT_FINISHED"),
        2 => Ok("DELETE_SEGMENT_STARTED"),
        3 => Ok("DELETE_SEGMENT_FINISHED"),
        _ => Err("state can not be null".into()),
    }
}

/// The leader epochs as Java prints the `TreeMap` they end up in: by epoch,
/// `{0=10, 3=25}`, a repeated epoch keeping its last offset.
fn leader_epochs(r: &Fields) -> Result<String, String> {
    let mut map = BTreeMap::new();
    for e in r.items("segmentLeaderEpochs") {
        if let Value::Struct(Some(e)) = e {
            let e = Fields(r.element_struct("segmentLeaderEpochs"), e);
            map.insert(e.int("leaderEpoch") as i32, e.int("offset"));
        }
    }
    if map.is_empty() {
        return Err("segmentLeaderEpochs can not be null or empty".into());
    }
    let entries: Vec<String> = map.iter().map(|(k, v)| format!("{k}={v}")).collect();
    Ok(format!("{{{}}}", entries.join(", ")))
}

/// `Optional<CustomMetadata>`'s text.
fn custom_metadata(r: &Fields) -> String {
    match r.get("customMetadata") {
        Some(Value::Bytes(Some(b))) => format!("Optional[CustomMetadata{{{} bytes}}]", b.len()),
        _ => "Optional.empty".into(),
    }
}

/// `RemoteLogSegmentId.toString()`.
fn segment_id(id: &Fields) -> String {
    format!(
        "RemoteLogSegmentId{{topicIdPartition={}, id={}}}",
        topic_id_partition(&id.nested("topicIdPartition")),
        id.uuid("id")
    )
}

/// `TopicIdPartition.toString()`: `<topic id>:<topic>-<partition>`.
fn topic_id_partition(t: &Fields) -> String {
    let name = match t.get("name") {
        Some(Value::Str(Some(s))) => s.as_str(),
        _ => "null",
    };
    format!("{}:{name}-{}", t.uuid("id"), t.int("partition"))
}

/// A decoded struct with its schema, read by field name. The decoder fills
/// every field, so a missing or mistyped one reads as its zero.
struct Fields<'a>(&'a Struct, &'a StructValue);

impl<'a> Fields<'a> {
    fn get(&self, name: &str) -> Option<&'a Value> {
        self.1.get(self.0, name)
    }

    fn int(&self, name: &str) -> i64 {
        match self.get(name) {
            Some(Value::Int(i)) => *i,
            _ => 0,
        }
    }

    fn uuid(&self, name: &str) -> String {
        match self.get(name) {
            Some(Value::Uuid(u)) => uuid_string(u),
            _ => uuid_string(&[0; 16]),
        }
    }

    fn field_type(&self, name: &str) -> Option<&'static Type> {
        self.0.fields.iter().find(|f| f.name == name).map(|f| &f.ty)
    }

    /// A struct field.
    fn nested(&self, name: &str) -> Fields<'a> {
        static EMPTY: Struct = Struct::new("", &[]);
        static NONE: StructValue = StructValue {
            fields: Vec::new(),
            unknown_tagged: Vec::new(),
        };
        match (self.field_type(name), self.get(name)) {
            (Some(Type::Struct(s)), Some(Value::Struct(Some(v)))) => Fields(s, v),
            _ => Fields(&EMPTY, &NONE),
        }
    }

    /// An array field's items.
    fn items(&self, name: &str) -> &'a [Value] {
        match self.get(name) {
            Some(Value::Array(Some(items))) => items,
            _ => &[],
        }
    }

    /// The struct an array field holds.
    fn element_struct(&self, name: &str) -> &'static Struct {
        static EMPTY: Struct = Struct::new("", &[]);
        match self.field_type(name) {
            Some(Type::Array(Type::Struct(s))) => s,
            _ => &EMPTY,
        }
    }
}
