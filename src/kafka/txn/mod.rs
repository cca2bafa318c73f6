//! The transaction coordinator (Kafka's `kafka.coordinator.transaction`),
//! built up slice by slice (issue 21): so far the state machine of one
//! transactional id, and its topic, `__transaction_state`.

pub mod log;
pub mod metadata;
