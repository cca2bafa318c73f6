//! clap commands. Each subcommand lives in its own file.

use clap::{Parser, Subcommand};

pub mod check;
mod cluster_mount;
pub mod completions;
mod daemon;
pub mod dump;
mod lock;
mod logging;
pub mod mount;
pub mod mount_helper;
mod options;
pub mod serve;
mod session;
mod signals;

#[derive(Parser, Debug)]
#[command(
    name = "commitfs",
    version,
    propagate_version = true,
    about = "Kafka partition logs as a FUSE filesystem"
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Subcommand, Debug)]
pub enum Command {
    /// Mount a data directory (Kafka log.dir) on a mountpoint.
    #[command(after_long_help = mount_helper::FSTAB_HELP)]
    Mount(mount::MountArgs),
    /// Serve a data directory over the Kafka protocol, without mounting it.
    Serve(serve::ServeArgs),
    /// Print the contents of .log, .index, .timeindex, .snapshot, .txnindex and KRaft .checkpoint files, as kafka-dump-log does.
    Dump(dump::DumpArgs),
    /// Check every segment, index and checkpoint of an unmounted data directory.
    Check(check::CheckArgs),
    /// Print a shell completion script (bash, zsh or fish).
    Completions(completions::CompletionsArgs),
    /// Print a man page: commitfs(1), or with a command name, commitfs-<command>(1).
    Man(completions::ManArgs),
}

/// Runs a command and returns the process exit code.
pub fn run(cli: Cli) -> i32 {
    match cli.command {
        Command::Mount(args) => mount::run(args),
        Command::Serve(args) => serve::run(args),
        Command::Dump(args) => dump::run(args),
        Command::Check(args) => check::run(args),
        Command::Completions(args) => completions::run(args),
        Command::Man(args) => completions::man(args),
    }
}
