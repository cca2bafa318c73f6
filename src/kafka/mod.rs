//! The Kafka front door: the daemon's partitions served over the Kafka wire
//! protocol, beside the tree (`fs`) and over the same storage objects.
//!
//! The rooms:
//! - [`config`]: `listeners`, `advertised.listeners` and the other broker
//!   settings;
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
//!   [`records`] (DeleteRecords), [`configs`] (DescribeConfigs,
//!   IncrementalAlterConfigs), [`sasl`];
//! - [`group`]: the group coordinator (FindCoordinator, JoinGroup,
//!   SyncGroup, Heartbeat, LeaveGroup, OffsetCommit, OffsetFetch,
//!   ListGroups, DescribeGroups, with `__consumer_offsets`) and
//!   InitProducerId;
//! - [`splice`]: record bytes from the page cache to the socket (`sendfile`);
//! - [`error`]: why a connection is closed, and the one mapping from storage
//!   errors to Kafka error codes;
//! - [`alloc`]: the allocator that keeps a lying array length from aborting.
//!
//! PLAINTEXT only: there is no authentication and no encryption. Anyone who
//! can reach the listener can read and write every partition.

pub mod alloc;
pub mod broker;
pub mod config;
pub mod configs;
pub mod dispatch;
pub mod error;
pub mod fetch;
pub mod frame;
pub mod group;
pub mod limits;
pub mod list_offsets;
pub mod metadata;
pub mod produce;
pub mod records;
pub mod sasl;
pub mod server;
pub mod splice;
pub mod topics;
pub mod versions;
pub mod workers;

pub use alloc::LazyHugeAlloc;
pub use config::{Endpoint, ListenerConfig};
pub use server::KafkaServer;
