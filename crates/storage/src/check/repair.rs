//! `repair`: what recovery would do, done offline.

use super::*;

/// What `repair` changed.
#[derive(Clone, Debug, Default)]
pub struct RepairReport {
    pub actions: Vec<String>,
}

/// Does what recovery would do for every damaged partition: recovery from
/// the first damaged segment (truncating at the first bad batch, dropping
/// later segments) and index rebuilds; and what the load does with a
/// producer snapshot it cannot read: deletes it. Returns what it removed.
pub fn repair_data_dir(
    dir: &Path,
    defaults: &LogConfig,
    report: &CheckReport,
) -> Result<RepairReport> {
    let mut out = RepairReport::default();
    let snapshots: Vec<&Path> = report
        .problems
        .iter()
        .map(|p| p.file.as_path())
        .filter(|f| file_suffix(f) == Some("snapshot") && f.exists())
        .collect();
    let mut lengths: Vec<&Path> = report
        .problems
        .iter()
        .map(|p| p.file.as_path())
        .filter(|f| {
            let name = f.file_name().and_then(|n| n.to_str());
            matches!(name, Some(STREAM_LENGTHS_FILE | COMMITTED_LENGTHS_FILE)) && f.exists()
        })
        .collect();
    lengths.dedup();
    if report.damaged.is_empty() && snapshots.is_empty() && lengths.is_empty() {
        return Ok(out);
    }
    // Held before anything is changed: a mounted directory is refused here,
    // whatever the caller checked before.
    let lock = DataDirLock::acquire(dir)?;
    for f in snapshots {
        disk::remove_file("repair.remove_snapshot", f).at(f)?;
        out.actions.push(format!(
            "removed {}, a producer snapshot Kafka would delete at load",
            f.display()
        ));
    }
    for f in lengths {
        disk::remove_file("repair.remove_stream_lengths", f).at(f)?;
        out.actions.push(format!(
            "removed {}, whose saved stream lengths were wrong: counted again when first needed",
            f.display()
        ));
    }
    if report.damaged.is_empty() {
        return Ok(out);
    }
    let before = sizes(dir)?;
    // Make recovery start at the first damaged segment of each damaged partition,
    // and drop damaged index files so they are rebuilt from the log.
    let rp_path = dir.join(RECOVERY_POINT_FILE);
    let mut rps = checkpoint::read(&rp_path);
    for (name, base) in &report.damaged {
        let (topic, partition) = parse_partition_name(name)?;
        let rp = rps.entry((topic, partition)).or_insert(*base);
        *rp = (*rp).min(*base);
    }
    checkpoint::write_atomically(&rp_path, checkpoint::format(&rps).as_bytes())?;
    for p in &report.problems {
        if matches!(file_suffix(&p.file), Some("index" | "timeindex")) && p.file.exists() {
            disk::remove_file("repair.remove_index", &p.file).at(&p.file)?;
            out.actions.push(format!(
                "removed {} to rebuild it from the log",
                p.file.display()
            ));
        }
    }
    let marker = dir.join(CLEAN_SHUTDOWN_FILE);
    if marker.exists() {
        disk::remove_file("repair.remove_marker", &marker).at(&marker)?;
    }
    let mgr = LogManager::open_with_lock(dir, defaults.clone(), OpenOptions::default(), lock)?;
    mgr.close()?;
    let after = sizes(dir)?;
    for (path, size) in &before {
        match after.get(path) {
            None => out
                .actions
                .push(format!("deleted {} ({size} bytes)", path.display())),
            Some(a) if a < size && path.extension().is_some_and(|e| e == "log") => {
                out.actions.push(format!(
                    "truncated {} by {} bytes",
                    path.display(),
                    size - a
                ))
            }
            _ => {}
        }
    }
    Ok(out)
}

/// The suffix of a segment-named file (`00000000000000000042.index`).
fn file_suffix(path: &Path) -> Option<&str> {
    let name = path.file_name()?.to_str()?;
    parse_segment_file_name(name).map(|(_, suffix)| suffix)
}

fn sizes(dir: &Path) -> Result<BTreeMap<PathBuf, u64>> {
    let mut out = BTreeMap::new();
    for e in fs::read_dir(dir).at(dir)?.filter_map(|e| e.ok()) {
        if e.file_type().is_ok_and(|t| t.is_dir()) {
            for f in fs::read_dir(e.path()).at(&e.path())?.filter_map(|f| f.ok()) {
                if let Ok(m) = f.metadata() {
                    out.insert(f.path(), m.len());
                }
            }
        }
    }
    Ok(out)
}
