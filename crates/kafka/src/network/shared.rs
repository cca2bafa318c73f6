//! What the listener's threads share: the acceptor, the network threads
//! and the code that starts them each take it from here, below them all.

use std::sync::Arc;
use std::time::Duration;

use mio::Token;

use super::limits::{ConnectionQuotas, MemoryPool};
use crate::broker::Broker;
use crate::handlers::workers::Workers;

/// The waker's token on every poll.
pub(crate) const WAKER: Token = Token(usize::MAX);

/// What every thread of the listener shares.
pub(crate) struct Shared {
    pub(crate) broker: Arc<Broker>,
    /// Each listener's TLS config (`None`: a plaintext listener).
    pub(crate) tls: Vec<Option<Arc<rustls::ServerConfig>>>,
    /// Each listener's SASL mechanisms (`None`: no SASL).
    pub(crate) sasl: Vec<Option<Vec<String>>>,
    /// `connection.failed.authentication.delay.ms`.
    pub(crate) failed_auth_delay: Duration,
    pub(crate) quotas: ConnectionQuotas,
    pub(crate) pool: Arc<MemoryPool>,
    pub(crate) workers: Arc<Workers>,
    pub(crate) idle: Option<Duration>,
    pub(crate) max_request: usize,
}
