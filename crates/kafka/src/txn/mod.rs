//! The transaction coordinator (Kafka's `kafka.coordinator.transaction`),
//! built up slice by slice: the state machine of one transactional id,
//! its topic `__transaction_state`, the state manager that loads and
//! writes it, the coordinator's answers, and the client APIs over them.

pub mod api;
pub mod cleanup;
pub mod coordinator;
pub mod log;
pub mod metadata;
pub mod state;
