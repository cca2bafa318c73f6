//! The network layer, as Kafka's `SocketServer`: the acceptor and the
//! network threads polling connections, framing, TLS, sending record bytes
//! from the page cache, connection quotas and memory limits, and who a
//! connection is.

pub(crate) mod acceptor;
pub(crate) mod connection;
pub mod frame;
pub mod limits;
pub(crate) mod processor;
pub mod session;
pub(crate) mod shared;
pub(crate) mod socket_server;
pub mod splice;
pub mod tls;
