//! Control records other than transaction markers, as kafka-dump-log prints
//! them (Kafka 4.1's `DumpLogSegments.printControlRecord`): the KRaft leader
//! change, snapshot header and footer, kraft version and voters records.
//!
//! A control record's key is `{version int16, type int16}`; its value is the
//! message written at the type's current version (0 for all of these), which
//! Kafka's `ControlRecordUtils` reads back at that version. The JSON is then
//! written at the version the message's own `version` field holds.

use super::schema::{Message, decode, raft, to_json};

/// Control record types (`ControlRecordType`).
pub const LEADER_CHANGE: i16 = 2;
pub const SNAPSHOT_HEADER: i16 = 3;
pub const SNAPSHOT_FOOTER: i16 = 4;
pub const KRAFT_VERSION: i16 = 5;
pub const KRAFT_VOTERS: i16 = 6;

/// The label and schema kafka-dump-log uses for a KRaft control record type.
fn kind(type_id: i16) -> Option<(&'static str, &'static Message)> {
    Some(match type_id {
        LEADER_CHANGE => ("LeaderChange:", &raft::LEADER_CHANGE_MESSAGE),
        SNAPSHOT_HEADER => ("SnapshotHeader", &raft::SNAPSHOT_HEADER_RECORD),
        SNAPSHOT_FOOTER => ("SnapshotFooter", &raft::SNAPSHOT_FOOTER_RECORD),
        KRAFT_VERSION => ("KRaftVersion", &raft::KRAFT_VERSION_RECORD),
        KRAFT_VOTERS => ("KRaftVoters", &raft::VOTERS_RECORD),
        _ => return None,
    })
}

/// The text after `headerKeys: [...] ` for a KRaft control record, such as
/// `KRaftVersion {"version":0,"kRaftVersion":1}`. None when `type_id` is not
/// one of these types. A value that does not decode is described instead.
pub fn kraft_control_text(type_id: i16, value: Option<&[u8]>) -> Option<String> {
    let (label, msg) = kind(type_id)?;
    let value = value.unwrap_or(&[]);
    let decoded = decode(msg, 0, value)
        .map_err(|e| e.to_string())
        .and_then(|(v, _)| {
            // The message's first field is its `version`.
            let version = match v.fields.first() {
                Some(super::schema::Value::Int(n)) => *n as i16,
                _ => 0,
            };
            if msg.valid.contains(version) {
                Ok(to_json(&msg.body, version, &v))
            } else {
                Err(format!("Can't write version {version} of {}", msg.name))
            }
        });
    Some(match decoded {
        Ok(json) => format!("{label} {json}"),
        Err(e) => format!("{label} invalid ({e})"),
    })
}
