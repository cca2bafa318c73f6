//! `__share_group_state`: the share coordinator's records of KIP-932,
//! transcribed from Apache Kafka's specs in
//! `share-coordinator/src/main/resources/common/message/Share*.json`.
//! Record type 0 is a snapshot of a share-partition's state, 1 an update
//! to it; as for `__consumer_offsets`, a key is read at its record type.

use super::*;

/// `ShareSnapshotKey.json`
pub static SHARE_SNAPSHOT_KEY: Message = Message {
    name: "ShareSnapshotKey",
    api_key: 0,
    valid: only(0),
    flexible: Versions::NONE,
    body: Struct::new(
        "ShareSnapshotKey",
        &[
            f("groupId", STRING, only(0)),
            f("topicId", UUID, only(0)),
            f("partition", INT32, only(0)),
        ],
    ),
};

/// `ShareUpdateKey.json`
pub static SHARE_UPDATE_KEY: Message = Message {
    name: "ShareUpdateKey",
    api_key: 1,
    valid: only(1),
    flexible: Versions::NONE,
    body: Struct::new(
        "ShareUpdateKey",
        &[
            f("groupId", STRING, only(1)),
            f("topicId", UUID, only(1)),
            f("partition", INT32, only(1)),
        ],
    ),
};

/// The `StateBatch` of both values (the same fields in each).
static STATE_BATCH: Struct = Struct::new(
    "StateBatch",
    &[
        f("firstOffset", INT64, from(0)),
        f("lastOffset", INT64, from(0)),
        f("deliveryState", INT8, from(0)),
        f("deliveryCount", INT16, from(0)),
    ],
);

/// `deliveryCompleteCount`: Kafka 4.2 (KIP-1226), tagged so older readers skip it.
const DELIVERY_COMPLETE_COUNT: Field = f("deliveryCompleteCount", INT32, from(0))
    .tagged(0, from(0))
    .default_int(-1);

/// `ShareSnapshotValue.json`
pub static SHARE_SNAPSHOT_VALUE: Message = Message {
    name: "ShareSnapshotValue",
    api_key: 0,
    valid: only(0),
    flexible: from(0),
    body: Struct::new(
        "ShareSnapshotValue",
        &[
            f("snapshotEpoch", INT32, from(0)),
            f("stateEpoch", INT32, from(0)),
            f("leaderEpoch", INT32, from(0)),
            f("startOffset", INT64, from(0)),
            DELIVERY_COMPLETE_COUNT,
            f("createTimestamp", INT64, from(0)),
            f("writeTimestamp", INT64, from(0)),
            f(
                "stateBatches",
                Type::Array(&Type::Struct(&STATE_BATCH)),
                from(0),
            ),
        ],
    ),
};

/// `ShareUpdateValue.json`
pub static SHARE_UPDATE_VALUE: Message = Message {
    name: "ShareUpdateValue",
    api_key: 1,
    valid: only(0),
    flexible: from(0),
    body: Struct::new(
        "ShareUpdateValue",
        &[
            f("snapshotEpoch", INT32, from(0)),
            f("leaderEpoch", INT32, from(0)),
            f("startOffset", INT64, from(0)),
            DELIVERY_COMPLETE_COUNT,
            f(
                "stateBatches",
                Type::Array(&Type::Struct(&STATE_BATCH)),
                from(0),
            ),
        ],
    ),
};
