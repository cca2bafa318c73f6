//! The transaction coordinator (Kafka's `kafka.coordinator.transaction`),
//! built up slice by slice (issue 21): so far the state machine of one
//! transactional id, its topic, `__transaction_state`, and the state
//! manager that loads and writes it.

pub mod coordinator;
pub mod log;
pub mod metadata;
pub mod state;
