//! Consumer groups in the model: a client's commit (made through the
//! system, as a consumer's OffsetCommit would be), a reset through
//! `groups/<G>/offsets/<p>` and an rmdir of `groups/<G>`, with the rules
//! the README states: a reset is clamped to the partition's
//! `[log start, log end]`, `earliest` and `latest` are its ends, other
//! text is EINVAL; a group or partition that is not there is ENOENT; after
//! every step `groups/` lists the model's groups and each offsets file
//! reads the model's offset. Where the system cannot commit for a client
//! (`System::commit` is false) the operations are skipped.

use std::collections::BTreeMap;
use std::ffi::OsStr;

use commitfs::fs::NoPassthrough;

use super::harness::{Harness, WRITE, errno};
use super::system::System;

pub const GROUPS: &[&str] = &["g", "h.1"];

/// A reset's value.
#[derive(Clone, Copy, Debug)]
pub enum ResetArg {
    /// log start + n % (live + 2), so now and then past the end.
    Offset(u8),
    /// A number above the log end, clamped to it.
    Past(u8),
    Earliest,
    Latest,
    Garbage(u8),
}

const GARBAGE: &[&str] = &["", "-1", "x", "007", "@", "1 2", "earliest latest"];

/// Group -> (topic, partition) -> offset, sorted as the backend lists them.
pub type Groups = BTreeMap<String, BTreeMap<(String, i32), i64>>;

fn split(name: &str) -> (String, i32) {
    let (t, p) = name.rsplit_once('-').expect("a partition name");
    (t.to_string(), p.parse().expect("a partition number"))
}

impl<S: System> Harness<S> {
    /// A client of `group` commits `offset` for an existing partition.
    pub fn group_commit(&mut self, group: u8, part: u8, offset: u8) {
        if self.model.partitions.is_empty() {
            return;
        }
        let g = GROUPS[group as usize % GROUPS.len()];
        let p = self.part_name(part);
        if self.sys.commit(g, &p, offset as i64) {
            self.groups
                .entry(g.to_string())
                .or_default()
                .insert(split(&p), offset as i64);
        }
    }

    /// `echo value > groups/<g>/offsets/<p>`.
    pub fn group_reset(&mut self, group: u8, part: u8, arg: ResetArg) {
        if !self.sys.commits() {
            return;
        }
        let g = GROUPS[group as usize % GROUPS.len()];
        let p = self.part_name(part);
        let live = self
            .model
            .partitions
            .get(&p)
            .map(|m| (m.log_start, m.log_end()));
        let (text, want) = match (arg, live) {
            (ResetArg::Garbage(i), _) => (GARBAGE[i as usize % GARBAGE.len()].to_string(), None),
            (ResetArg::Earliest, l) => ("earliest".into(), l.map(|l| l.0)),
            (ResetArg::Latest, l) => ("latest".into(), l.map(|l| l.1)),
            (ResetArg::Offset(n), l) => {
                let (s, e) = l.unwrap_or((0, 0));
                let n = s + n as i64 % (e - s + 2);
                (n.to_string(), l.map(|_| n.min(e)))
            }
            (ResetArg::Past(n), l) => {
                let e = l.map_or(0, |l| l.1);
                ((e + 1 + n as i64).to_string(), l.map(|l| l.1))
            }
        };
        let known = self.groups.contains_key(g);
        let committed = known && self.groups[g].contains_key(&split(&p));
        let garbage = matches!(arg, ResetArg::Garbage(_));
        let expect = if !known || (live.is_none() && !committed) {
            Err(libc::ENOENT)
        } else if garbage {
            Err(libc::EINVAL)
        } else if live.is_none() {
            // The offsets file of a deleted partition: its reset finds no log.
            Err(libc::ENOENT)
        } else {
            Ok(())
        };
        let got = self.write_group_file(&format!("groups/{g}/offsets/{p}"), &text);
        self.outcome(&format!("reset of {g} {p} to {text:?}"), got, expect);
        if let (Ok(()), Some(offset)) = (expect, want) {
            self.groups
                .get_mut(g)
                .expect("known")
                .insert(split(&p), offset);
        }
    }

    /// `rmdir groups/<g>`.
    pub fn group_delete(&mut self, group: u8) {
        if !self.sys.commits() {
            return;
        }
        let g = GROUPS[group as usize % GROUPS.len()];
        let got = self
            .at(&["groups"])
            .and_then(|dir| errno(self.sys.tree().rmdir(dir, OsStr::new(g))));
        let want = match self.groups.remove(g) {
            Some(_) => Ok(()),
            None => Err(libc::ENOENT),
        };
        self.outcome(&format!("rmdir groups/{g}"), got, want);
    }

    /// The inode at `path` from the root.
    fn at(&self, path: &[&str]) -> Result<u64, i32> {
        let mut ino = 1;
        for name in path {
            ino = errno(self.sys.tree().lookup(ino, OsStr::new(name)))?
                .attr
                .ino;
        }
        Ok(ino)
    }

    fn write_group_file(&self, path: &str, text: &str) -> Result<(), i32> {
        let parts: Vec<&str> = path.split('/').collect();
        let ino = self.at(&parts)?;
        let tree = self.sys.tree();
        let fh = errno(tree.open(ino, WRITE, &NoPassthrough))?.fh;
        let r = errno(tree.write(fh, text.as_bytes())).map(|_| ());
        tree.release(fh).expect("release");
        r
    }

    fn read_group_file(&self, path: &str) -> Result<String, i32> {
        let parts: Vec<&str> = path.split('/').collect();
        let ino = self.at(&parts)?;
        let tree = self.sys.tree();
        let fh = errno(tree.open(ino, super::harness::READ, &NoPassthrough))?.fh;
        let mut out = Vec::new();
        let r = errno(tree.read(fh, 0, 1 << 16, &mut out));
        tree.release(fh).expect("release");
        r.map(|()| String::from_utf8(out).expect("utf-8"))
    }

    /// `groups/` as the model has it.
    pub fn compare_groups(&mut self) {
        if !self.sys.profile().groups || !self.sys.commits() {
            return;
        }
        let dir = self.at(&["groups"]).expect("groups/");
        let want: Vec<String> = self.groups.keys().cloned().collect();
        let got = self.names(dir);
        self.same("listing of groups/", got, want);
        for (g, offsets) in self.groups.clone() {
            let dir = self.at(&["groups", &g, "offsets"]).expect("offsets/");
            let want: Vec<String> = offsets.keys().map(|(t, p)| format!("{t}-{p}")).collect();
            let got = self.names(dir);
            self.same(&format!("listing of groups/{g}/offsets"), got, want);
            for ((t, p), offset) in offsets {
                let path = format!("groups/{g}/offsets/{t}-{p}");
                let got = self.read_group_file(&path);
                self.same(&path, got, Ok(format!("{offset}\n")));
            }
        }
    }

    /// A directory's names, `.` and `..` left out.
    fn names(&self, ino: u64) -> Vec<String> {
        struct All(Vec<String>);
        impl commitfs::fs::DirectoryReplier for All {
            fn add(&mut self, _: u64, _: u64, _: commitfs::fs::NodeType, name: &str) -> bool {
                if name != "." && name != ".." {
                    self.0.push(name.to_string());
                }
                false
            }
        }
        let tree = self.sys.tree();
        let fh = tree.opendir(ino).expect("opendir");
        let mut all = All(Vec::new());
        tree.readdir(ino, fh, 0, &mut all).expect("readdir");
        tree.releasedir(fh);
        all.0
    }
}
