//! `commitfs dump` run as a process, for the tests that hold its lines
//! against Kafka's.

use std::path::Path;
use std::process::Command;

/// `commitfs dump ARGS FILES`: exit code, stdout and stderr; a panic's
/// message fails the test whatever else the run printed.
pub fn dump(args: &[&str], files: &[&Path]) -> (i32, String, String) {
    let out = super::bounded::run(
        Command::new(env!("CARGO_BIN_EXE_commitfs"))
            .arg("dump")
            .args(args)
            .args(files),
        &format!("commitfs dump {args:?}"),
    );
    let stderr = String::from_utf8(out.stderr).unwrap();
    assert!(!stderr.contains("panicked"), "{stderr}");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8(out.stdout).unwrap(),
        stderr,
    )
}
