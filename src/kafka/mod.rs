//! The Kafka front door: the daemon's partitions served over the Kafka wire
//! protocol, beside the tree (`fs`) and over the same storage objects.
//!
//! The rooms:
//! - [`config`]: `listeners`, `advertised.listeners` and the other broker
//!   settings;
//! - [`broker`]: what every handler shares: the storage, the settings, and
//!   who this broker says it is;
//! - [`server`]: the listener: an acceptor, network threads polling
//!   non-blocking connections, shutdown;
//! - [`limits`]: connection quotas, the memory pool of requests in flight,
//!   the file descriptors kept for storage;
//! - [`workers`]: the request handler threads and the fetch purgatory;
//! - [`frame`]: request framing and the size limit;
//! - [`dispatch`]: header, version check, body, handler, response;
//! - [`versions`]: what is advertised and served (ApiVersions);
//! - one file per API or family: [`metadata`], [`produce`], [`fetch`],
//!   [`list_offsets`], [`topics`] (CreateTopics, DeleteTopics),
//!   [`delete_records`], [`topic_configs`] (DescribeConfigs,
//!   IncrementalAlterConfigs), [`sasl`];
//! - [`auth`]: SASL's mechanisms (PLAIN, SCRAM-SHA-256, SCRAM-SHA-512),
//!   a connection's exchange before it is served (`authenticator`), the
//!   users' SCRAM credentials, and AlterUserScramCredentials and
//!   DescribeUserScramCredentials;
//! - [`tls`]: TLS with rustls: the server config from Kafka's `ssl.*`
//!   settings, a connection's TLS over a non-blocking socket, the principal
//!   of a client certificate;
//! - [`acl`]: Kafka's ACLs (`commitfs.acls`), `StandardAuthorizer`'s
//!   decision, the one-line checks every handler makes, and CreateAcls,
//!   DescribeAcls and DeleteAcls;
//! - [`internal_topics`]: what clients may do to Kafka's internal topics
//!   and KRaft's metadata log, as Kafka answers;
//! - [`group`]: the group coordinator (FindCoordinator, JoinGroup,
//!   SyncGroup, Heartbeat, LeaveGroup, OffsetCommit, OffsetFetch,
//!   ListGroups, DescribeGroups, with `__consumer_offsets`) and
//!   InitProducerId;
//! - [`splice`]: record bytes from the page cache to the socket (`sendfile`);
//! - [`error`]: why a connection is closed, and the one mapping from kinds
//!   of failure to Kafka error codes, a table per family of APIs;
//! - [`alloc`]: the allocator that keeps a lying array length from aborting.
//!
//! A PLAINTEXT listener has no authentication and no encryption; SSL,
//! SASL_PLAINTEXT and SASL_SSL listeners authenticate (`tls`, `auth`).
//! Without `authorizer.class.name` every request is allowed, as in Kafka:
//! anyone who can reach a listener (and, on a SASL or TLS one,
//! authenticate) can read and write every partition.

pub mod acl;
pub mod alloc;
pub mod auth;
pub mod broker;
pub mod config;
pub mod coordinator_topic;
pub mod delete_records;
pub mod dispatch;
pub mod error;
pub mod fetch;
pub mod frame;
pub mod group;
pub mod internal_topics;
pub mod limits;
pub mod list_offsets;
pub mod metadata;
pub mod produce;
pub mod sasl;
pub mod server;
pub mod session;
pub mod splice;
pub mod tls;
pub mod topic_configs;
pub mod topics;
pub mod txn;
pub mod versions;
pub mod workers;

pub use alloc::LazyHugeAlloc;
pub use config::{Endpoint, Listener, ListenerConfig, SecurityProtocol};
pub use server::KafkaServer;
pub use session::{Principal, Session};
