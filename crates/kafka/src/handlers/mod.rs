//! The request handlers, as Kafka's `KafkaApis`: the handler threads,
//! dispatch by API key and version, and one file per API or family.

/// A topic admin request refused: the code, and its message.
pub(crate) type Refused = (kafka_protocol::ResponseError, String);

pub mod delete_records;
pub mod dispatch;
pub mod fetch;
pub mod internal_topics;
pub mod list_offsets;
pub mod metadata;
pub mod outcome;
pub mod produce;
pub mod sasl;
pub mod topic_configs;
pub mod topics;
pub mod versions;
pub mod workers;
