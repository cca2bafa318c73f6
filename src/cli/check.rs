//! `commitfs check`: an offline fsck of a data directory.

use std::path::PathBuf;

use clap::Args;
use commitfs::storage::LogConfig;
use commitfs::storage::check::{check_data_dir, repair_data_dir};

#[derive(Args, Debug)]
pub struct CheckArgs {
    /// The data directory (Kafka log.dir). It must not be mounted.
    pub data_dir: PathBuf,
    /// Check only this partition (`<topic>-<partition>`).
    #[arg(long)]
    pub partition: Option<String>,
    /// Do what recovery would do: truncate at the first bad batch, drop later
    /// segments, rebuild indexes. Reports what it removed.
    #[arg(long)]
    pub repair: bool,
    /// The mount-wide topic configs the data was written with, as given to
    /// `mount -o` (index.interval.bytes decides where index entries belong).
    #[arg(short = 'o', value_name = "KEY=VALUE[,KEY=VALUE]")]
    pub options: Vec<String>,
}

/// Exit codes: 0 no problems (notes only, or nothing), 1 problems found
/// (repaired with `--repair`), 2 could not check, or problems remain after
/// a repair.
pub fn run(args: CheckArgs) -> i32 {
    let mut defaults = LogConfig::default();
    for opt in args.options.iter().flat_map(|o| o.split(',')) {
        let Some((k, v)) = opt.split_once('=') else {
            eprintln!("commitfs check: expected KEY=VALUE, got {opt:?}");
            return 2;
        };
        // The line format is the tree's, not the data's: taken and unused.
        let (k, mut line_format) = (k.trim(), commitfs::backend::LineFormat::default());
        let taken = match commitfs::backend::LineFormat::is_setting(k) {
            true => line_format.set(k, v),
            false => defaults.set(k, v).map_err(|e| e.to_string()),
        };
        if let Err(e) = taken {
            eprintln!("commitfs check: {e}");
            return 2;
        }
    }
    if let Err(e) = super::lock::wait_for_release(&args.data_dir, "check") {
        eprintln!("commitfs check: {e}");
        return 2;
    }
    let report = match check_data_dir(&args.data_dir, &defaults, args.partition.as_deref()) {
        Ok(r) => r,
        Err(e) => {
            eprintln!("commitfs check: {e}");
            return 2;
        }
    };
    for p in &report.problems {
        println!("{p}");
    }
    for n in &report.notes {
        println!("note: {n}");
    }
    println!(
        "Checked {} partitions, {} segments, {} batches: {} problems, {} notes",
        report.partitions,
        report.segments,
        report.batches,
        report.problems.len(),
        report.notes.len()
    );
    // Notes are what Kafka loads as it is: nothing to repair.
    if !report.has_problems() {
        return 0;
    }
    if !args.repair {
        return 1;
    }
    match repair_data_dir(&args.data_dir, &defaults, &report) {
        Ok(r) => {
            for a in &r.actions {
                println!("Repair: {a}");
            }
        }
        Err(e) => {
            eprintln!("commitfs check: repair failed: {e}");
            return 2;
        }
    }
    match check_data_dir(&args.data_dir, &defaults, args.partition.as_deref()) {
        Ok(after) if !after.has_problems() => {
            println!("After repair: clean");
            1
        }
        Ok(after) => {
            for p in &after.problems {
                println!("After repair: {p}");
            }
            2
        }
        Err(e) => {
            eprintln!("commitfs check: {e}");
            2
        }
    }
}
