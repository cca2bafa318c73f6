//! Refusals and no-ops, each answered with the errno of the README's table:
//! opens in the wrong mode, setattr, xattr changes, name changes, lookups of
//! names that are not there, and reads of `log` at a position.

use std::ffi::OsStr;

use commitfs::fs::{NoPassthrough, SetAttr};

use super::configs;
use super::harness::{Harness, READ, WRITE, errno, refs};
use super::ops::{ChildName, NAME_CHANGES, Node, OTHER_NAMES, Probe, SetKind};
use super::spec::canonical_decimal;
use super::system::System;

impl<S: System> Harness<S> {
    pub fn probe(&mut self, part: &str, probe: &Probe) {
        match probe {
            Probe::OpenWrite(node) | Probe::OpenRead(node) => {
                let write = matches!(probe, Probe::OpenWrite(_));
                self.probe_open(part, *node, write);
            }
            Probe::Setattr(node, kind) => self.probe_setattr(part, *node, *kind),
            Probe::XattrChange(node, set) => {
                let (path, exists) = self.node(part, *node);
                let op = if *set { "setxattr" } else { "removexattr" };
                let got = self.resolve(&refs(&path)).map(|ino| {
                    let e = self
                        .sys
                        .tree()
                        .refuse_xattr_change(op, ino, OsStr::new("user.x"));
                    e.errno
                });
                let want = if exists {
                    Ok(libc::EPERM)
                } else {
                    Err(libc::ENOENT)
                };
                self.outcome(&format!("{op} on {path:?}"), got, want);
            }
            Probe::GetxattrAbsent(node) => {
                let (path, exists) = self.node(part, *node);
                // offset/N has no such name; other nodes have no attributes.
                let name = match node {
                    Node::Offset(_) => "user.kafka.nope",
                    _ => "user.kafka.timestamp",
                };
                let got = self.resolve(&refs(&path)).and_then(|ino| {
                    errno(self.sys.tree().getxattr(ino, OsStr::new(name))).map(|_| ())
                });
                let want = Err(if exists { libc::ENODATA } else { libc::ENOENT });
                self.outcome(&format!("getxattr {name} of {path:?}"), got, want);
                if exists && !matches!(node, Node::Offset(_)) {
                    let ino = self.resolve(&refs(&path)).expect("exists");
                    let list = errno(self.sys.tree().listxattr(ino));
                    self.same(&format!("listxattr of {path:?}"), list, Ok(Vec::new()));
                }
            }
            Probe::NameChange(node, op, child) => {
                let op = NAME_CHANGES[*op as usize % NAME_CHANGES.len()];
                self.probe_name_change(part, *node, op, child);
            }
            Probe::MkdirIn(child) | Probe::RmdirIn(child) => {
                let mkdir = matches!(probe, Probe::MkdirIn(_));
                self.probe_dir_change(part, child, mkdir);
            }
            Probe::Lookup(node, child) => {
                let (path, exists) = self.node(part, *node);
                let name = self.child_name(part, *node, child);
                let got = self.resolve(&refs(&path)).and_then(|ino| {
                    errno(self.sys.tree().lookup(ino, OsStr::new(&name))).map(|_| ())
                });
                let want = match (exists, self.child_exists(part, *node, &name)) {
                    (false, _) => Err(libc::ENOENT),
                    (true, None) => Err(libc::ENOTDIR),
                    (true, Some(true)) => Ok(()),
                    (true, Some(false)) => Err(libc::ENOENT),
                };
                self.outcome(&format!("lookup of {path:?}/{name}"), got, want);
            }
            Probe::ReadLogAt(pos, len) => self.probe_read_log(part, *pos, *len),
        }
    }

    /// The path of `node` in `part`, and whether the model says it exists.
    fn node(&self, part: &str, node: Node) -> (Vec<String>, bool) {
        let log_control = self.sys.profile().log_control;
        let Some(p) = self.model.partitions.get(part) else {
            let exists = matches!(node, Node::Root);
            let path = if exists {
                vec![]
            } else {
                vec![part.to_string(), "log".to_string()]
            };
            return (path, exists);
        };
        let (start, end) = (p.log_start, p.log_end());
        let (name, exists): (Vec<String>, bool) = match node {
            Node::Root => return (vec![], true),
            Node::Partition => (vec![], true),
            Node::Log => (vec!["log".into()], true),
            Node::OffsetDir => (vec!["offset".into()], true),
            Node::Offset(i) => {
                let n = if end > start {
                    start + i as i64 % (end - start)
                } else {
                    end
                };
                (vec!["offset".into(), n.to_string()], end > start)
            }
            Node::TimeDir => (vec!["time".into()], true),
            Node::Time(i) => {
                let ms = self.some_time(part, i);
                let exists = p.offset_for_time(ms, &self.model.appends).is_some();
                (vec!["time".into(), ms.to_string()], exists)
            }
            Node::Roll => (vec!["roll".into()], log_control),
            Node::Flush => (vec!["flush".into()], log_control),
            Node::DeleteRecords => (vec!["delete-records".into()], true),
            Node::ConfigDir => (vec!["config".into()], true),
            Node::Config(i) => {
                let names = configs::names();
                let c = names[i as usize % names.len()];
                (vec!["config".into(), c.to_string()], true)
            }
            Node::Status => (vec!["status".into()], true),
            Node::Raw(i) => {
                let files = self.raw_names(part);
                let n = files.len().max(1);
                let file = files.get(i as usize % n).cloned();
                let exists = file.is_some();
                (
                    vec![file.unwrap_or_else(|| "00000000000000000000.log".into())],
                    exists,
                )
            }
        };
        let mut path = vec![part.to_string()];
        path.extend(name);
        (path, exists)
    }

    fn raw_names(&self, part: &str) -> Vec<String> {
        let Some(p) = self.model.partitions.get(part) else {
            return Vec::new();
        };
        if !self.sys.profile().raw_files {
            return Vec::new();
        }
        let mut out = Vec::new();
        for s in &p.segments {
            for ext in ["index", "log", "timeindex"] {
                out.push(format!("{:020}.{ext}", s.base));
            }
        }
        out
    }

    /// A millisecond near a timestamp of the partition (or a small number).
    fn some_time(&self, part: &str, i: u8) -> i64 {
        let p = &self.model.partitions[part];
        let ts: Vec<i64> = p
            .segments
            .iter()
            .flat_map(|s| &s.batches)
            .filter_map(|b| self.model.appends[b.append].ts)
            .collect();
        if ts.is_empty() {
            return i as i64;
        }
        ts[i as usize % ts.len()] + (i % 3) as i64 - 1
    }

    fn is_dir(node: Node) -> bool {
        matches!(
            node,
            Node::Root | Node::Partition | Node::OffsetDir | Node::TimeDir | Node::ConfigDir
        )
    }

    fn is_writable(node: Node) -> bool {
        matches!(
            node,
            Node::Log | Node::Roll | Node::Flush | Node::DeleteRecords | Node::Config(_)
        )
    }

    fn is_control(node: Node) -> bool {
        matches!(node, Node::Roll | Node::Flush | Node::DeleteRecords)
    }

    /// Whether `name` is in directory `node` of `part`; `None` for a file.
    fn child_exists(&self, part: &str, node: Node, name: &str) -> Option<bool> {
        if !Self::is_dir(node) {
            return None;
        }
        let p = self.model.partitions.get(part);
        Some(match node {
            Node::Root => self.model.partitions.contains_key(name),
            Node::Partition => {
                let special = [
                    "log",
                    "offset",
                    "time",
                    "delete-records",
                    "config",
                    "status",
                ]
                .contains(&name)
                    || (["roll", "flush"].contains(&name) && self.sys.profile().log_control)
                    || (name == "compact" && self.sys.profile().compaction)
                    || (name == "committed" && self.sys.profile().committed);
                special || self.raw_names(part).iter().any(|f| f == name)
            }
            Node::OffsetDir => canonical_decimal(name)
                .zip(p)
                .is_some_and(|(n, p)| n >= p.log_start && n < p.log_end()),
            Node::TimeDir => canonical_decimal(name)
                .zip(p)
                .is_some_and(|(ms, p)| p.offset_for_time(ms, &self.model.appends).is_some()),
            _ => configs::names().contains(&name),
        })
    }

    /// A name under `node`: one of its children, or one of `OTHER_NAMES`.
    fn child_name(&self, part: &str, node: Node, child: &ChildName) -> String {
        let mut existing: Vec<String> = match node {
            Node::Root => self.model.partitions.keys().cloned().collect(),
            Node::Partition if self.model.partitions.contains_key(part) => {
                let mut v = self.raw_names(part);
                v.extend(["log", "offset", "status", "config"].map(String::from));
                v
            }
            Node::OffsetDir => self.model.partitions.get(part).map_or(vec![], |p| {
                p.live().map(|(n, _)| n.to_string()).take(4).collect()
            }),
            Node::TimeDir if self.model.partitions.contains_key(part) => {
                vec![self.some_time(part, 1).to_string()]
            }
            Node::ConfigDir => configs::names().iter().map(|s| s.to_string()).collect(),
            _ => vec![],
        };
        match child {
            ChildName::Existing(i) if !existing.is_empty() => {
                let n = existing.len();
                existing.swap_remove(*i as usize % n)
            }
            ChildName::Existing(i) | ChildName::Other(i) => {
                OTHER_NAMES[*i as usize % OTHER_NAMES.len()].to_string()
            }
        }
    }

    fn probe_open(&mut self, part: &str, node: Node, write: bool) {
        let (path, exists) = self.node(part, node);
        let got = self.resolve(&refs(&path)).and_then(|ino| {
            let mode = if write { WRITE } else { READ };
            errno(self.sys.tree().open(ino, mode, &NoPassthrough)).map(|o| o.fh)
        });
        let want = if !exists {
            Err(libc::ENOENT)
        } else if Self::is_dir(node) {
            Err(libc::EISDIR)
        } else if (write && !Self::is_writable(node)) || (!write && Self::is_control(node)) {
            // Read-only nodes refuse writers; control files refuse readers.
            Err(libc::EACCES)
        } else {
            Ok(())
        };
        let what = format!(
            "open of {path:?} for {}",
            if write { "writing" } else { "reading" }
        );
        self.outcome(&what, got.map(|_| ()), want);
        if let Ok(fh) = got {
            self.same("release", errno(self.sys.tree().release(fh)), Ok(()));
        }
    }

    fn probe_setattr(&mut self, part: &str, node: Node, kind: SetKind) {
        let (path, exists) = self.node(part, node);
        let mut set = SetAttr::default();
        match kind {
            SetKind::Chmod => set.mode = Some(0o644),
            SetKind::Chown => set.uid = Some(0),
            SetKind::Utimes => set.times = true,
            SetKind::Truncate0 => set.size = Some(0),
            SetKind::Truncate5 => set.size = Some(5),
            SetKind::Nothing => {}
        }
        let got = self
            .resolve(&refs(&path))
            .and_then(|ino| errno(self.sys.tree().setattr(ino, set)).map(|_| ()));
        let want = match kind {
            _ if !exists => Err(libc::ENOENT),
            SetKind::Chmod | SetKind::Chown | SetKind::Utimes => Err(libc::EPERM),
            SetKind::Truncate0 | SetKind::Truncate5 if Self::is_dir(node) => Err(libc::EISDIR),
            SetKind::Truncate0 if Self::is_writable(node) => Ok(()),
            SetKind::Truncate0 | SetKind::Truncate5 => Err(libc::EPERM),
            SetKind::Nothing => Ok(()),
        };
        self.outcome(&format!("setattr {kind:?} of {path:?}"), got, want);
    }

    fn probe_name_change(&mut self, part: &str, node: Node, op: &str, child: &ChildName) {
        let (path, exists) = self.node(part, node);
        let name = self.child_name(part, node, child);
        let there = self.child_exists(part, node, &name).unwrap_or(false);
        let got = self.resolve(&refs(&path)).map(|ino| {
            let tree = self.sys.tree();
            let e = match op {
                "unlink" | "rename" => tree.unlink(op, ino, OsStr::new(&name)),
                _ => tree.refuse_create(op, ino, OsStr::new(&name)),
            };
            e.errno
        });
        let want = match op {
            _ if !exists => Err(libc::ENOENT),
            "unlink" | "rename" if there => Ok(libc::EPERM),
            "unlink" | "rename" => Ok(libc::ENOENT),
            _ if there => Ok(libc::EEXIST),
            _ => Ok(libc::EPERM),
        };
        self.outcome(&format!("{op} of {path:?}/{name}"), got, want);
    }

    /// mkdir and rmdir inside a partition directory.
    fn probe_dir_change(&mut self, part: &str, child: &ChildName, mkdir: bool) {
        let (path, exists) = self.node(part, Node::Partition);
        let name = self.child_name(part, Node::Partition, child);
        let there = self
            .child_exists(part, Node::Partition, &name)
            .unwrap_or(false);
        let got = self.resolve(&refs(&path)).and_then(|ino| {
            let tree = self.sys.tree();
            let n = OsStr::new(&name);
            errno(if mkdir {
                tree.mkdir(ino, n).map(|_| ())
            } else {
                tree.rmdir(ino, n)
            })
        });
        let want = match (exists, there, mkdir) {
            (false, _, _) => Err(libc::ENOENT),
            (true, true, true) => Err(libc::EEXIST),
            (true, false, true) => Err(libc::EPERM),
            (true, true, false) => Err(libc::EPERM),
            (true, false, false) => Err(libc::ENOENT),
        };
        let op = if mkdir { "mkdir" } else { "rmdir" };
        self.outcome(&format!("{op} of {path:?}/{name}"), got, want);
    }

    /// A read of `log` at a position: the stream's bytes there; and of
    /// `committed`, where the backend has it (the same bytes: the model
    /// holds no transactions).
    fn probe_read_log(&mut self, part: &str, pos: u16, len: u16) {
        let mut names = vec!["log"];
        if self.sys.profile().committed {
            names.push("committed");
        }
        for name in names {
            let Some(p) = self.model.partitions.get(part) else {
                let got = self.open(&[part, name], READ).map(|_| ());
                self.same(
                    &format!("open of a missing partition's {name}"),
                    got,
                    Err(libc::ENOENT),
                );
                continue;
            };
            let stream = p.stream();
            let pos = pos as usize % (stream.len() + 8);
            let want =
                stream[pos.min(stream.len())..(pos + len as usize).min(stream.len())].to_vec();
            let fh = self
                .open(&[part, name], READ)
                .unwrap_or_else(|e| panic!("{name} opens: {e}"));
            let mut buf = Vec::new();
            let got = errno(self.sys.tree().read(fh, pos as u64, len as u32, &mut buf));
            self.outcome(
                &format!("read of {part}/{name} at {pos}"),
                got.map(|_| buf),
                Ok(want),
            );
            self.same("release", errno(self.sys.tree().release(fh)), Ok(()));
        }
    }
}
