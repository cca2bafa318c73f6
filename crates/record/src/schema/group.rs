//! `__consumer_offsets`: the classic group records (offset commits, group
//! metadata and the consumer protocol embedded in it) and the consumer-group
//! records of KIP-848, transcribed from Apache Kafka's specs in
//! `group-coordinator/src/main/resources/common/message/` and
//! `clients/src/main/resources/common/message/` (ConsumerProtocol*).
//! Kafka 4.x reads keys at a version equal to the record type, as here.

use super::*;

/// `OffsetCommitKey.json`
pub static OFFSET_COMMIT_KEY: Message = Message {
    name: "OffsetCommitKey",
    api_key: -1,
    valid: range(0, 1),
    flexible: Versions::NONE,
    body: Struct::new(
        "OffsetCommitKey",
        &[
            f("group", STRING, range(0, 1)),
            f("topic", STRING, range(0, 1)),
            f("partition", INT32, range(0, 1)),
        ],
    ),
};

/// `OffsetCommitValue.json`
pub static OFFSET_COMMIT_VALUE: Message = Message {
    name: "OffsetCommitValue",
    api_key: -1,
    valid: range(0, 4),
    flexible: from(4),
    body: Struct::new(
        "OffsetCommitValue",
        &[
            f("offset", INT64, from(0)),
            f("leaderEpoch", INT32, from(3)).default_int(-1),
            f("metadata", STRING, from(0)),
            f("commitTimestamp", INT64, from(0)),
            f("expireTimestamp", INT64, only(1)).default_int(-1),
        ],
    ),
};

/// `GroupMetadataKey.json`
pub static GROUP_METADATA_KEY: Message = Message {
    name: "GroupMetadataKey",
    api_key: -1,
    valid: only(2),
    flexible: Versions::NONE,
    body: Struct::new("GroupMetadataKey", &[f("group", STRING, only(2))]),
};

pub static GROUP_METADATA_VALUE_MEMBER_METADATA: Struct = Struct::new(
    "MemberMetadata",
    &[
        f("memberId", STRING, from(0)),
        f("groupInstanceId", STRING, from(3))
            .nullable(from(3))
            .default_null(),
        f("clientId", STRING, from(0)),
        f("clientHost", STRING, from(0)),
        f("rebalanceTimeout", INT32, from(1)).default_int(-1),
        f("sessionTimeout", INT32, from(0)),
        f("subscription", BYTES, from(0)),
        f("assignment", BYTES, from(0)),
    ],
);

/// `GroupMetadataValue.json`
pub static GROUP_METADATA_VALUE: Message = Message {
    name: "GroupMetadataValue",
    api_key: -1,
    valid: range(0, 4),
    flexible: from(4),
    body: Struct::new(
        "GroupMetadataValue",
        &[
            f("protocolType", STRING, from(0)),
            f("generation", INT32, from(0)),
            f("protocol", STRING, from(0)).nullable(from(0)),
            f("leader", STRING, from(0)).nullable(from(0)),
            f("currentStateTimestamp", INT64, from(2)).default_int(-1),
            f(
                "members",
                Type::Array(&Type::Struct(&GROUP_METADATA_VALUE_MEMBER_METADATA)),
                from(0),
            ),
        ],
    ),
};

static CONSUMER_PROTOCOL_SUBSCRIPTION_TOPIC_PARTITION: Struct = Struct::new(
    "TopicPartition",
    &[
        f("topic", STRING, from(1)),
        f("partitions", Type::Array(&INT32), from(1)),
    ],
);

/// `ConsumerProtocolSubscription.json`
pub static CONSUMER_PROTOCOL_SUBSCRIPTION: Message = Message {
    name: "ConsumerProtocolSubscription",
    api_key: -1,
    valid: range(0, 3),
    flexible: Versions::NONE,
    body: Struct::new(
        "ConsumerProtocolSubscription",
        &[
            f("topics", Type::Array(&STRING), from(0)),
            f("userData", BYTES, from(0))
                .nullable(from(0))
                .default_null(),
            f(
                "ownedPartitions",
                Type::Array(&Type::Struct(
                    &CONSUMER_PROTOCOL_SUBSCRIPTION_TOPIC_PARTITION,
                )),
                from(1),
            ),
            f("generationId", INT32, from(2)).default_int(-1),
            f("rackId", STRING, from(3))
                .nullable(from(3))
                .default_null(),
        ],
    ),
};

static CONSUMER_PROTOCOL_ASSIGNMENT_TOPIC_PARTITION: Struct = Struct::new(
    "TopicPartition",
    &[
        f("topic", STRING, from(0)),
        f("partitions", Type::Array(&INT32), from(0)),
    ],
);

/// `ConsumerProtocolAssignment.json`
pub static CONSUMER_PROTOCOL_ASSIGNMENT: Message = Message {
    name: "ConsumerProtocolAssignment",
    api_key: -1,
    valid: range(0, 3),
    flexible: Versions::NONE,
    body: Struct::new(
        "ConsumerProtocolAssignment",
        &[
            f(
                "assignedPartitions",
                Type::Array(&Type::Struct(&CONSUMER_PROTOCOL_ASSIGNMENT_TOPIC_PARTITION)),
                from(0),
            ),
            f("userData", BYTES, from(0))
                .nullable(from(0))
                .default_null(),
        ],
    ),
};

/// `ConsumerGroupCurrentMemberAssignmentKey.json`
pub static CONSUMER_GROUP_CURRENT_MEMBER_ASSIGNMENT_KEY: Message = Message {
    name: "ConsumerGroupCurrentMemberAssignmentKey",
    api_key: -1,
    valid: only(8),
    flexible: Versions::NONE,
    body: Struct::new(
        "ConsumerGroupCurrentMemberAssignmentKey",
        &[
            f("groupId", STRING, only(8)),
            f("memberId", STRING, only(8)),
        ],
    ),
};

static CONSUMER_GROUP_CURRENT_MEMBER_ASSIGNMENT_VALUE_TOPIC_PARTITIONS: Struct = Struct::new(
    "TopicPartitions",
    &[
        f("topicId", UUID, from(0)),
        f("partitions", Type::Array(&INT32), from(0)),
    ],
);

/// `ConsumerGroupCurrentMemberAssignmentValue.json`
pub static CONSUMER_GROUP_CURRENT_MEMBER_ASSIGNMENT_VALUE: Message = Message {
    name: "ConsumerGroupCurrentMemberAssignmentValue",
    api_key: -1,
    valid: only(0),
    flexible: from(0),
    body: Struct::new(
        "ConsumerGroupCurrentMemberAssignmentValue",
        &[
            f("memberEpoch", INT32, from(0)),
            f("previousMemberEpoch", INT32, from(0)),
            f("state", INT8, from(0)),
            f(
                "assignedPartitions",
                Type::Array(&Type::Struct(
                    &CONSUMER_GROUP_CURRENT_MEMBER_ASSIGNMENT_VALUE_TOPIC_PARTITIONS,
                )),
                from(0),
            ),
            f(
                "partitionsPendingRevocation",
                Type::Array(&Type::Struct(
                    &CONSUMER_GROUP_CURRENT_MEMBER_ASSIGNMENT_VALUE_TOPIC_PARTITIONS,
                )),
                from(0),
            ),
        ],
    ),
};

/// `ConsumerGroupMemberMetadataKey.json`
pub static CONSUMER_GROUP_MEMBER_METADATA_KEY: Message = Message {
    name: "ConsumerGroupMemberMetadataKey",
    api_key: -1,
    valid: only(5),
    flexible: Versions::NONE,
    body: Struct::new(
        "ConsumerGroupMemberMetadataKey",
        &[
            f("groupId", STRING, only(5)),
            f("memberId", STRING, only(5)),
        ],
    ),
};

static CONSUMER_GROUP_MEMBER_METADATA_VALUE_CLASSIC_MEMBER_METADATA: Struct = Struct::new(
    "ClassicMemberMetadata",
    &[
        f("sessionTimeoutMs", INT32, from(0)),
        f(
            "supportedProtocols",
            Type::Array(&Type::Struct(
                &CONSUMER_GROUP_MEMBER_METADATA_VALUE_CLASSIC_PROTOCOL,
            )),
            from(0),
        ),
    ],
);

static CONSUMER_GROUP_MEMBER_METADATA_VALUE_CLASSIC_PROTOCOL: Struct = Struct::new(
    "ClassicProtocol",
    &[f("name", STRING, from(0)), f("metadata", BYTES, from(0))],
);

/// `ConsumerGroupMemberMetadataValue.json`
pub static CONSUMER_GROUP_MEMBER_METADATA_VALUE: Message = Message {
    name: "ConsumerGroupMemberMetadataValue",
    api_key: -1,
    valid: only(0),
    flexible: from(0),
    body: Struct::new(
        "ConsumerGroupMemberMetadataValue",
        &[
            f("instanceId", STRING, from(0)).nullable(from(0)),
            f("rackId", STRING, from(0)).nullable(from(0)),
            f("clientId", STRING, from(0)),
            f("clientHost", STRING, from(0)),
            f("subscribedTopicNames", Type::Array(&STRING), from(0)),
            f("subscribedTopicRegex", STRING, from(0)).nullable(from(0)),
            f("rebalanceTimeoutMs", INT32, from(0)).default_int(-1),
            f("serverAssignor", STRING, from(0)).nullable(from(0)),
            f(
                "classicMemberMetadata",
                Type::Struct(&CONSUMER_GROUP_MEMBER_METADATA_VALUE_CLASSIC_MEMBER_METADATA),
                from(0),
            )
            .nullable(from(0))
            .tagged(0, from(0))
            .default_null(),
        ],
    ),
};

/// `ConsumerGroupMetadataKey.json`
pub static CONSUMER_GROUP_METADATA_KEY: Message = Message {
    name: "ConsumerGroupMetadataKey",
    api_key: -1,
    valid: only(3),
    flexible: Versions::NONE,
    body: Struct::new("ConsumerGroupMetadataKey", &[f("groupId", STRING, only(3))]),
};

/// `ConsumerGroupMetadataValue.json`
pub static CONSUMER_GROUP_METADATA_VALUE: Message = Message {
    name: "ConsumerGroupMetadataValue",
    api_key: -1,
    valid: only(0),
    flexible: from(0),
    body: Struct::new(
        "ConsumerGroupMetadataValue",
        &[
            f("epoch", INT32, from(0)),
            // Kafka 4.1 (KIP-1101).
            f("metadataHash", INT64, from(0)).tagged(0, from(0)),
            // KIP-1282, after 4.1.
            f("creationTimeMs", INT64, from(0))
                .tagged(1, from(0))
                .default_int(-1),
        ],
    ),
};

/// `ConsumerGroupPartitionMetadataKey.json`
pub static CONSUMER_GROUP_PARTITION_METADATA_KEY: Message = Message {
    name: "ConsumerGroupPartitionMetadataKey",
    api_key: -1,
    valid: only(4),
    flexible: Versions::NONE,
    body: Struct::new(
        "ConsumerGroupPartitionMetadataKey",
        &[f("groupId", STRING, only(4))],
    ),
};

static CONSUMER_GROUP_PARTITION_METADATA_VALUE_TOPIC_METADATA: Struct = Struct::new(
    "TopicMetadata",
    &[
        f("topicId", UUID, from(0)),
        f("topicName", STRING, from(0)),
        f("numPartitions", INT32, from(0)),
        f(
            "partitionMetadata",
            Type::Array(&Type::Struct(
                &CONSUMER_GROUP_PARTITION_METADATA_VALUE_PARTITION_METADATA,
            )),
            from(0),
        ),
    ],
);

static CONSUMER_GROUP_PARTITION_METADATA_VALUE_PARTITION_METADATA: Struct = Struct::new(
    "PartitionMetadata",
    &[
        f("partition", INT32, from(0)),
        f("racks", Type::Array(&STRING), from(0)),
    ],
);

/// `ConsumerGroupPartitionMetadataValue.json`
pub static CONSUMER_GROUP_PARTITION_METADATA_VALUE: Message = Message {
    name: "ConsumerGroupPartitionMetadataValue",
    api_key: -1,
    valid: only(0),
    flexible: from(0),
    body: Struct::new(
        "ConsumerGroupPartitionMetadataValue",
        &[f(
            "topics",
            Type::Array(&Type::Struct(
                &CONSUMER_GROUP_PARTITION_METADATA_VALUE_TOPIC_METADATA,
            )),
            from(0),
        )],
    ),
};

/// `ConsumerGroupTargetAssignmentMemberKey.json`
pub static CONSUMER_GROUP_TARGET_ASSIGNMENT_MEMBER_KEY: Message = Message {
    name: "ConsumerGroupTargetAssignmentMemberKey",
    api_key: -1,
    valid: only(7),
    flexible: Versions::NONE,
    body: Struct::new(
        "ConsumerGroupTargetAssignmentMemberKey",
        &[
            f("groupId", STRING, only(7)),
            f("memberId", STRING, only(7)),
        ],
    ),
};

static CONSUMER_GROUP_TARGET_ASSIGNMENT_MEMBER_VALUE_TOPIC_PARTITION: Struct = Struct::new(
    "TopicPartition",
    &[
        f("topicId", UUID, from(0)),
        f("partitions", Type::Array(&INT32), from(0)),
    ],
);

/// `ConsumerGroupTargetAssignmentMemberValue.json`
pub static CONSUMER_GROUP_TARGET_ASSIGNMENT_MEMBER_VALUE: Message = Message {
    name: "ConsumerGroupTargetAssignmentMemberValue",
    api_key: -1,
    valid: only(0),
    flexible: from(0),
    body: Struct::new(
        "ConsumerGroupTargetAssignmentMemberValue",
        &[f(
            "topicPartitions",
            Type::Array(&Type::Struct(
                &CONSUMER_GROUP_TARGET_ASSIGNMENT_MEMBER_VALUE_TOPIC_PARTITION,
            )),
            from(0),
        )],
    ),
};

/// `ConsumerGroupTargetAssignmentMetadataKey.json`
pub static CONSUMER_GROUP_TARGET_ASSIGNMENT_METADATA_KEY: Message = Message {
    name: "ConsumerGroupTargetAssignmentMetadataKey",
    api_key: -1,
    valid: only(6),
    flexible: Versions::NONE,
    body: Struct::new(
        "ConsumerGroupTargetAssignmentMetadataKey",
        &[f("groupId", STRING, only(6))],
    ),
};

/// `ConsumerGroupTargetAssignmentMetadataValue.json`
pub static CONSUMER_GROUP_TARGET_ASSIGNMENT_METADATA_VALUE: Message = Message {
    name: "ConsumerGroupTargetAssignmentMetadataValue",
    api_key: -1,
    valid: only(0),
    flexible: from(0),
    body: Struct::new(
        "ConsumerGroupTargetAssignmentMetadataValue",
        &[f("assignmentEpoch", INT32, from(0))],
    ),
};

/// `ConsumerGroupRegularExpressionKey.json` (Kafka 4.0, record type 16)
pub static CONSUMER_GROUP_REGULAR_EXPRESSION_KEY: Message = Message {
    name: "ConsumerGroupRegularExpressionKey",
    api_key: -1,
    valid: only(16),
    flexible: Versions::NONE,
    body: Struct::new(
        "ConsumerGroupRegularExpressionKey",
        &[
            f("groupId", STRING, only(16)),
            f("regularExpression", STRING, only(16)),
        ],
    ),
};

/// `ConsumerGroupRegularExpressionValue.json` (Kafka 4.0)
pub static CONSUMER_GROUP_REGULAR_EXPRESSION_VALUE: Message = Message {
    name: "ConsumerGroupRegularExpressionValue",
    api_key: -1,
    valid: only(0),
    flexible: from(0),
    body: Struct::new(
        "ConsumerGroupRegularExpressionValue",
        &[
            f("topics", Type::Array(&STRING), from(0)),
            f("version", INT64, from(0)),
            f("timestamp", INT64, from(0)),
        ],
    ),
};
