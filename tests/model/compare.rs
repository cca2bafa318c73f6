//! The comparison after each step: every directory's listing (through
//! readdir with the case's buffer limit, each entry looked up again), every
//! node's kind, mode and size, the bytes of `log`, `offset/N`, `time/<ms>`,
//! `status` and `config/<name>`, and the xattrs of every record.
//!
//! Checked by invariant rather than by value, because the model would
//! have to re-implement the codec or the indexes to know them:
//! - a compressed batch's size: the `.log` is walked by its batch framing
//!   (base offset, length, codec bits, last offset, max timestamp, record
//!   count), which must match the model's batches and fill the file; the
//!   sizes it shows are then learned (uncompressed sizes are known);
//! - `.index` and `.timeindex`: the active ones show their preallocation,
//!   sealed ones hold whole entries, at most one per batch but the first
//!   (offset index) or one per batch (time index); after a clean close the
//!   offline check holds them to Kafka's rule (see `System::clean_remount`);
//! - `status`: `recovery_point` lies between what was surely flushed and the
//!   log end (a roll's flush runs in the background), `lookup_bytes_read`
//!   and `fsyncs` are counters; `size_bytes` is the sum of the `.log` sizes.

use std::collections::BTreeMap;
use std::ffi::OsStr;
use std::time::{Duration, UNIX_EPOCH};

use commitfs::fs::{DirectoryReplier, NodeType};

use super::configs;
use super::harness::{Harness, ROOT, errno};
use super::reference::Partition;
use super::spec::walk_batches;
use super::system::System;

/// Collects directory entries, taking at most `limit` per call (0: all).
struct Collect {
    limit: usize,
    out: Vec<(u64, u64, NodeType, String)>,
}

impl DirectoryReplier for Collect {
    fn add(&mut self, ino: u64, cookie: u64, kind: NodeType, name: &str) -> bool {
        if self.limit > 0 && self.out.len() >= self.limit {
            return true;
        }
        self.out.push((ino, cookie, kind, name.to_string()));
        false
    }
}

const DIR: NodeType = NodeType::Directory;
const FILE: NodeType = NodeType::RegularFile;

/// The figures of `status` a backend with segment files shows.
const SEGMENT_FIGURES: &[&str] = &["recovery_point", "segments", "size_bytes", "active_segment"];

/// Where each batch of a partition sits: base offset -> position.
type Positions = BTreeMap<i64, u64>;

impl<S: System> Harness<S> {
    pub fn compare(&mut self) {
        let mut want: Vec<(String, NodeType)> = self
            .model
            .partitions
            .keys()
            .map(|n| (n.clone(), DIR))
            .collect();
        if self.sys.profile().groups {
            want.push(("groups".to_string(), DIR));
        }
        self.compare_dir(ROOT, ROOT, &want, "the root");
        let names: Vec<String> = self.model.partitions.keys().cloned().collect();
        for name in names {
            self.compare_partition(&name);
        }
        self.compare_groups();
    }

    /// A directory's entries through one directory stream, as the kernel
    /// reads them: resumed by cookie until the tree has no more.
    fn listing(&self, ino: u64) -> Vec<(u64, NodeType, String)> {
        let fh = errno(self.sys.tree().opendir(ino))
            .unwrap_or_else(|e| panic!("{}: opendir of {ino}: errno {e}", self.step));
        let mut all = Vec::new();
        let mut cookie = 0;
        loop {
            let mut c = Collect {
                limit: self.readdir_limit,
                out: Vec::new(),
            };
            let r = errno(self.sys.tree().readdir(ino, fh, cookie, &mut c));
            self.same("readdir", r, Ok(()));
            let Some(last) = c.out.last() else { break };
            cookie = last.1;
            all.extend(c.out.into_iter().map(|(i, _, k, n)| (i, k, n)));
        }
        self.sys.tree().releasedir(fh);
        all
    }

    /// Checks a listing: `.` and `..`, then `want` in order, each entry
    /// with the kind and inode its lookup gives.
    fn compare_dir(&self, ino: u64, parent: u64, want: &[(String, NodeType)], what: &str) {
        let got = self.listing(ino);
        let names: Vec<(String, NodeType)> = got.iter().map(|(_, k, n)| (n.clone(), *k)).collect();
        let mut expected = vec![(".".to_string(), DIR), ("..".to_string(), DIR)];
        expected.extend(want.iter().cloned());
        self.same(&format!("listing of {what}"), names, expected);
        self.same(
            &format!("inodes of . and .. in {what}"),
            (got[0].0, got[1].0),
            (ino, parent),
        );
        for (child, kind, name) in &got[2..] {
            let e = errno(self.sys.tree().lookup(ino, OsStr::new(name)));
            let e = e.unwrap_or_else(|e| {
                panic!("{}: lookup of listed {what}/{name}: errno {e}", self.step)
            });
            self.same(
                &format!("lookup of {what}/{name}"),
                (e.attr.ino, e.attr.kind),
                (*child, *kind),
            );
        }
    }

    /// Kind, mode and size of the node at `path`.
    fn compare_attr(&self, path: &[&str], kind: NodeType, perm: u16, size: Option<u64>) {
        let ino = self
            .resolve(path)
            .unwrap_or_else(|e| panic!("{}: {path:?}: errno {e}", self.step));
        let (a, _) = errno(self.sys.tree().getattr(ino)).expect("getattr of a node that exists");
        let nlink = if kind == DIR { 2 } else { 1 };
        self.same(
            &format!("attributes of {path:?}"),
            (a.kind, a.perm, a.nlink),
            (kind, perm, nlink),
        );
        if let Some(size) = size {
            self.same(&format!("size of {path:?}"), a.size, size);
        }
    }

    fn compare_partition(&mut self, name: &str) {
        let pino = self.resolve(&[name]).expect("a partition resolves");
        self.compare_attr(&[name], DIR, 0o755, Some(0));
        let f = self.sys.profile();
        let p = &self.model.partitions[name];
        let mut want = Vec::new();
        if f.raw_files {
            for s in &p.segments {
                for ext in ["index", "log", "timeindex"] {
                    want.push((format!("{:020}.{ext}", s.base), FILE));
                }
            }
        }
        for (n, kind) in [
            ("log", FILE),
            ("committed", FILE),
            ("offset", DIR),
            ("time", DIR),
            ("roll", FILE),
            ("flush", FILE),
            ("delete-records", FILE),
            ("compact", FILE),
            ("config", DIR),
            ("status", FILE),
        ] {
            let offered = match n {
                "roll" | "flush" => f.log_control,
                "compact" => f.compaction,
                "committed" => f.committed,
                _ => true,
            };
            if offered {
                want.push((n.to_string(), kind));
            }
        }
        self.compare_dir(pino, ROOT, &want, name);
        let positions = if f.raw_files {
            self.compare_segments(name)
        } else {
            Positions::new()
        };
        let p = &self.model.partitions[name];
        self.compare_attr(&[name, "log"], FILE, 0o644, Some(p.stream().len() as u64));
        let stream = self.read_all(&[name, "log"]);
        self.same(&format!("{name}/log"), stream, Ok(p.stream()));
        if f.committed {
            let len = Some(p.stream().len() as u64);
            self.compare_attr(&[name, "committed"], FILE, 0o444, len);
            let committed = self.read_all(&[name, "committed"]);
            self.same(&format!("{name}/committed"), committed, Ok(p.stream()));
        }
        for c in ["roll", "flush", "delete-records", "compact"] {
            if want.iter().any(|(n, _)| n == c) {
                self.compare_attr(&[name, c], FILE, 0o200, Some(0));
            }
        }
        self.compare_offsets(name, pino, &positions);
        if f.times {
            self.compare_times(name, pino);
        }
        self.compare_status(name);
        if f.configs {
            self.compare_configs(name, pino);
        }
    }

    /// The raw files of each segment; learns compressed batch sizes.
    fn compare_segments(&mut self, name: &str) -> Positions {
        let mut positions = Positions::new();
        let count = self.model.partitions[name].segments.len();
        for i in 0..count {
            let seg = self.model.partitions[name].segments[i].clone();
            let stem = format!("{:020}", seg.base);
            let log = format!("{stem}.log");
            let bytes = self.read_all(&[name, &log]).expect("a segment reads");
            self.compare_attr(&[name, &log], FILE, 0o444, Some(bytes.len() as u64));
            let frames =
                walk_batches(&bytes).unwrap_or_else(|e| panic!("{}: {name}/{log}: {e}", self.step));
            let got: Vec<_> = frames
                .iter()
                .map(|f| (f.base_offset, f.last_offset, f.magic, f.codec))
                .collect();
            let want: Vec<_> = seg
                .batches
                .iter()
                .map(|b| (b.base, b.last, 2i8, b.codec))
                .collect();
            self.same(&format!("batches of {name}/{log}"), got, want);
            for (f, b) in frames.iter().zip(&seg.batches) {
                let what = format!("records in batch {} of {name}/{log}", b.base);
                self.same(&what, f.records as i64, b.last - b.base + 1);
                if let Some(ts) = self.model.appends[b.append].ts {
                    let what = format!("max timestamp of batch {} of {name}/{log}", b.base);
                    self.same(&what, f.max_timestamp, ts);
                }
                if let Some(size) = b.size {
                    self.same(
                        &format!("size of batch {} in {name}/{log}", b.base),
                        f.size,
                        size,
                    );
                }
                positions.insert(b.base, f.position);
            }
            let batches =
                &mut self.model.partitions.get_mut(name).expect("live").segments[i].batches;
            for (b, f) in batches.iter_mut().zip(&frames) {
                b.size = Some(f.size);
            }
            self.compare_indexes(
                name,
                &stem,
                i + 1 == count,
                seg.batches.len() as u64,
                seg.prealloc,
            );
        }
        positions
    }

    fn compare_indexes(
        &self,
        name: &str,
        stem: &str,
        active: bool,
        batches: u64,
        prealloc: (u64, u64),
    ) {
        for (ext, entry, pre, most) in [
            ("index", 8, prealloc.0, batches.saturating_sub(1)),
            ("timeindex", 12, prealloc.1, batches),
        ] {
            let file = format!("{stem}.{ext}");
            let ino = self.resolve(&[name, &file]).expect("an index resolves");
            let (a, _) = errno(self.sys.tree().getattr(ino)).expect("getattr");
            self.same(&format!("mode of {name}/{file}"), a.perm, 0o444);
            if active {
                self.same(&format!("preallocated {name}/{file}"), a.size, pre);
            } else {
                let ok = a.size % entry == 0 && a.size / entry <= most;
                assert!(
                    ok,
                    "{}: sealed {name}/{file} of {} bytes for {batches} batches",
                    self.step, a.size
                );
            }
        }
    }

    /// `offset/`: its listing, then each live record's value and xattrs.
    fn compare_offsets(&mut self, name: &str, pino: u64, positions: &Positions) {
        let dir = errno(self.sys.tree().lookup(pino, OsStr::new("offset")))
            .expect("offset/")
            .attr
            .ino;
        self.compare_attr(&[name, "offset"], DIR, 0o555, Some(0));
        let p = &self.model.partitions[name];
        let want: Vec<_> = p.live().map(|(n, _)| (n.to_string(), FILE)).collect();
        self.compare_dir(dir, pino, &want, &format!("{name}/offset"));
        let (start, end) = (p.log_start, p.log_end());
        for n in start..end {
            self.compare_record(name, dir, n, positions);
        }
        for outside in [start - 1, end] {
            if outside >= 0 {
                let r = errno(
                    self.sys
                        .tree()
                        .lookup(dir, OsStr::new(&outside.to_string())),
                );
                self.same(
                    &format!("lookup of {name}/offset/{outside}"),
                    r.map(|_| ()),
                    Err(libc::ENOENT),
                );
            }
        }
    }

    fn compare_record(&mut self, name: &str, dir: u64, n: i64, positions: &Positions) {
        let ino = errno(self.sys.tree().lookup(dir, OsStr::new(&n.to_string())))
            .expect("a live offset")
            .attr
            .ino;
        let xattrs = self.xattrs(ino);
        let ts = xattrs.iter().find(|(n, _)| n == "user.kafka.timestamp");
        let ts = ts.and_then(|(_, v)| String::from_utf8(v.clone()).ok()?.parse::<i64>().ok());
        let ts = ts.unwrap_or_else(|| {
            panic!(
                "{}: {name}/offset/{n}: no timestamp in {xattrs:?}",
                self.step
            )
        });
        let r = self.model.partitions[name].records[n as usize].clone();
        let append = &mut self.model.appends[r.append];
        assert!(
            (append.before..=append.after).contains(&ts),
            "{}: {name}/offset/{n}: timestamp {ts} outside its append's window {}..={}",
            self.step,
            append.before,
            append.after
        );
        let known = *append.ts.get_or_insert(ts);
        self.same(&format!("timestamp of {name}/offset/{n}"), known, ts);
        let mut want = vec![
            (
                "user.kafka.timestamp".to_string(),
                ts.to_string().into_bytes(),
            ),
            (
                "user.kafka.timestamp_type".to_string(),
                if r.log_append_time {
                    b"LogAppendTime".to_vec()
                } else {
                    b"CreateTime".to_vec()
                },
            ),
        ];
        if let Some(k) = &r.key {
            want.push(("user.kafka.key".to_string(), k.clone()));
        }
        // A record's batch and its position are the segment files'.
        if self.sys.profile().raw_files {
            want.push((
                "user.kafka.batch_base_offset".to_string(),
                r.batch_base.to_string().into_bytes(),
            ));
            // The position the framing walk found.
            let pos = positions.get(&r.batch_base).map(|p| p.to_string());
            want.push((
                "user.kafka.position".to_string(),
                pos.unwrap_or_default().into_bytes(),
            ));
        }
        self.same(&format!("xattrs of {name}/offset/{n}"), xattrs, want);
        let (a, _) = errno(self.sys.tree().getattr(ino)).expect("getattr");
        let mtime = UNIX_EPOCH + Duration::from_millis(ts as u64);
        self.same(
            &format!("attributes of {name}/offset/{n}"),
            (a.kind, a.perm, a.size, a.mtime),
            (FILE, 0o444, r.value.len() as u64, mtime),
        );
        let value = self.read_all(&[name, "offset", &n.to_string()]);
        self.same(&format!("{name}/offset/{n}"), value, Ok(r.value));
    }

    /// Every xattr of a node, in listing order, each read by name.
    pub fn xattrs(&self, ino: u64) -> Vec<(String, Vec<u8>)> {
        let tree = self.sys.tree();
        let list = errno(tree.listxattr(ino)).expect("listxattr");
        let names = list.split(|b| *b == 0).filter(|n| !n.is_empty());
        names
            .map(|n| {
                let n = String::from_utf8(n.to_vec()).expect("UTF-8 names");
                let v = errno(tree.getxattr(ino, OsStr::new(&n))).expect("a listed xattr");
                (n, v)
            })
            .collect()
    }

    /// `time/`: empty listing; lookups around every timestamp.
    fn compare_times(&self, name: &str, pino: u64) {
        let dir = errno(self.sys.tree().lookup(pino, OsStr::new("time")))
            .expect("time/")
            .attr
            .ino;
        self.compare_attr(&[name, "time"], DIR, 0o555, Some(0));
        self.compare_dir(dir, pino, &[], &format!("{name}/time"));
        let p = &self.model.partitions[name];
        let mut queries = vec![0i64, 4_102_444_800_000];
        for s in &p.segments {
            for b in &s.batches {
                let ts = self.model.appends[b.append].ts.expect("learned");
                queries.extend([ts - 1, ts, ts + 1]);
            }
        }
        queries.sort_unstable();
        queries.dedup();
        for ms in queries {
            let want = p
                .offset_for_time(ms, &self.model.appends)
                .map(|o| format!("{o}\n").into_bytes());
            let path = [name, "time", &ms.to_string()];
            let got = self.read_all(&path);
            self.same(
                &format!("{name}/time/{ms}"),
                got,
                want.clone().ok_or(libc::ENOENT),
            );
            if let Some(text) = want {
                self.compare_attr(&path, FILE, 0o444, Some(text.len() as u64));
            }
        }
    }

    fn compare_status(&self, name: &str) {
        let p = &self.model.partitions[name];
        let path = [name, "status"];
        // Counters may move between a getattr and a read (a background
        // flush); the size must match a read made right after it.
        let (mut size, mut text) = (0, Vec::new());
        for _ in 0..3 {
            let ino = self.resolve(&path).expect("status");
            size = errno(self.sys.tree().getattr(ino)).expect("getattr").0.size;
            text = self.read_all(&path).expect("status reads");
            if size == text.len() as u64 {
                break;
            }
        }
        self.same(&format!("size of {name}/status"), size, text.len() as u64);
        self.compare_attr(&path, FILE, 0o444, None);
        let text = String::from_utf8(text).expect("UTF-8");
        let fields: Vec<(&str, &str)> = text
            .lines()
            // `name: value`, or `name:` for an empty value.
            .map(|l| {
                let (k, v) = l.split_once(':').expect("name: value");
                (k, v.strip_prefix(' ').unwrap_or(v))
            })
            .collect();
        // Every backend's status starts with the same three figures: one
        // copy of each partition everywhere (a data directory, memory, a
        // cluster of one broker with acks=all), so all three follow the
        // model's log.
        let common: Vec<(&str, String)> = fields
            .iter()
            .take(3)
            .map(|(k, v)| (*k, v.to_string()))
            .collect();
        let end = p.log_end().to_string();
        let want = [
            ("log_start_offset", p.log_start.to_string()),
            ("log_end_offset", end.clone()),
            ("high_watermark", end),
        ];
        self.same(
            &format!("common fields of {name}/status"),
            common.as_slice(),
            &want[..],
        );
        // Then the backend's own, each once; where it has segment files,
        // their figures, which the model knows.
        let mut detail: Vec<&str> = fields[3..].iter().map(|(k, _)| *k).collect();
        for (k, v) in &fields[3..] {
            self.status_field(name, p, k, v);
        }
        let n = detail.len();
        detail.sort_unstable();
        detail.dedup();
        assert!(
            detail.len() == n && !detail.iter().any(|k| want.iter().any(|(w, _)| w == k)),
            "{}: {name}/status repeats a field: {text}",
            self.step
        );
        if self.sys.profile().raw_files {
            for k in SEGMENT_FIGURES {
                assert!(
                    detail.contains(k),
                    "{}: {name}/status lacks {k}: {text}",
                    self.step
                );
            }
        }
    }

    /// One field of `status`: offsets and segments exactly, the recovery
    /// point within bounds, sizes where the model knows every batch's, and
    /// any other field (a counter, or a field of another backend) as it is.
    fn status_field(&self, name: &str, p: &Partition, field: &str, text: &str) {
        let what = format!("{name}/status {field}");
        let v = || -> i64 {
            text.parse()
                .unwrap_or_else(|_| panic!("{}: {what}: {text:?}", self.step))
        };
        match field {
            "recovery_point" => assert!(
                (p.rp_min..=p.log_end()).contains(&v()),
                "{}: {what} {text} outside {}..={}",
                self.step,
                p.rp_min,
                p.log_end()
            ),
            "segments" => self.same(&what, v(), p.segments.len() as i64),
            "active_segment" => self.same(&what, v(), p.active().base),
            "size_bytes" => {
                // Known for every batch once the raw `.log`s have been walked.
                let sizes: Option<u64> = p.segments.iter().map(|s| s.size()).sum();
                match sizes {
                    Some(sizes) => self.same(&what, v() as u64, sizes),
                    None => assert!(!self.sys.profile().raw_files, "{}: {what}", self.step),
                }
            }
            "lookup_bytes_read" | "fsyncs" => assert!(v() >= 0, "{}: {what} {text}", self.step),
            // The tree's appends are never transactional: nothing is unstable.
            "last_stable_offset" => self.same(&what, v(), p.log_end()),
            "open_transactions" => self.same(&what, text.to_string(), String::new()),
            _ => {}
        }
    }

    fn compare_configs(&self, name: &str, pino: u64) {
        let dir = errno(self.sys.tree().lookup(pino, OsStr::new("config")))
            .expect("config/")
            .attr
            .ino;
        self.compare_attr(&[name, "config"], DIR, 0o755, Some(0));
        let names = configs::names();
        let want: Vec<_> = names.iter().map(|n| (n.to_string(), FILE)).collect();
        self.compare_dir(dir, pino, &want, &format!("{name}/config"));
        let p = &self.model.partitions[name];
        for c in names {
            let text = p.configs.text(c).into_bytes();
            self.compare_attr(&[name, "config", c], FILE, 0o644, Some(text.len() as u64));
            let got = self.read_all(&[name, "config", c]);
            self.same(&format!("{name}/config/{c}"), got, Ok(text));
        }
    }
}
