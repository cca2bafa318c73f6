//! Runs a sequence of operations against the tree and the model, driving
//! the tree as the kernel would (paths resolved by `lookup` from inode 1,
//! `open`, `write` per WRITE request, `release`), and compares after each
//! step. Every refusal's errno is compared with the model's.

use std::collections::BTreeMap;
use std::ffi::OsStr;
use std::time::{SystemTime, UNIX_EPOCH};

use commitfs::fs::{AccessMode, FsResult, NoPassthrough, SetAttr};

use super::configs;
use super::ops::{Age, Arg, GARBAGE, OffsetArg, Op, Target, VALID_NAMES};
use super::reference::{Control, Handle, HandleKind, Model, Rec};
use super::system::System;
pub use crate::access::{READ, ROOT, WRITE};

pub fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .expect("after 1970")
        .as_millis() as i64
}

/// The errno of a result, for comparing with the model's.
pub fn errno<T>(r: FsResult<T>) -> Result<T, i32> {
    r.map_err(|e| e.errno)
}

pub struct Harness<S: System> {
    pub sys: S,
    pub model: Model,
    /// The tree's handle for each of the model's handles.
    pub fhs: Vec<u64>,
    /// Entries one readdir call may return (0: no limit).
    pub readdir_limit: usize,
    /// Bytes per read request.
    pub chunk: u32,
    /// Step number and operation, for failure messages.
    pub step: String,
    /// The consumer groups (`model/groups.rs`).
    pub groups: super::groups::Groups,
}

impl<S: System> Harness<S> {
    pub fn new(sys: S, readdir_limit: usize, chunk: u32) -> Self {
        let mut model = Model::default();
        for name in sys.premade() {
            model
                .mkdir(&name)
                .expect("a premade partition the model accepts");
        }
        Harness {
            sys,
            model,
            fhs: Vec::new(),
            readdir_limit,
            chunk,
            step: String::new(),
            groups: Default::default(),
        }
    }

    pub fn run(&mut self, ops: &[Op]) {
        self.compare();
        for (i, op) in ops.iter().enumerate() {
            self.step = format!("step {i}: {op:?}");
            if !self.sys.runs(op) {
                self.trace(&format!("{}: skipped on this backend", self.step));
                continue;
            }
            self.apply(op);
            self.compare();
        }
    }

    /// Resolves a path from the root, component by component.
    pub fn resolve(&self, path: &[&str]) -> Result<u64, i32> {
        let mut ino = ROOT;
        for name in path {
            ino = errno(self.sys.tree().lookup(ino, OsStr::new(name)))?
                .attr
                .ino;
        }
        Ok(ino)
    }

    pub fn open(&self, path: &[&str], mode: AccessMode) -> Result<u64, i32> {
        let ino = self.resolve(path)?;
        Ok(errno(self.sys.tree().open(ino, mode, &NoPassthrough))?.fh)
    }

    /// The partition an index names: an existing one, or when there is
    /// none, a valid name that does not exist.
    pub fn part_name(&self, i: u8) -> String {
        let names: Vec<&String> = self.model.partitions.keys().collect();
        if names.is_empty() {
            return VALID_NAMES[i as usize % VALID_NAMES.len()].to_string();
        }
        names[i as usize % names.len()].clone()
    }

    fn apply(&mut self, op: &Op) {
        match op {
            Op::Mkdir(n) => {
                let name = n.name(&self.model.partitions.keys().collect::<Vec<_>>());
                self.mkdir(&name);
            }
            Op::Rmdir(n) => {
                let name = n.name(&self.model.partitions.keys().collect::<Vec<_>>());
                self.rmdir(&name);
            }
            Op::Recreate(part) => {
                let name = self.part_name(*part);
                self.rmdir(&name);
                self.mkdir(&name);
            }
            Op::Append { part, data } => {
                let part = self.part_name(*part);
                if let Some(h) = self.open_target(&part, Target::Log) {
                    for piece in data.pieces() {
                        self.write_log(h, piece);
                    }
                    self.close(h);
                }
            }
            Op::Open { part, target } => {
                let part = self.part_name(*part);
                self.open_target(&part, *target);
            }
            Op::Echo { part, target, arg } => self.echo(*part, *target, arg),
            Op::RetentionTick(Age::Plus(ms)) => self.retention_tick(*ms),
            Op::Remount => self.remount(),
            Op::Crash => {
                self.sys.crash();
                self.fhs.clear();
                self.model.crash();
            }
            Op::Probe { part, probe } => {
                let part = self.part_name(*part);
                self.probe(&part, probe);
            }
            Op::GroupCommit {
                group,
                part,
                offset,
            } => self.group_commit(*group, *part, *offset),
            Op::GroupReset { group, part, arg } => self.group_reset(*group, *part, *arg),
            Op::GroupDelete { group } => self.group_delete(*group),
            _ => self.apply_to_handle(op),
        }
    }

    /// Operations on a held handle; with none held, they do nothing.
    fn apply_to_handle(&mut self, op: &Op) {
        match op {
            Op::WriteLog { handle, data } => {
                if let Some(h) = self.pick(*handle, true) {
                    for piece in data.pieces() {
                        self.write_log(h, piece);
                    }
                }
            }
            Op::WriteHandle { handle, arg } => {
                if let Some(h) = self.pick(*handle, false) {
                    let text = self.arg_text(h, arg);
                    self.write_control(h, &text);
                }
            }
            Op::Close { handle } if !self.fhs.is_empty() => {
                self.close(*handle as usize % self.fhs.len());
            }
            Op::Fsync { handle } if !self.fhs.is_empty() => {
                let h = *handle as usize % self.fhs.len();
                let got = errno(self.sys.tree().fsync(self.fhs[h]));
                let want = self.model.fsync(h, self.sys.profile().log_control);
                self.outcome("fsync", got, want);
            }
            _ => {}
        }
    }

    fn mkdir(&mut self, name: &str) {
        let got = errno(self.sys.tree().mkdir(ROOT, OsStr::new(name)));
        let want = self.model.mkdir(name);
        self.outcome(&format!("mkdir {name}"), got.map(|_| ()), want);
    }

    fn rmdir(&mut self, name: &str) {
        let got = errno(self.sys.tree().rmdir(ROOT, OsStr::new(name)));
        let want = self.model.rmdir(name);
        self.outcome(&format!("rmdir {name}"), got, want);
    }

    /// `echo arg > part/target`.
    fn echo(&mut self, part: u8, target: Target, arg: &Arg) {
        let part = self.part_name(part);
        let Some(h) = self.open_target(&part, target) else {
            return;
        };
        // `>` truncates first; that is accepted and changes nothing.
        let ino = self.resolve(&refs(&target_path(&part, target)));
        let set = SetAttr {
            size: Some(0),
            ..SetAttr::default()
        };
        let got = ino.and_then(|ino| errno(self.sys.tree().setattr(ino, set)));
        self.same("truncate to 0 before a write", got.map(|_| ()), Ok(()));
        let text = self.arg_text(h, arg);
        self.write_control(h, &text);
        self.close(h);
    }

    /// A retention pass `ms` after the wall clock's now.
    fn retention_tick(&mut self, ms: u64) {
        let now = now_ms() + ms as i64;
        if !self.sys.retention_tick(now) {
            return;
        }
        let bases = |m: &Model| -> Vec<i64> {
            let segments = m.partitions.values().flat_map(|p| &p.segments);
            segments.map(|s| s.base).collect()
        };
        let before = bases(&self.model);
        self.model.retention(now);
        let after = bases(&self.model);
        self.trace(&format!(
            "retention at +{ms} ms: segments {before:?} -> {after:?}"
        ));
    }

    /// Asserts the tree answered as the model says.
    pub fn same<T: std::fmt::Debug + PartialEq>(&self, what: &str, got: T, want: T) {
        if got != want {
            eprintln!("{}", self.sys.diagnostics());
        }
        assert_eq!(got, want, "{}: {what}", self.step);
    }

    /// Asserts an operation's outcome; `COMMITFS_MODEL_TRACE=1` prints each.
    pub fn outcome<T: std::fmt::Debug + PartialEq>(&self, what: &str, got: T, want: T) {
        self.trace(&format!("{what}: {got:?}"));
        self.same(what, got, want);
    }

    pub fn trace(&self, line: &str) {
        if std::env::var_os("COMMITFS_MODEL_TRACE").is_some() {
            eprintln!("outcome {line}");
        }
    }

    /// Opens `target` of `part` for writing, in the tree and the model;
    /// returns the model's handle index.
    fn open_target(&mut self, part: &str, target: Target) -> Option<usize> {
        let path = target_path(part, target);
        let name = path[1..].join("/");
        let got = self.open(&refs(&path), WRITE);
        let log_control = self.sys.profile().log_control;
        let kind = match target {
            Target::Log => Some(HandleKind::Log {
                partial: Vec::new(),
            }),
            Target::Roll => log_control.then_some(HandleKind::Control(Control::Roll)),
            Target::Flush => log_control.then_some(HandleKind::Control(Control::Flush)),
            Target::DeleteRecords => Some(HandleKind::Control(Control::DeleteRecords)),
            Target::Config(i) => {
                let names = configs::names();
                Some(HandleKind::Config(names[i as usize % names.len()]))
            }
        };
        let incarnation = self.model.partitions.get(part).map(|p| p.incarnation);
        let want = match (incarnation, kind) {
            (Some(incarnation), Some(kind)) => Ok((incarnation, kind)),
            _ => Err(libc::ENOENT),
        };
        self.outcome(
            &format!("open of {part}/{name} for writing"),
            got.map(|_| ()),
            want.as_ref().map(|_| ()).map_err(|e| *e),
        );
        let (fh, (incarnation, kind)) = (got.ok()?, want.ok()?);
        self.model.handles.push(Handle {
            part: part.to_string(),
            incarnation,
            kind,
        });
        self.fhs.push(fh);
        Some(self.fhs.len() - 1)
    }

    /// The `n`-th held handle of `log` (or of a control or config file).
    fn pick(&self, n: u8, log: bool) -> Option<usize> {
        let of_kind: Vec<usize> = (0..self.model.handles.len())
            .filter(|h| matches!(self.model.handles[*h].kind, HandleKind::Log { .. }) == log)
            .collect();
        (!of_kind.is_empty()).then(|| of_kind[n as usize % of_kind.len()])
    }

    fn write_log(&mut self, h: usize, data: &[u8]) {
        let before = now_ms();
        let got = errno(self.sys.tree().write(self.fhs[h], data));
        let after = now_ms();
        let want = self.model.write_log(h, data, (before, after));
        self.outcome(
            &format!("write of {:?} to log", String::from_utf8_lossy(data)),
            got,
            want.map(|()| data.len() as u32),
        );
    }

    fn write_control(&mut self, h: usize, text: &[u8]) {
        let got = errno(self.sys.tree().write(self.fhs[h], text));
        let what = format!(
            "write of {:?} to {:?}",
            String::from_utf8_lossy(text),
            self.model.handles[h]
        );
        let want = self.model.write_control(h, text);
        self.outcome(&what, got, want.map(|()| text.len() as u32));
    }

    fn close(&mut self, h: usize) {
        let before = now_ms();
        let got = errno(self.sys.tree().release(self.fhs[h]));
        let after = now_ms();
        self.same("release", got, Ok(()));
        self.fhs.remove(h);
        self.model.close(h, (before, after));
    }

    /// What a write to handle `h` says, by the file it is open on.
    fn arg_text(&self, h: usize, arg: &Arg) -> Vec<u8> {
        let handle = &self.model.handles[h];
        match &handle.kind {
            HandleKind::Config(name) => {
                let c = configs::candidates(name);
                format!("{}\n", c[arg.value as usize % c.len()]).into_bytes()
            }
            HandleKind::Control(Control::DeleteRecords) => {
                let p = self
                    .model
                    .partitions
                    .get(&handle.part)
                    .filter(|p| p.incarnation == handle.incarnation)
                    .or_else(|| self.model.graveyard.get(&handle.incarnation))
                    .expect("held");
                let (start, end) = (p.log_start, p.log_end());
                match arg.offset {
                    OffsetArg::Within(n) => format!("{}\n", start + n as i64 % (end - start + 1)),
                    OffsetArg::End => "-1\n".to_string(),
                    OffsetArg::PastEnd(n) => format!("{}\n", end + 1 + n as i64 % 3),
                    OffsetArg::Below(n) => format!("{}\n", (start - 1 - n as i64 % 2).max(0)),
                    OffsetArg::Garbage(n) => GARBAGE[n as usize % GARBAGE.len()].to_string(),
                }
                .into_bytes()
            }
            _ => b"1\n".to_vec(),
        }
    }

    /// A clean unmount and mount: `destroy` closes every open handle (in an
    /// order the tree chooses), so the model learns the order of the held
    /// lines it appends from the tree.
    fn remount(&mut self) {
        let mut pending: BTreeMap<String, Vec<Rec>> = BTreeMap::new();
        for h in 0..self.model.handles.len() {
            if let Some((rec, _)) = self.model.held_record(h) {
                let part = self.model.handles[h].part.clone();
                pending.entry(part).or_default().push(rec);
            }
        }
        let intact = self.model.intact_partitions();
        let before = now_ms();
        self.sys.clean_remount(&intact);
        let after = now_ms();
        self.fhs.clear();
        self.model.handles.clear();
        for (part, mut want) in pending {
            let start = self.model.partitions[&part].log_end();
            let mut order = Vec::new();
            for n in start..start + want.len() as i64 {
                order.push(self.record_at(&part, n));
            }
            let mut sorted = order.clone();
            sorted.sort();
            want.sort();
            self.same(
                &format!("held lines appended at unmount to {part}"),
                sorted,
                want,
            );
            for rec in order {
                let n = self.model.new_append((before, after));
                let p = self.model.partitions.get_mut(&part).expect("live");
                let groups = p.pack(std::slice::from_ref(&rec)).expect("fits");
                p.append(vec![rec], &groups, n);
            }
        }
        self.model.clean_load();
    }

    /// Record `n` of `part` as the tree shows it: key (xattr) and value.
    fn record_at(&self, part: &str, n: i64) -> Rec {
        let name = n.to_string();
        let ino = self.resolve(&[part, "offset", &name]);
        let ino = ino.unwrap_or_else(|e| panic!("{}: offset {n} of {part}: errno {e}", self.step));
        let key = errno(self.sys.tree().getxattr(ino, OsStr::new("user.kafka.key"))).ok();
        (
            key,
            self.read_all(&[part, "offset", &name]).expect("readable"),
        )
    }

    /// Reads a whole file in `chunk`-sized requests.
    pub fn read_all(&self, path: &[&str]) -> Result<Vec<u8>, i32> {
        let fh = self.open(path, READ)?;
        crate::read_to_end::read_to_end(|| self.sys.tree(), fh, self.chunk)
    }
}

/// The path of a writable file of `part`.
pub fn target_path(part: &str, t: Target) -> Vec<String> {
    let mut path = vec![part.to_string()];
    match t {
        Target::Log => path.push("log".to_string()),
        Target::Roll => path.push("roll".to_string()),
        Target::Flush => path.push("flush".to_string()),
        Target::DeleteRecords => path.push("delete-records".to_string()),
        Target::Config(i) => {
            let names = configs::names();
            path.push("config".to_string());
            path.push(names[i as usize % names.len()].to_string());
        }
    }
    path
}

pub fn refs(path: &[String]) -> Vec<&str> {
    path.iter().map(String::as_str).collect()
}
