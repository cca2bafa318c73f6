//! The tree over a Kafka cluster, driven through its API (no kernel), each
//! test twice:
//! - `mock::*` against librdkafka's in-process mock cluster, which serves
//!   the data plane (Metadata, Produce, Fetch, ListOffsets, InitProducerId)
//!   but none of the admin APIs and no lookup by time: there those calls are
//!   checked to fail with an errno within the timeout;
//! - `broker::*` against a broker that serves them all: our own listener
//!   (`commitfs serve` of a fresh data directory, started per test), or the
//!   broker named by `COMMITFS_TEST_BOOTSTRAP=host:port`. Extra client
//!   properties for that broker go in `COMMITFS_TEST_OPTIONS=k=v,k=v`.
//!
//! A few fault tests stop the broker and run on the mock cluster only.

#[path = "../kafka_support/mod.rs"]
mod kafka_support;

/// Instantiates each named test, a `fn(Kind)`, once per kind of cluster.
macro_rules! on_every_cluster {
    ($($name:ident),* $(,)?) => {
        mod mock {
            $( #[test] fn $name() { super::$name($crate::fixture::Kind::Mock) } )*
        }
        mod broker {
            $( #[test] fn $name() { super::$name($crate::fixture::Kind::Broker) } )*
        }
    };
}

mod admin;
mod data;
mod faults;
mod fixture;
