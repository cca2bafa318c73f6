//! `__cluster_metadata`: the KRaft metadata records, transcribed from Apache
//! Kafka's `metadata/src/main/resources/common/metadata/*.json`. The
//! `api_key` of each is its record type.

use super::*;

/// `AbortTransactionRecord.json`
pub static ABORT_TRANSACTION_RECORD: Message = Message {
    name: "AbortTransactionRecord",
    api_key: 25,
    valid: only(0),
    flexible: from(0),
    body: Struct::new(
        "AbortTransactionRecord",
        &[f("reason", STRING, from(0))
            .nullable(from(0))
            .tagged(0, from(0))
            .default_null()],
    ),
};

/// `AccessControlEntryRecord.json`
pub static ACCESS_CONTROL_ENTRY_RECORD: Message = Message {
    name: "AccessControlEntryRecord",
    api_key: 18,
    valid: only(0),
    flexible: from(0),
    body: Struct::new(
        "AccessControlEntryRecord",
        &[
            f("id", UUID, from(0)),
            f("resourceType", INT8, from(0)),
            f("resourceName", STRING, from(0)),
            f("patternType", INT8, from(0)),
            f("principal", STRING, from(0)),
            f("host", STRING, from(0)),
            f("operation", INT8, from(0)),
            f("permissionType", INT8, from(0)),
        ],
    ),
};

/// `BeginTransactionRecord.json`
pub static BEGIN_TRANSACTION_RECORD: Message = Message {
    name: "BeginTransactionRecord",
    api_key: 23,
    valid: only(0),
    flexible: from(0),
    body: Struct::new(
        "BeginTransactionRecord",
        &[f("name", STRING, from(0))
            .nullable(from(0))
            .tagged(0, from(0))
            .default_null()],
    ),
};

/// `BrokerRegistrationChangeRecord.json`
pub static BROKER_REGISTRATION_CHANGE_RECORD: Message = Message {
    name: "BrokerRegistrationChangeRecord",
    api_key: 17,
    valid: range(0, 2),
    flexible: from(0),
    body: Struct::new(
        "BrokerRegistrationChangeRecord",
        &[
            f("brokerId", INT32, from(0)),
            f("brokerEpoch", INT64, from(0)),
            f("fenced", INT8, from(0)).tagged(0, from(0)),
            f("inControlledShutdown", INT8, from(1)).tagged(1, from(1)),
            f("logDirs", Type::Array(&UUID), from(2)).tagged(2, from(2)),
        ],
    ),
};

static CLIENT_QUOTA_RECORD_ENTITY_DATA: Struct = Struct::new(
    "EntityData",
    &[
        f("entityType", STRING, from(0)),
        f("entityName", STRING, from(0)).nullable(from(0)),
    ],
);

/// `ClientQuotaRecord.json`
pub static CLIENT_QUOTA_RECORD: Message = Message {
    name: "ClientQuotaRecord",
    api_key: 14,
    valid: only(0),
    flexible: from(0),
    body: Struct::new(
        "ClientQuotaRecord",
        &[
            f(
                "entity",
                Type::Array(&Type::Struct(&CLIENT_QUOTA_RECORD_ENTITY_DATA)),
                from(0),
            ),
            f("key", STRING, from(0)),
            f("value", FLOAT64, from(0)),
            f("remove", BOOL, from(0)),
        ],
    ),
};

/// `ConfigRecord.json`
pub static CONFIG_RECORD: Message = Message {
    name: "ConfigRecord",
    api_key: 4,
    valid: only(0),
    flexible: from(0),
    body: Struct::new(
        "ConfigRecord",
        &[
            f("resourceType", INT8, from(0)),
            f("resourceName", STRING, from(0)),
            f("name", STRING, from(0)),
            f("value", STRING, from(0)).nullable(from(0)),
        ],
    ),
};

/// `DelegationTokenRecord.json`
pub static DELEGATION_TOKEN_RECORD: Message = Message {
    name: "DelegationTokenRecord",
    api_key: 10,
    valid: only(0),
    flexible: from(0),
    body: Struct::new(
        "DelegationTokenRecord",
        &[
            f("owner", STRING, from(0)),
            f("requester", STRING, from(0)),
            f("renewers", Type::Array(&STRING), from(0)),
            f("issueTimestamp", INT64, from(0)),
            f("maxTimestamp", INT64, from(0)),
            f("expirationTimestamp", INT64, from(0)),
            f("tokenId", STRING, from(0)),
        ],
    ),
};

/// `EndTransactionRecord.json`
pub static END_TRANSACTION_RECORD: Message = Message {
    name: "EndTransactionRecord",
    api_key: 24,
    valid: only(0),
    flexible: from(0),
    body: Struct::new("EndTransactionRecord", &[]),
};

/// `FeatureLevelRecord.json`
pub static FEATURE_LEVEL_RECORD: Message = Message {
    name: "FeatureLevelRecord",
    api_key: 12,
    valid: only(0),
    flexible: from(0),
    body: Struct::new(
        "FeatureLevelRecord",
        &[
            f("name", STRING, from(0)),
            f("featureLevel", INT16, from(0)),
        ],
    ),
};

/// `FenceBrokerRecord.json`
pub static FENCE_BROKER_RECORD: Message = Message {
    name: "FenceBrokerRecord",
    api_key: 7,
    valid: only(0),
    flexible: from(0),
    body: Struct::new(
        "FenceBrokerRecord",
        &[f("id", INT32, from(0)), f("epoch", INT64, from(0))],
    ),
};

/// `NoOpRecord.json`
pub static NO_OP_RECORD: Message = Message {
    name: "NoOpRecord",
    api_key: 20,
    valid: only(0),
    flexible: from(0),
    body: Struct::new("NoOpRecord", &[]),
};

/// `PartitionChangeRecord.json`
pub static PARTITION_CHANGE_RECORD: Message = Message {
    name: "PartitionChangeRecord",
    api_key: 5,
    valid: range(0, 2),
    flexible: from(0),
    body: Struct::new(
        "PartitionChangeRecord",
        &[
            f("partitionId", INT32, from(0)).default_int(-1),
            f("topicId", UUID, from(0)),
            f("isr", Type::Array(&INT32), from(0))
                .nullable(from(0))
                .tagged(0, from(0))
                .default_null(),
            f("leader", INT32, from(0))
                .tagged(1, from(0))
                .default_int(-2),
            f("replicas", Type::Array(&INT32), from(0))
                .nullable(from(0))
                .tagged(2, from(0))
                .default_null(),
            f("removingReplicas", Type::Array(&INT32), from(0))
                .nullable(from(0))
                .tagged(3, from(0))
                .default_null(),
            f("addingReplicas", Type::Array(&INT32), from(0))
                .nullable(from(0))
                .tagged(4, from(0))
                .default_null(),
            f("leaderRecoveryState", INT8, from(0))
                .tagged(5, from(0))
                .default_int(-1),
            f("directories", Type::Array(&UUID), from(1))
                .nullable(from(1))
                .tagged(8, from(1))
                .default_null(),
            f("eligibleLeaderReplicas", Type::Array(&INT32), from(2))
                .nullable(from(2))
                .tagged(6, from(2))
                .default_null(),
            f("lastKnownElr", Type::Array(&INT32), from(2))
                .nullable(from(2))
                .tagged(7, from(2))
                .default_null(),
        ],
    ),
};

/// `PartitionRecord.json`
pub static PARTITION_RECORD: Message = Message {
    name: "PartitionRecord",
    api_key: 3,
    valid: range(0, 2),
    flexible: from(0),
    body: Struct::new(
        "PartitionRecord",
        &[
            f("partitionId", INT32, from(0)).default_int(-1),
            f("topicId", UUID, from(0)),
            f("replicas", Type::Array(&INT32), from(0)),
            f("isr", Type::Array(&INT32), from(0)),
            f("removingReplicas", Type::Array(&INT32), from(0)),
            f("addingReplicas", Type::Array(&INT32), from(0)),
            f("leader", INT32, from(0)).default_int(-1),
            f("leaderRecoveryState", INT8, from(0)).tagged(0, from(0)),
            f("leaderEpoch", INT32, from(0)).default_int(-1),
            f("partitionEpoch", INT32, from(0)).default_int(-1),
            f("directories", Type::Array(&UUID), from(1)),
            f("eligibleLeaderReplicas", Type::Array(&INT32), from(2))
                .nullable(from(2))
                .tagged(1, from(2))
                .default_null(),
            f("lastKnownElr", Type::Array(&INT32), from(2))
                .nullable(from(2))
                .tagged(2, from(2))
                .default_null(),
        ],
    ),
};

/// `ProducerIdsRecord.json`
pub static PRODUCER_IDS_RECORD: Message = Message {
    name: "ProducerIdsRecord",
    api_key: 15,
    valid: only(0),
    flexible: from(0),
    body: Struct::new(
        "ProducerIdsRecord",
        &[
            f("brokerId", INT32, from(0)),
            f("brokerEpoch", INT64, from(0)).default_int(-1),
            f("nextProducerId", INT64, from(0)),
        ],
    ),
};

static REGISTER_BROKER_RECORD_BROKER_FEATURE: Struct = Struct::new(
    "BrokerFeature",
    &[
        f("name", STRING, from(0)),
        f("minSupportedVersion", INT16, from(0)),
        f("maxSupportedVersion", INT16, from(0)),
    ],
);

static REGISTER_BROKER_RECORD_BROKER_ENDPOINT: Struct = Struct::new(
    "BrokerEndpoint",
    &[
        f("name", STRING, from(0)),
        f("host", STRING, from(0)),
        f("port", UINT16, from(0)),
        f("securityProtocol", INT16, from(0)),
    ],
);

/// `RegisterBrokerRecord.json`
pub static REGISTER_BROKER_RECORD: Message = Message {
    name: "RegisterBrokerRecord",
    api_key: 0,
    valid: range(0, 3),
    flexible: from(0),
    body: Struct::new(
        "RegisterBrokerRecord",
        &[
            f("brokerId", INT32, from(0)),
            f("isMigratingZkBroker", BOOL, from(2)).default_bool(false),
            f("incarnationId", UUID, from(0)),
            f("brokerEpoch", INT64, from(0)),
            f(
                "endPoints",
                Type::Array(&Type::Struct(&REGISTER_BROKER_RECORD_BROKER_ENDPOINT)),
                from(0),
            ),
            f(
                "features",
                Type::Array(&Type::Struct(&REGISTER_BROKER_RECORD_BROKER_FEATURE)),
                from(0),
            ),
            f("rack", STRING, from(0)).nullable(from(0)),
            f("fenced", BOOL, from(0)).default_bool(true),
            f("inControlledShutdown", BOOL, from(1)).default_bool(false),
            f("logDirs", Type::Array(&UUID), from(3)).tagged(0, from(3)),
        ],
    ),
};

static REGISTER_CONTROLLER_RECORD_CONTROLLER_FEATURE: Struct = Struct::new(
    "ControllerFeature",
    &[
        f("name", STRING, from(0)),
        f("minSupportedVersion", INT16, from(0)),
        f("maxSupportedVersion", INT16, from(0)),
    ],
);

static REGISTER_CONTROLLER_RECORD_CONTROLLER_ENDPOINT: Struct = Struct::new(
    "ControllerEndpoint",
    &[
        f("name", STRING, from(0)),
        f("host", STRING, from(0)),
        f("port", UINT16, from(0)),
        f("securityProtocol", INT16, from(0)),
    ],
);

/// `RegisterControllerRecord.json`
pub static REGISTER_CONTROLLER_RECORD: Message = Message {
    name: "RegisterControllerRecord",
    api_key: 27,
    valid: only(0),
    flexible: from(0),
    body: Struct::new(
        "RegisterControllerRecord",
        &[
            f("controllerId", INT32, from(0)),
            f("incarnationId", UUID, from(0)),
            f("zkMigrationReady", BOOL, from(0)),
            f(
                "endPoints",
                Type::Array(&Type::Struct(
                    &REGISTER_CONTROLLER_RECORD_CONTROLLER_ENDPOINT,
                )),
                from(0),
            ),
            f(
                "features",
                Type::Array(&Type::Struct(
                    &REGISTER_CONTROLLER_RECORD_CONTROLLER_FEATURE,
                )),
                from(0),
            ),
        ],
    ),
};

/// `RemoveAccessControlEntryRecord.json`
pub static REMOVE_ACCESS_CONTROL_ENTRY_RECORD: Message = Message {
    name: "RemoveAccessControlEntryRecord",
    api_key: 19,
    valid: only(0),
    flexible: from(0),
    body: Struct::new("RemoveAccessControlEntryRecord", &[f("id", UUID, from(0))]),
};

/// `RemoveDelegationTokenRecord.json`
pub static REMOVE_DELEGATION_TOKEN_RECORD: Message = Message {
    name: "RemoveDelegationTokenRecord",
    api_key: 26,
    valid: only(0),
    flexible: from(0),
    body: Struct::new(
        "RemoveDelegationTokenRecord",
        &[f("tokenId", STRING, from(0))],
    ),
};

/// `RemoveTopicRecord.json`
pub static REMOVE_TOPIC_RECORD: Message = Message {
    name: "RemoveTopicRecord",
    api_key: 9,
    valid: only(0),
    flexible: from(0),
    body: Struct::new("RemoveTopicRecord", &[f("topicId", UUID, from(0))]),
};

/// `RemoveUserScramCredentialRecord.json`
pub static REMOVE_USER_SCRAM_CREDENTIAL_RECORD: Message = Message {
    name: "RemoveUserScramCredentialRecord",
    api_key: 22,
    valid: only(0),
    flexible: from(0),
    body: Struct::new(
        "RemoveUserScramCredentialRecord",
        &[f("name", STRING, from(0)), f("mechanism", INT8, from(0))],
    ),
};

/// `TopicRecord.json`
pub static TOPIC_RECORD: Message = Message {
    name: "TopicRecord",
    api_key: 2,
    valid: only(0),
    flexible: from(0),
    body: Struct::new(
        "TopicRecord",
        &[f("name", STRING, from(0)), f("topicId", UUID, from(0))],
    ),
};

/// `UnfenceBrokerRecord.json`
pub static UNFENCE_BROKER_RECORD: Message = Message {
    name: "UnfenceBrokerRecord",
    api_key: 8,
    valid: only(0),
    flexible: from(0),
    body: Struct::new(
        "UnfenceBrokerRecord",
        &[f("id", INT32, from(0)), f("epoch", INT64, from(0))],
    ),
};

/// `UnregisterBrokerRecord.json`
pub static UNREGISTER_BROKER_RECORD: Message = Message {
    name: "UnregisterBrokerRecord",
    api_key: 1,
    valid: only(0),
    flexible: from(0),
    body: Struct::new(
        "UnregisterBrokerRecord",
        &[
            f("brokerId", INT32, from(0)),
            f("brokerEpoch", INT64, from(0)),
        ],
    ),
};

/// `UserScramCredentialRecord.json`
pub static USER_SCRAM_CREDENTIAL_RECORD: Message = Message {
    name: "UserScramCredentialRecord",
    api_key: 11,
    valid: only(0),
    flexible: from(0),
    body: Struct::new(
        "UserScramCredentialRecord",
        &[
            f("name", STRING, from(0)),
            f("mechanism", INT8, from(0)),
            f("salt", BYTES, from(0)),
            f("storedKey", BYTES, from(0)),
            f("serverKey", BYTES, from(0)),
            f("iterations", INT32, from(0)),
        ],
    ),
};

/// `ZkMigrationRecord.json`
pub static ZK_MIGRATION_STATE_RECORD: Message = Message {
    name: "ZkMigrationStateRecord",
    api_key: 21,
    valid: only(0),
    flexible: from(0),
    body: Struct::new(
        "ZkMigrationStateRecord",
        &[f("zkMigrationState", INT8, from(0))],
    ),
};

/// `ClearElrRecord.json` (Kafka 4.0)
pub static CLEAR_ELR_RECORD: Message = Message {
    name: "ClearElrRecord",
    api_key: 28,
    valid: only(0),
    flexible: from(0),
    body: Struct::new("ClearElrRecord", &[f("topicName", STRING, from(0))]),
};

/// Every metadata record type this table knows, by `api_key`.
pub static ALL: &[&Message] = &[
    &ABORT_TRANSACTION_RECORD,
    &ACCESS_CONTROL_ENTRY_RECORD,
    &BEGIN_TRANSACTION_RECORD,
    &BROKER_REGISTRATION_CHANGE_RECORD,
    &CLIENT_QUOTA_RECORD,
    &CONFIG_RECORD,
    &DELEGATION_TOKEN_RECORD,
    &END_TRANSACTION_RECORD,
    &FEATURE_LEVEL_RECORD,
    &FENCE_BROKER_RECORD,
    &NO_OP_RECORD,
    &PARTITION_CHANGE_RECORD,
    &PARTITION_RECORD,
    &PRODUCER_IDS_RECORD,
    &REGISTER_BROKER_RECORD,
    &REGISTER_CONTROLLER_RECORD,
    &REMOVE_ACCESS_CONTROL_ENTRY_RECORD,
    &REMOVE_DELEGATION_TOKEN_RECORD,
    &REMOVE_TOPIC_RECORD,
    &REMOVE_USER_SCRAM_CREDENTIAL_RECORD,
    &TOPIC_RECORD,
    &UNFENCE_BROKER_RECORD,
    &UNREGISTER_BROKER_RECORD,
    &USER_SCRAM_CREDENTIAL_RECORD,
    &ZK_MIGRATION_STATE_RECORD,
    &CLEAR_ELR_RECORD,
];
