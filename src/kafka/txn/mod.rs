//! The transaction coordinator (Kafka's `kafka.coordinator.transaction`),
//! built up slice by slice (issue 21): so far the state machine of one
//! transactional id.

pub mod metadata;
