//! A reference-model test of the whole tree, with no root and no FUSE (the
//! pattern of mountpoint-s3's reftests): proptest generates sequences of
//! operations (mkdir/rmdir with valid and invalid names, appends split
//! across random WRITEs, held handles, roll, flush, delete-records, config
//! writes, retention passes, clean remounts and crashes, refusals); each runs
//! against the tree (`commitfs::fs::Tree`, driven as the kernel would) and
//! against a small in-memory model, and after every step the whole tree is
//! compared with the model (see `model/compare.rs`).
//!
//! The sequences run over every backend, each behind `model::system::System`
//! with its `Profile` (what the model is told rather than learns): memory
//! (`mem_tree_matches_the_model`, `COMMITFS_MODEL_MEM_CASES`, 1,024 cases
//! by default, half of them without `roll` and `flush`), a local data
//! directory (`tree_matches_the_model`, `PROPTEST_CASES`, 256), and a
//! cluster on librdkafka's mock cluster and on our own listener
//! (`cluster_tree_matches_the_model`,
//! `cluster_tree_over_our_listener_matches_the_model`,
//! `COMMITFS_MODEL_CLUSTER_CASES`, 64 each; `model/cluster.rs` says which
//! operations each skips and why). A failure is shrunk and its seed kept in
//! `proptest-regressions/model*.txt`, replayed before new cases; the
//! failures found so far are also spelled out below as named regression
//! tests. `COMMITFS_MODEL_TRACE=1` prints every outcome, `RUST_LOG` the
//! library's log. Data directories live under the system temp dir; most of
//! the local variant's time is the implementation's fsyncs, so
//! `TMPDIR=/dev/shm` makes it faster.

#[path = "support/access.rs"]
mod access;
#[path = "support/copy_tree.rs"]
mod copy_tree;
#[path = "kafka_support/mod.rs"]
mod kafka_support;
#[path = "support/read_to_end.rs"]
mod read_to_end;

mod model {
    pub mod cluster;
    pub mod compare;
    pub mod configs;
    pub mod groups;
    pub mod harness;
    pub mod ops;
    pub mod probes;
    pub mod reference;
    pub mod spec;
    pub mod system;
}

use model::cluster::ClusterSystem;
use model::harness::Harness;
use model::ops::{self, Op};
use model::system::{LocalSystem, MemSystem, System};
use proptest::prelude::*;
use proptest::test_runner::FileFailurePersistence;

/// Operations per sequence, at most.
const MAX_OPS: usize = 60;

/// The library's log lines, shown with `RUST_LOG` set.
fn log_to_stderr() {
    let _ = env_logger::builder().is_test(true).try_init();
}

/// A sequence, the entries one readdir call may return, the bytes per read.
fn case() -> impl Strategy<Value = (Vec<Op>, usize, u32)> {
    (
        ops::ops(MAX_OPS),
        prop::sample::select(vec![0usize, 1, 3]),
        prop::sample::select(vec![7u32, 512, 4096]),
    )
}

/// Runs a case over `sys`, comparing with the model after every step.
fn check<S: System>(sys: S, (ops, readdir_limit, chunk): (Vec<Op>, usize, u32)) {
    log_to_stderr();
    Harness::new(sys, readdir_limit, chunk).run(&ops);
}

fn run(ops: &[Op], readdir_limit: usize, chunk: u32) {
    check(LocalSystem::new(), (ops.to_vec(), readdir_limit, chunk));
}

/// Where a variant keeps the seeds of its failures: integration tests have
/// no lib.rs beside them for proptest's default location.
macro_rules! seeds {
    ($file:literal) => {
        concat!(env!("CARGO_MANIFEST_DIR"), "/proptest-regressions/", $file)
    };
}

/// `cases` cases, or as many as the environment variable `var` says.
fn config(var: &str, cases: u32, seeds: &'static str) -> ProptestConfig {
    let cases = std::env::var(var)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(cases);
    ProptestConfig {
        cases,
        failure_persistence: Some(Box::new(FileFailurePersistence::Direct(seeds))),
        ..ProptestConfig::default()
    }
}

proptest! {
    #![proptest_config(config("COMMITFS_MODEL_CLUSTER_CASES", 64, seeds!("model-cluster.txt")))]

    #[test]
    fn cluster_tree_matches_the_model(c in case()) {
        check(ClusterSystem::mock(), c);
    }

    #[test]
    fn cluster_tree_over_our_listener_matches_the_model(c in case()) {
        check(ClusterSystem::listener(), c);
    }
}

proptest! {
    #![proptest_config(config("COMMITFS_MODEL_MEM_CASES", 1024, seeds!("model-mem.txt")))]

    #[test]
    fn mem_tree_matches_the_model(c in case(), log_control in any::<bool>()) {
        check(MemSystem::new(log_control), c);
    }
}

proptest! {
    #![proptest_config(config("PROPTEST_CASES", 256, seeds!("model.txt")))]

    #[test]
    fn tree_matches_the_model(c in case()) {
        check(LocalSystem::new(), c);
    }
}

/// Failures the model found, shrunk, kept as named cases.
mod regressions {
    use super::model::ops::{Arg, NameRef, OffsetArg, Op, Payload, Target};
    use super::run;

    fn lines(text: &str) -> Op {
        Op::Append {
            part: 0,
            data: Payload {
                bytes: text.as_bytes().to_vec(),
                cuts: Vec::new(),
            },
        }
    }

    fn write(offset: OffsetArg, value: u8) -> Op {
        Op::WriteHandle {
            handle: 0,
            arg: Arg { offset, value },
        }
    }

    fn roll() -> Op {
        Op::Echo {
            part: 0,
            target: Target::Roll,
            arg: Arg {
                offset: OffsetArg::End,
                value: 0,
            },
        }
    }

    /// A handle of `flush` held across `rmdir t-0 && mkdir t-0` flushed the
    /// new partition instead of refusing.
    #[test]
    fn flush_through_a_handle_of_a_deleted_partition() {
        let ops = [
            Op::Mkdir(NameRef::Valid(0)),
            Op::Open {
                part: 0,
                target: Target::Flush,
            },
            Op::Recreate(0),
            write(OffsetArg::Within(0), 0),
        ];
        run(&ops, 0, 7);
    }

    /// A handle of `delete-records` held across `rmdir t-0 && mkdir t-0`
    /// moved the old partition's log start, wrote it to the new one's
    /// checkpoint and deleted the new one's segment files (same paths):
    /// after a remount the new partition's record was gone.
    #[test]
    fn delete_records_through_a_handle_of_a_deleted_partition() {
        let ops = [
            Op::Mkdir(NameRef::Valid(0)),
            lines("a\nb\n"),
            roll(),
            lines("c\n"),
            Op::Open {
                part: 0,
                target: Target::DeleteRecords,
            },
            Op::Recreate(0),
            lines("x\n"),
            write(OffsetArg::Within(2), 0),
            Op::Remount,
        ];
        run(&ops, 0, 4096);
    }

    /// A `config/retention.ms` handle held across `rmdir t-0 && mkdir t-0`
    /// wrote its override into the new partition's directory, where the
    /// next mount found it.
    #[test]
    fn config_write_through_a_handle_of_a_deleted_partition() {
        let ops = [
            Op::Mkdir(NameRef::Valid(0)),
            Op::Open {
                part: 0,
                target: Target::Config(5),
            },
            Op::Recreate(0),
            write(OffsetArg::End, 2),
            Op::Remount,
        ];
        run(&ops, 3, 512);
    }
}
