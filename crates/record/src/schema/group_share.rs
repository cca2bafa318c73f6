//! `__consumer_offsets`: the share-group records of KIP-932 (types 9 to 15),
//! transcribed from Apache Kafka's specs in
//! `group-coordinator/src/main/resources/common/message/ShareGroup*.json`.

use super::*;

/// `ShareGroupCurrentMemberAssignmentKey.json`
pub static SHARE_GROUP_CURRENT_MEMBER_ASSIGNMENT_KEY: Message = Message {
    name: "ShareGroupCurrentMemberAssignmentKey",
    api_key: -1,
    valid: only(14),
    flexible: Versions::NONE,
    body: Struct::new(
        "ShareGroupCurrentMemberAssignmentKey",
        &[
            f("groupId", STRING, only(14)),
            f("memberId", STRING, only(14)),
        ],
    ),
};

static SHARE_GROUP_CURRENT_MEMBER_ASSIGNMENT_VALUE_TOPIC_PARTITIONS: Struct = Struct::new(
    "TopicPartitions",
    &[
        f("topicId", UUID, from(0)),
        f("partitions", Type::Array(&INT32), from(0)),
    ],
);

/// `ShareGroupCurrentMemberAssignmentValue.json`
pub static SHARE_GROUP_CURRENT_MEMBER_ASSIGNMENT_VALUE: Message = Message {
    name: "ShareGroupCurrentMemberAssignmentValue",
    api_key: -1,
    valid: only(0),
    flexible: from(0),
    body: Struct::new(
        "ShareGroupCurrentMemberAssignmentValue",
        &[
            f("memberEpoch", INT32, from(0)),
            f("previousMemberEpoch", INT32, from(0)),
            f("state", INT8, from(0)),
            f(
                "assignedPartitions",
                Type::Array(&Type::Struct(
                    &SHARE_GROUP_CURRENT_MEMBER_ASSIGNMENT_VALUE_TOPIC_PARTITIONS,
                )),
                from(0),
            ),
        ],
    ),
};

/// `ShareGroupMemberMetadataKey.json`
pub static SHARE_GROUP_MEMBER_METADATA_KEY: Message = Message {
    name: "ShareGroupMemberMetadataKey",
    api_key: -1,
    valid: only(10),
    flexible: Versions::NONE,
    body: Struct::new(
        "ShareGroupMemberMetadataKey",
        &[
            f("groupId", STRING, only(10)),
            f("memberId", STRING, only(10)),
        ],
    ),
};

/// `ShareGroupMemberMetadataValue.json`
pub static SHARE_GROUP_MEMBER_METADATA_VALUE: Message = Message {
    name: "ShareGroupMemberMetadataValue",
    api_key: -1,
    valid: only(0),
    flexible: from(0),
    body: Struct::new(
        "ShareGroupMemberMetadataValue",
        &[
            f("rackId", STRING, from(0)).nullable(from(0)),
            f("clientId", STRING, from(0)),
            f("clientHost", STRING, from(0)),
            f("subscribedTopicNames", Type::Array(&STRING), from(0)),
        ],
    ),
};

/// `ShareGroupMetadataKey.json`
pub static SHARE_GROUP_METADATA_KEY: Message = Message {
    name: "ShareGroupMetadataKey",
    api_key: -1,
    valid: only(11),
    flexible: Versions::NONE,
    body: Struct::new("ShareGroupMetadataKey", &[f("groupId", STRING, only(11))]),
};

/// `ShareGroupMetadataValue.json`
pub static SHARE_GROUP_METADATA_VALUE: Message = Message {
    name: "ShareGroupMetadataValue",
    api_key: -1,
    valid: only(0),
    flexible: from(0),
    body: Struct::new("ShareGroupMetadataValue", &[f("epoch", INT32, from(0))]),
};

/// `ShareGroupPartitionMetadataKey.json`
pub static SHARE_GROUP_PARTITION_METADATA_KEY: Message = Message {
    name: "ShareGroupPartitionMetadataKey",
    api_key: -1,
    valid: only(9),
    flexible: Versions::NONE,
    body: Struct::new(
        "ShareGroupPartitionMetadataKey",
        &[f("groupId", STRING, only(9))],
    ),
};

static SHARE_GROUP_PARTITION_METADATA_VALUE_TOPIC_METADATA: Struct = Struct::new(
    "TopicMetadata",
    &[
        f("topicId", UUID, from(0)),
        f("topicName", STRING, from(0)),
        f("numPartitions", INT32, from(0)),
        f(
            "partitionMetadata",
            Type::Array(&Type::Struct(
                &SHARE_GROUP_PARTITION_METADATA_VALUE_PARTITION_METADATA,
            )),
            from(0),
        ),
    ],
);

static SHARE_GROUP_PARTITION_METADATA_VALUE_PARTITION_METADATA: Struct = Struct::new(
    "PartitionMetadata",
    &[
        f("partition", INT32, from(0)),
        f("racks", Type::Array(&STRING), from(0)),
    ],
);

/// `ShareGroupPartitionMetadataValue.json`
pub static SHARE_GROUP_PARTITION_METADATA_VALUE: Message = Message {
    name: "ShareGroupPartitionMetadataValue",
    api_key: -1,
    valid: only(0),
    flexible: from(0),
    body: Struct::new(
        "ShareGroupPartitionMetadataValue",
        &[f(
            "topics",
            Type::Array(&Type::Struct(
                &SHARE_GROUP_PARTITION_METADATA_VALUE_TOPIC_METADATA,
            )),
            from(0),
        )],
    ),
};

/// `ShareGroupStatePartitionMetadataKey.json`
pub static SHARE_GROUP_STATE_PARTITION_METADATA_KEY: Message = Message {
    name: "ShareGroupStatePartitionMetadataKey",
    api_key: -1,
    valid: only(15),
    flexible: Versions::NONE,
    body: Struct::new(
        "ShareGroupStatePartitionMetadataKey",
        &[f("groupId", STRING, only(15))],
    ),
};

static SHARE_GROUP_STATE_PARTITION_METADATA_VALUE_TOPIC_INFO: Struct = Struct::new(
    "TopicInfo",
    &[f("topicId", UUID, from(0)), f("topicName", STRING, from(0))],
);

static SHARE_GROUP_STATE_PARTITION_METADATA_VALUE_TOPIC_PARTITIONS_INFO: Struct = Struct::new(
    "TopicPartitionsInfo",
    &[
        f("topicId", UUID, from(0)),
        f("topicName", STRING, from(0)),
        f("partitions", Type::Array(&INT32), from(0)),
    ],
);

/// `ShareGroupStatePartitionMetadataValue.json`
pub static SHARE_GROUP_STATE_PARTITION_METADATA_VALUE: Message = Message {
    name: "ShareGroupStatePartitionMetadataValue",
    api_key: -1,
    valid: only(0),
    flexible: from(0),
    body: Struct::new(
        "ShareGroupStatePartitionMetadataValue",
        &[
            f(
                "initializedTopics",
                Type::Array(&Type::Struct(
                    &SHARE_GROUP_STATE_PARTITION_METADATA_VALUE_TOPIC_PARTITIONS_INFO,
                )),
                from(0),
            ),
            f(
                "deletingTopics",
                Type::Array(&Type::Struct(
                    &SHARE_GROUP_STATE_PARTITION_METADATA_VALUE_TOPIC_INFO,
                )),
                from(0),
            ),
        ],
    ),
};

/// `ShareGroupTargetAssignmentMemberKey.json`
pub static SHARE_GROUP_TARGET_ASSIGNMENT_MEMBER_KEY: Message = Message {
    name: "ShareGroupTargetAssignmentMemberKey",
    api_key: -1,
    valid: only(13),
    flexible: Versions::NONE,
    body: Struct::new(
        "ShareGroupTargetAssignmentMemberKey",
        &[
            f("groupId", STRING, only(13)),
            f("memberId", STRING, only(13)),
        ],
    ),
};

static SHARE_GROUP_TARGET_ASSIGNMENT_MEMBER_VALUE_TOPIC_PARTITION: Struct = Struct::new(
    "TopicPartition",
    &[
        f("topicId", UUID, from(0)),
        f("partitions", Type::Array(&INT32), from(0)),
    ],
);

/// `ShareGroupTargetAssignmentMemberValue.json`
pub static SHARE_GROUP_TARGET_ASSIGNMENT_MEMBER_VALUE: Message = Message {
    name: "ShareGroupTargetAssignmentMemberValue",
    api_key: -1,
    valid: only(0),
    flexible: from(0),
    body: Struct::new(
        "ShareGroupTargetAssignmentMemberValue",
        &[f(
            "topicPartitions",
            Type::Array(&Type::Struct(
                &SHARE_GROUP_TARGET_ASSIGNMENT_MEMBER_VALUE_TOPIC_PARTITION,
            )),
            from(0),
        )],
    ),
};

/// `ShareGroupTargetAssignmentMetadataKey.json`
pub static SHARE_GROUP_TARGET_ASSIGNMENT_METADATA_KEY: Message = Message {
    name: "ShareGroupTargetAssignmentMetadataKey",
    api_key: -1,
    valid: only(12),
    flexible: Versions::NONE,
    body: Struct::new(
        "ShareGroupTargetAssignmentMetadataKey",
        &[f("groupId", STRING, only(12))],
    ),
};

/// `ShareGroupTargetAssignmentMetadataValue.json`
pub static SHARE_GROUP_TARGET_ASSIGNMENT_METADATA_VALUE: Message = Message {
    name: "ShareGroupTargetAssignmentMetadataValue",
    api_key: -1,
    valid: only(0),
    flexible: from(0),
    body: Struct::new(
        "ShareGroupTargetAssignmentMetadataValue",
        &[f("assignmentEpoch", INT32, from(0))],
    ),
};
