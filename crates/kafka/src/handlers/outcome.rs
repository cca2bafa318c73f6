//! What a handler decides, apart from the dispatch that acts on it, so
//! the handlers and the dispatch that calls them each depend on this and
//! not on one another.

use std::time::Instant;

use kafka_protocol::messages::ResponseKind;
use kafka_protocol::messages::fetch_response::FetchResponse;

use crate::broker::Broker;
use commitfs_storage::SegmentSlice;

/// What a handler decided.
pub enum Outcome {
    Respond(ResponseKind),
    /// A Fetch response and the file slices its placeholders stand for.
    Fetch(FetchResponse, Vec<SegmentSlice>),
    /// Produce with acks=0: Kafka sends nothing back.
    Silent,
    /// Close the connection (acks=0 Produce that failed: the only way to tell).
    Close(String),
    /// A Fetch long poll: to be read again later (see
    /// [`super::dispatch::Parked`]).
    Wait(Box<dyn DelayedOperation>),
}

/// Kafka's `DelayedOperation`: a request parked until the data it waits
/// for may be there, tried again by whoever keeps it. A trait so that the
/// dispatch keeps a Fetch's long poll without naming the Fetch handler.
pub trait DelayedOperation: Send {
    fn deadline(&self) -> Instant;

    /// The append generation the last read saw.
    fn seen(&self) -> u64;

    fn retry(self: Box<Self>, b: &Broker) -> Outcome;
}
