//! `__remote_log_metadata`: the records of Kafka's topic-based remote log
//! metadata manager (KIP-405), transcribed from Apache Kafka's specs in
//! `storage/src/main/resources/message/Remote*Record.json`. Their `apiKey`
//! is the record type of the value's frame (see `RemoteLogMetadataSerde`).

use super::*;

/// `TopicIdPartitionEntry`, the same in every record.
static TOPIC_ID_PARTITION_ENTRY: Struct = Struct::new(
    "TopicIdPartitionEntry",
    &[
        f("name", STRING, from(0)),
        f("id", UUID, from(0)),
        f("partition", INT32, from(0)),
    ],
);

/// `RemoteLogSegmentIdEntry`.
static REMOTE_LOG_SEGMENT_ID_ENTRY: Struct = Struct::new(
    "RemoteLogSegmentIdEntry",
    &[
        f(
            "topicIdPartition",
            Type::Struct(&TOPIC_ID_PARTITION_ENTRY),
            from(0),
        ),
        f("id", UUID, from(0)),
    ],
);

/// `SegmentLeaderEpochEntry`.
static SEGMENT_LEADER_EPOCH_ENTRY: Struct = Struct::new(
    "SegmentLeaderEpochEntry",
    &[
        f("leaderEpoch", INT32, from(0)),
        f("offset", INT64, from(0)),
    ],
);

static SEGMENT_LEADER_EPOCH: Type = Type::Struct(&SEGMENT_LEADER_EPOCH_ENTRY);

const SEGMENT_LEADER_EPOCHS: Field = f(
    "segmentLeaderEpochs",
    Type::Array(&SEGMENT_LEADER_EPOCH),
    from(0),
);

const CUSTOM_METADATA: Field = f("customMetadata", BYTES, from(0))
    .nullable(from(0))
    .default_null();

/// `TxnIndexEmpty`: Kafka 4.0 (KIP-1058), tagged.
const TXN_INDEX_EMPTY: Field = f("txnIndexEmpty", BOOL, from(0)).tagged(0, from(0));

/// `RemoteLogSegmentMetadataRecord.json`
pub static REMOTE_LOG_SEGMENT_METADATA_RECORD: Message = Message {
    name: "RemoteLogSegmentMetadataRecord",
    api_key: 0,
    valid: only(0),
    flexible: from(0),
    body: Struct::new(
        "RemoteLogSegmentMetadataRecord",
        &[
            f(
                "remoteLogSegmentId",
                Type::Struct(&REMOTE_LOG_SEGMENT_ID_ENTRY),
                from(0),
            ),
            f("startOffset", INT64, from(0)),
            f("endOffset", INT64, from(0)),
            f("brokerId", INT32, from(0)),
            f("maxTimestampMs", INT64, from(0)),
            f("eventTimestampMs", INT64, from(0)),
            SEGMENT_LEADER_EPOCHS,
            f("segmentSizeInBytes", INT32, from(0)),
            CUSTOM_METADATA,
            f("remoteLogSegmentState", INT8, from(0)),
            TXN_INDEX_EMPTY,
        ],
    ),
};

/// `RemoteLogSegmentMetadataUpdateRecord.json`
pub static REMOTE_LOG_SEGMENT_METADATA_UPDATE_RECORD: Message = Message {
    name: "RemoteLogSegmentMetadataUpdateRecord",
    api_key: 1,
    valid: only(0),
    flexible: from(0),
    body: Struct::new(
        "RemoteLogSegmentMetadataUpdateRecord",
        &[
            f(
                "remoteLogSegmentId",
                Type::Struct(&REMOTE_LOG_SEGMENT_ID_ENTRY),
                from(0),
            ),
            f("brokerId", INT32, from(0)),
            f("eventTimestampMs", INT64, from(0)),
            CUSTOM_METADATA,
            f("remoteLogSegmentState", INT8, from(0)),
        ],
    ),
};

/// `RemotePartitionDeleteMetadataRecord.json`
pub static REMOTE_PARTITION_DELETE_METADATA_RECORD: Message = Message {
    name: "RemotePartitionDeleteMetadataRecord",
    api_key: 2,
    valid: only(0),
    flexible: from(0),
    body: Struct::new(
        "RemotePartitionDeleteMetadataRecord",
        &[
            f(
                "topicIdPartition",
                Type::Struct(&TOPIC_ID_PARTITION_ENTRY),
                from(0),
            ),
            f("brokerId", INT32, from(0)),
            f("eventTimestampMs", INT64, from(0)),
            f("remotePartitionDeleteState", INT8, from(0)),
        ],
    ),
};

/// `RemoteLogSegmentMetadataSnapshotRecord.json`
pub static REMOTE_LOG_SEGMENT_METADATA_SNAPSHOT_RECORD: Message = Message {
    name: "RemoteLogSegmentMetadataSnapshotRecord",
    api_key: 3,
    valid: only(0),
    flexible: from(0),
    body: Struct::new(
        "RemoteLogSegmentMetadataSnapshotRecord",
        &[
            f("segmentId", UUID, from(0)),
            f("startOffset", INT64, from(0)),
            f("endOffset", INT64, from(0)),
            f("brokerId", INT32, from(0)),
            f("maxTimestampMs", INT64, from(0)),
            f("eventTimestampMs", INT64, from(0)),
            SEGMENT_LEADER_EPOCHS,
            f("segmentSizeInBytes", INT32, from(0)),
            CUSTOM_METADATA,
            f("remoteLogSegmentState", INT8, from(0)),
            TXN_INDEX_EMPTY,
        ],
    ),
};

/// Every record, by record type.
pub static ALL: &[&Message] = &[
    &REMOTE_LOG_SEGMENT_METADATA_RECORD,
    &REMOTE_LOG_SEGMENT_METADATA_UPDATE_RECORD,
    &REMOTE_PARTITION_DELETE_METADATA_RECORD,
    &REMOTE_LOG_SEGMENT_METADATA_SNAPSHOT_RECORD,
];
