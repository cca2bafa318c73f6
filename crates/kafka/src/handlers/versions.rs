//! What is served, at which versions, and the ApiVersions answer.
//!
//! Two ranges per API: what is *advertised* and what is *served*. They differ
//! for Produce and Fetch only, for old librdkafka (before 2.11.1, e.g. the 2.0.2
//! in Debian 12's kcat): its feature table matches single versions, so it
//! enables message format v1, and with it gzip, snappy and lz4, only if the
//! broker's ranges include Produce v2 and Fetch v2. Kafka 4.0 works around it
//! the same way (KAFKA-18659): the ranges start at 0 while the old versions
//! are refused. Every client picks the highest version both sides know, so
//! none sends them; one that does has its connection closed, with a log line.
//!
//! kafka-python infers the broker's version from these ranges and only
//! produces v2 batches when it infers 0.11 or later; Metadata v12, ListOffsets
//! v7 and JoinGroup v9 make it infer 3.2.
//!
//! The consumer-group APIs (with ListGroups, DescribeGroups and
//! DeleteGroups) and InitProducerId are served by `kafka::group`; FindCoordinator v0 stays in
//! the table for old librdkafka, which enables lz4 only if it is there.
//!
//! ACLs are managed with CreateAcls, DescribeAcls and DeleteAcls 1–3
//! (Kafka 4.0 dropped v0, which had no pattern type; `kafka::acl`).
//!
//! SCRAM users are managed with DescribeUserScramCredentials and
//! AlterUserScramCredentials v0, the only version Kafka has (`kafka::auth`).
//!
//! Transactions are served at transactions version 0 (no
//! `transaction.version` finalized feature is advertised, so clients stay
//! off KIP-890's second part): AddPartitionsToTxn only in its client
//! versions (0–3; 4 and up are a broker's), EndTxn up to 4 (5 is the
//! second part's).

use kafka_protocol::ResponseError;
use kafka_protocol::messages::ApiKey;
use kafka_protocol::messages::api_versions_response::{ApiVersion, ApiVersionsResponse};

/// One served API.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Served {
    pub key: ApiKey,
    /// The range ApiVersions advertises.
    pub min: i16,
    pub max: i16,
    /// The lowest version actually decoded and answered.
    pub served_min: i16,
}

const fn api(key: ApiKey, min: i16, max: i16) -> Served {
    Served {
        key,
        min,
        max,
        served_min: min,
    }
}

/// The table, in API key order.
pub const SERVED: &[Served] = &[
    Served {
        key: ApiKey::Produce,
        min: 0,
        max: 9,
        served_min: 3,
    },
    Served {
        key: ApiKey::Fetch,
        min: 0,
        max: 12,
        served_min: 4,
    },
    api(ApiKey::ListOffsets, 1, 7),
    api(ApiKey::Metadata, 0, 12),
    api(ApiKey::OffsetCommit, 2, 9),
    api(ApiKey::OffsetFetch, 1, 9),
    api(ApiKey::FindCoordinator, 0, 4),
    api(ApiKey::JoinGroup, 0, 9),
    api(ApiKey::Heartbeat, 0, 4),
    api(ApiKey::LeaveGroup, 0, 5),
    api(ApiKey::SyncGroup, 0, 5),
    api(ApiKey::DescribeGroups, 0, 5),
    api(ApiKey::ListGroups, 0, 5),
    api(ApiKey::SaslHandshake, 0, 1),
    api(ApiKey::ApiVersions, 0, 3),
    api(ApiKey::CreateTopics, 2, 7),
    api(ApiKey::DeleteTopics, 1, 6),
    api(ApiKey::DeleteRecords, 0, 2),
    api(ApiKey::InitProducerId, 0, 5),
    api(ApiKey::AddPartitionsToTxn, 0, 3),
    api(ApiKey::AddOffsetsToTxn, 0, 3),
    api(ApiKey::EndTxn, 0, 4),
    api(ApiKey::TxnOffsetCommit, 0, 3),
    api(ApiKey::DescribeAcls, 1, 3),
    api(ApiKey::CreateAcls, 1, 3),
    api(ApiKey::DeleteAcls, 1, 3),
    api(ApiKey::DescribeConfigs, 1, 4),
    api(ApiKey::AlterConfigs, 0, 2),
    api(ApiKey::SaslAuthenticate, 0, 2),
    api(ApiKey::CreatePartitions, 0, 3),
    api(ApiKey::DeleteGroups, 0, 2),
    api(ApiKey::IncrementalAlterConfigs, 0, 1),
    api(ApiKey::DescribeUserScramCredentials, 0, 0),
    api(ApiKey::AlterUserScramCredentials, 0, 0),
    api(ApiKey::DescribeTransactions, 0, 0),
    api(ApiKey::ListTransactions, 0, 1),
];

/// The entry for an API, if it is served at all.
pub fn served(key: ApiKey) -> Option<&'static Served> {
    SERVED.iter().find(|s| s.key == key)
}

/// A readable name for log lines.
pub fn api_name(key: ApiKey) -> &'static str {
    match key {
        ApiKey::Produce => "Produce",
        ApiKey::Fetch => "Fetch",
        ApiKey::ListOffsets => "ListOffsets",
        ApiKey::Metadata => "Metadata",
        ApiKey::OffsetCommit => "OffsetCommit",
        ApiKey::OffsetFetch => "OffsetFetch",
        ApiKey::FindCoordinator => "FindCoordinator",
        ApiKey::JoinGroup => "JoinGroup",
        ApiKey::Heartbeat => "Heartbeat",
        ApiKey::LeaveGroup => "LeaveGroup",
        ApiKey::SyncGroup => "SyncGroup",
        ApiKey::DescribeGroups => "DescribeGroups",
        ApiKey::ListGroups => "ListGroups",
        ApiKey::SaslHandshake => "SaslHandshake",
        ApiKey::SaslAuthenticate => "SaslAuthenticate",
        ApiKey::ApiVersions => "ApiVersions",
        ApiKey::CreateTopics => "CreateTopics",
        ApiKey::DeleteTopics => "DeleteTopics",
        ApiKey::DeleteRecords => "DeleteRecords",
        ApiKey::InitProducerId => "InitProducerId",
        ApiKey::DescribeAcls => "DescribeAcls",
        ApiKey::CreateAcls => "CreateAcls",
        ApiKey::DeleteAcls => "DeleteAcls",
        ApiKey::DescribeConfigs => "DescribeConfigs",
        ApiKey::AlterConfigs => "AlterConfigs",
        ApiKey::CreatePartitions => "CreatePartitions",
        ApiKey::DeleteGroups => "DeleteGroups",
        ApiKey::IncrementalAlterConfigs => "IncrementalAlterConfigs",
        ApiKey::DescribeUserScramCredentials => "DescribeUserScramCredentials",
        ApiKey::AlterUserScramCredentials => "AlterUserScramCredentials",
        _ => "an API not served",
    }
}

/// The ApiVersions answer: the table, or UNSUPPORTED_VERSION with the table
/// for a version above what is served (the client retries with one of ours).
pub fn api_versions(supported: bool) -> ApiVersionsResponse {
    let keys = SERVED
        .iter()
        .map(|s| {
            ApiVersion::default()
                .with_api_key(s.key as i16)
                .with_min_version(s.min)
                .with_max_version(s.max)
        })
        .collect();
    let error = if supported {
        0
    } else {
        ResponseError::UnsupportedVersion.code()
    };
    ApiVersionsResponse::default()
        .with_error_code(error)
        .with_api_keys(keys)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_served_range_is_one_the_codec_knows() {
        for s in SERVED {
            let codec = s.key.valid_versions();
            assert!(s.min <= s.served_min && s.served_min <= s.max, "{s:?}");
            assert!(
                codec.min <= s.served_min && s.max <= codec.max,
                "{:?}: served {}..{} but the codec knows {}..{}",
                s.key,
                s.served_min,
                s.max,
                codec.min,
                codec.max
            );
        }
        let mut keys: Vec<i16> = SERVED.iter().map(|s| s.key as i16).collect();
        let sorted = {
            let mut k = keys.clone();
            k.sort();
            k
        };
        assert_eq!(keys, sorted);
        keys.dedup();
        assert_eq!(keys.len(), SERVED.len());
    }

    #[test]
    fn old_librdkafka_sees_message_format_v1_and_v2() {
        let has = |k: ApiKey, v: i16| served(k).is_some_and(|s| s.min <= v && v <= s.max);
        assert!(has(ApiKey::Produce, 2) && has(ApiKey::Fetch, 2));
        assert!(has(ApiKey::Produce, 3) && has(ApiKey::Fetch, 4));
        assert!(has(ApiKey::Produce, 7) && has(ApiKey::Fetch, 10), "zstd");
        assert!(has(ApiKey::FindCoordinator, 0), "lz4");
        assert!(has(ApiKey::ListOffsets, 1), "offsets by time");
        assert!(has(ApiKey::Metadata, 4), "kafka-python infers >= 0.11");
    }
}
