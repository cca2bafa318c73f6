//! Who a request came from: the listener it came in on (whose advertised
//! address Metadata and FindCoordinator answer, as Kafka answers from
//! `request.context.listenerName`) and the peer's address.

use std::net::SocketAddr;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Session {
    /// The index of the listener in the broker's list.
    pub listener: usize,
    pub peer: SocketAddr,
}
