//! The Kafka front door: the daemon's partitions served over the Kafka wire
//! protocol, beside the tree (`fs`) and over the same storage objects.
//!
//! The rooms, by Kafka's own split:
//! - [`server`]: the broker (`BrokerServer`): [`KafkaServer`] checks the
//!   settings, binds the listeners, and starts and stops the network layer,
//!   the handlers and the coordinators' expiry threads;
//! - [`network`]: the listener's threads (`SocketServer`): an acceptor and
//!   network threads polling non-blocking connections (`socket_server`,
//!   `acceptor`, `processor`, a connection's state machine in
//!   `connection`); request framing and the size limit (`frame`); TLS with
//!   rustls (`tls`); record bytes from the page cache to the socket
//!   (`splice`); connection quotas, the memory pool of requests in flight,
//!   the file descriptors kept for storage (`limits`); who a connection is
//!   (`session`). It knows the handlers only through the request queue
//!   (`handlers::workers`), and the coordinators not at all;
//! - [`handlers`]: the request handlers (`KafkaApis`): the handler threads
//!   and the fetch purgatory (`workers`); header, version check, body,
//!   handler, response (`dispatch`); what is advertised and served
//!   (`versions`); one file per API or family: `metadata`, `produce`,
//!   `fetch`, `list_offsets`, `topics` (CreateTopics, DeleteTopics,
//!   CreatePartitions), `delete_records`, `topic_configs` (DescribeConfigs,
//!   IncrementalAlterConfigs), `sasl`; and `internal_topics`, what clients
//!   may do to Kafka's internal topics and KRaft's metadata log;
//! - [`config`]: `listeners`, `advertised.listeners` and the other broker
//!   settings;
//! - [`broker`]: what every handler shares: the storage, the settings, and
//!   who this broker says it is;
//! - [`group`]: the group coordinator (FindCoordinator, JoinGroup,
//!   SyncGroup, Heartbeat, LeaveGroup, OffsetCommit, OffsetFetch,
//!   ListGroups, DescribeGroups, with `__consumer_offsets`) and
//!   InitProducerId;
//! - [`txn`]: the transaction coordinator (AddPartitionsToTxn,
//!   AddOffsetsToTxn, EndTxn, TxnOffsetCommit, DescribeTransactions,
//!   ListTransactions, with `__transaction_state`);
//! - [`coordinator_topic`]: what both coordinators' topics share;
//! - [`auth`]: SASL's mechanisms (PLAIN, SCRAM-SHA-256, SCRAM-SHA-512),
//!   a connection's exchange before it is served (`authenticator`), the
//!   users' SCRAM credentials, and AlterUserScramCredentials and
//!   DescribeUserScramCredentials;
//! - [`acl`]: Kafka's ACLs (`commitfs.acls`), `StandardAuthorizer`'s
//!   decision, the one-line checks every handler makes, and CreateAcls,
//!   DescribeAcls and DeleteAcls;
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
pub mod error;
pub mod group;
pub mod handlers;
pub mod network;
pub mod server;
pub mod txn;

// The paths the binary, the tests and the fuzz target name.
pub use handlers::{dispatch, workers};
pub use network::{limits, session, splice};

pub use alloc::LazyHugeAlloc;
pub use config::{Endpoint, Listener, ListenerConfig, SecurityProtocol};
pub use server::KafkaServer;
pub use session::{Principal, Session};
