//! KRaft control records (leader change, snapshot header and footer, kraft
//! version, voters), transcribed from Apache Kafka's
//! `clients/src/main/resources/common/message/` specs.

use super::*;

static LEADER_CHANGE_MESSAGE_VOTER: Struct = Struct::new(
    "Voter",
    &[
        f("voterId", INT32, from(0)),
        f("voterDirectoryId", UUID, from(1)),
    ],
);

/// `LeaderChangeMessage.json`
pub static LEADER_CHANGE_MESSAGE: Message = Message {
    name: "LeaderChangeMessage",
    api_key: -1,
    valid: range(0, 1),
    flexible: from(0),
    body: Struct::new(
        "LeaderChangeMessage",
        &[
            f("version", INT16, from(0)),
            f("leaderId", INT32, from(0)),
            f(
                "voters",
                Type::Array(&Type::Struct(&LEADER_CHANGE_MESSAGE_VOTER)),
                from(0),
            ),
            f(
                "grantingVoters",
                Type::Array(&Type::Struct(&LEADER_CHANGE_MESSAGE_VOTER)),
                from(0),
            ),
        ],
    ),
};

/// `SnapshotHeaderRecord.json`
pub static SNAPSHOT_HEADER_RECORD: Message = Message {
    name: "SnapshotHeaderRecord",
    api_key: -1,
    valid: only(0),
    flexible: from(0),
    body: Struct::new(
        "SnapshotHeaderRecord",
        &[
            f("version", INT16, from(0)),
            f("lastContainedLogTimestamp", INT64, from(0)),
        ],
    ),
};

/// `SnapshotFooterRecord.json`
pub static SNAPSHOT_FOOTER_RECORD: Message = Message {
    name: "SnapshotFooterRecord",
    api_key: -1,
    valid: only(0),
    flexible: from(0),
    body: Struct::new("SnapshotFooterRecord", &[f("version", INT16, from(0))]),
};

/// `KRaftVersionRecord.json`
pub static KRAFT_VERSION_RECORD: Message = Message {
    name: "KRaftVersionRecord",
    api_key: -1,
    valid: only(0),
    flexible: from(0),
    body: Struct::new(
        "KRaftVersionRecord",
        &[
            f("version", INT16, from(0)),
            f("kRaftVersion", INT16, from(0)),
        ],
    ),
};

static VOTERS_RECORD_VOTER: Struct = Struct::new(
    "Voter",
    &[
        f("voterId", INT32, from(0)),
        f("voterDirectoryId", UUID, from(0)),
        f(
            "endpoints",
            Type::Array(&Type::Struct(&VOTERS_RECORD_ENDPOINT)),
            from(0),
        ),
        f(
            "kRaftVersionFeature",
            Type::Struct(&VOTERS_RECORD_KRAFT_VERSION_FEATURE),
            from(0),
        ),
    ],
);

static VOTERS_RECORD_KRAFT_VERSION_FEATURE: Struct = Struct::new(
    "KRaftVersionFeature",
    &[
        f("minSupportedVersion", INT16, from(0)),
        f("maxSupportedVersion", INT16, from(0)),
    ],
);

static VOTERS_RECORD_ENDPOINT: Struct = Struct::new(
    "Endpoint",
    &[
        f("name", STRING, from(0)),
        f("host", STRING, from(0)),
        f("port", UINT16, from(0)),
    ],
);

/// `VotersRecord.json`
pub static VOTERS_RECORD: Message = Message {
    name: "VotersRecord",
    api_key: -1,
    valid: only(0),
    flexible: from(0),
    body: Struct::new(
        "VotersRecord",
        &[
            f("version", INT16, from(0)),
            f(
                "voters",
                Type::Array(&Type::Struct(&VOTERS_RECORD_VOTER)),
                from(0),
            ),
        ],
    ),
};
