//! The `commitfs` command: `mount`, `serve`, `dump`, `check`, `completions`, `man`;
//! run as `mount.fuse.commitfs`, the mount(8) helper.

mod cli;

/// A lying array length in a Kafka request must not abort the daemon (see
/// the allocator's module doc).
#[global_allocator]
static ALLOC: commitfs::kafka::LazyHugeAlloc = commitfs::kafka::LazyHugeAlloc;

use clap::Parser;
use clap::error::ErrorKind;

fn main() {
    // Built with the `failpoints` feature (for tests only), the storage
    // failpoints are set from FAILPOINTS (`site=action;...`), so a test can
    // inject a fault into a running daemon.
    #[cfg(feature = "failpoints")]
    let _failpoints = fail::FailScenario::setup();
    let args: Vec<std::ffi::OsString> = std::env::args_os().collect();
    if cli::mount_helper::invoked_as_helper(args.first()) {
        std::process::exit(cli::mount_helper::main(args));
    }
    let cli = match cli::Cli::try_parse_from(&args) {
        Ok(c) => c,
        Err(e) => {
            let _ = e.print();
            if matches!(
                e.kind(),
                ErrorKind::InvalidSubcommand | ErrorKind::UnknownArgument
            ) && let Some(hint) = cli::mount_helper::mount_fuse_hint(&args)
            {
                eprintln!("{hint}");
            }
            std::process::exit(e.exit_code());
        }
    };
    std::process::exit(cli::run(cli));
}
