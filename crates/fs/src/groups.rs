//! `groups/`: the consumer groups of a backend that offers them, as
//! `kafka-consumer-groups.sh` shows and changes them.
//!
//! ```text
//! groups/<G>/describe            --describe --group G
//! groups/<G>/members             --describe --group G --members
//! groups/<G>/state               --describe --group G --state
//! groups/<G>/offsets/<topic>-<p> the committed offset; a write is
//!                                --reset-offsets --execute for it
//! rmdir groups/<G>               --delete --group G
//! ```
//!
//! `offsets/` lists the partitions the group has committed offsets for;
//! any existing partition can be looked up there (it reads empty without a
//! commit), so that `echo earliest > groups/G/offsets/t-1` resets one the
//! group never committed, as the tool can.

use std::time::SystemTime;

use log::info;

use super::error::{FsError, FsResult};
use super::group_tables::{self, PartitionRow};
use super::inode;
use super::node::{GROUP_OFFSETS, GroupFile, NodeKey};
use super::tree::{Tree, timestamp};
use commitfs_backend::groups::{Committed, Groups, Reset, TopicPartition};
use commitfs_backend::{BackendError, ErrorKind};
use commitfs_record::names::parse_partition_name;

/// A value written to an offsets file, as `--reset-offsets` takes it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ResetTo {
    /// `--to-offset N`: clamped into `[log start, log end]`.
    Offset(i64),
    /// `--to-earliest`.
    Earliest,
    /// `--to-latest`.
    Latest,
    /// `--to-datetime`, as milliseconds (`@<ms>`).
    Time(i64),
}

impl ResetTo {
    /// `123`, `earliest`, `latest` or `@<ms>`, with the shell's newline.
    pub fn parse(data: &[u8]) -> Option<ResetTo> {
        let s = std::str::from_utf8(data).ok()?.trim();
        Some(match s {
            "earliest" => ResetTo::Earliest,
            "latest" => ResetTo::Latest,
            _ => match s.strip_prefix('@') {
                Some(ms) => ResetTo::Time(parse_number(ms)?),
                None => ResetTo::Offset(parse_number(s)?),
            },
        })
    }
}

/// A canonical non-negative decimal (one name per number, as offsets).
fn parse_number(s: &str) -> Option<i64> {
    super::node::parse_offset_name(s)
}

impl Tree {
    fn groups(&self) -> FsResult<&dyn Groups> {
        self.backend.groups().ok_or(FsError::quiet(libc::ENOENT))
    }

    /// Whether the root has `groups/`.
    pub(super) fn has_groups(&self) -> bool {
        self.backend.groups().is_some()
    }

    fn group_error(what: String, e: &BackendError) -> FsError {
        match e.kind {
            ErrorKind::NotFound => FsError::quiet(libc::ENOENT),
            _ => FsError::backend(what, e),
        }
    }

    fn group_names(&self) -> FsResult<Vec<String>> {
        let names = self
            .groups()?
            .list()
            .map_err(|e| Self::group_error("listing the groups".into(), &e))?;
        // A group id can be any string; one that cannot be a file name is
        // not shown.
        Ok(names.into_iter().filter(|g| is_file_name(g)).collect())
    }

    /// ENOENT unless the coordinator knows `group` (it may have been
    /// deleted since the kernel looked it up).
    pub(super) fn check_group(&self, group: &str) -> FsResult<()> {
        self.groups()?
            .describe(group)
            .map(|_| ())
            .map_err(|e| Self::group_error(format!("describing group {group}"), &e))
    }

    fn committed(&self, group: &str) -> FsResult<Vec<Committed>> {
        self.groups()?
            .committed(group)
            .map_err(|e| Self::group_error(format!("reading the offsets of group {group}"), &e))
    }

    /// The child `name` of a group node.
    pub(super) fn group_child(&self, parent: &NodeKey, name: &str) -> FsResult<NodeKey> {
        let enoent = || FsError::quiet(libc::ENOENT);
        match parent {
            NodeKey::GroupsDir => {
                if !self.group_names()?.iter().any(|g| g == name) {
                    return Err(enoent());
                }
                Ok(NodeKey::Group(inode::name(name)))
            }
            NodeKey::Group(g) => {
                if name == GROUP_OFFSETS {
                    return Ok(NodeKey::GroupOffsetsDir(g.clone()));
                }
                GroupFile::ALL
                    .into_iter()
                    .find(|f| f.name() == name)
                    .map(|f| NodeKey::GroupFile(g.clone(), f))
                    .ok_or_else(enoent)
            }
            NodeKey::GroupOffsetsDir(g) => {
                parse_partition_name(name).map_err(|_| enoent())?;
                let committed = self.committed(g)?;
                if !committed.iter().any(|c| c.partition.name() == name) {
                    self.partition(name)?;
                }
                Ok(NodeKey::GroupOffset(g.clone(), inode::name(name)))
            }
            _ => Err(FsError::quiet(libc::ENOTDIR)),
        }
    }

    /// The entries of a group directory.
    pub(super) fn group_listing(&self, key: &NodeKey) -> FsResult<Vec<(NodeKey, String)>> {
        Ok(match key {
            NodeKey::GroupsDir => self
                .group_names()?
                .into_iter()
                .map(|g| (NodeKey::Group(inode::name(&g)), g))
                .collect(),
            NodeKey::Group(g) => {
                self.check_group(g)?;
                let mut out: Vec<_> = GroupFile::ALL
                    .into_iter()
                    .map(|f| (NodeKey::GroupFile(g.clone(), f), f.name().to_string()))
                    .collect();
                out.push((NodeKey::GroupOffsetsDir(g.clone()), GROUP_OFFSETS.into()));
                out
            }
            NodeKey::GroupOffsetsDir(g) => {
                self.check_group(g)?;
                self.committed(g)?
                    .into_iter()
                    .map(|c| c.partition.name())
                    .filter(|n| is_file_name(n))
                    .map(|n| (NodeKey::GroupOffset(g.clone(), inode::name(&n)), n))
                    .collect()
            }
            _ => return Err(FsError::quiet(libc::ENOTDIR)),
        })
    }

    /// The bytes of a group file and its mtime.
    pub(super) fn group_file(&self, key: &NodeKey) -> FsResult<(Vec<u8>, SystemTime)> {
        let now = SystemTime::now();
        match key {
            NodeKey::GroupFile(g, f) => {
                let groups = self.groups()?;
                let what = || format!("reading {}", key.path());
                let desc = groups
                    .describe(g)
                    .map_err(|e| Self::group_error(what(), &e))?;
                let text = match f {
                    GroupFile::Describe => {
                        let committed = self.committed(g)?;
                        let rows = self.partition_rows(&committed, &desc.members);
                        group_tables::describe(g, &desc, &rows)
                    }
                    GroupFile::Members => group_tables::members(g, &desc),
                    GroupFile::State => group_tables::state(g, &desc),
                };
                Ok((text.into_bytes(), now))
            }
            NodeKey::GroupOffset(g, p) => {
                self.check_group(g)?;
                let committed = self.committed(g)?;
                match committed.iter().find(|c| c.partition.name() == **p) {
                    Some(c) => Ok((
                        format!("{}\n", c.offset).into_bytes(),
                        c.commit_timestamp.map_or(now, timestamp),
                    )),
                    None => Ok((Vec::new(), now)),
                }
            }
            _ => Err(FsError::quiet(libc::EISDIR)),
        }
    }

    /// The extended attributes of an offsets file: the commit's metadata
    /// and leader epoch, where it has them.
    pub(super) fn group_offset_xattrs(&self, g: &str, p: &str) -> FsResult<Vec<(String, Vec<u8>)>> {
        let committed = self.committed(g)?;
        let Some(c) = committed.iter().find(|c| c.partition.name() == p) else {
            return Ok(Vec::new());
        };
        let mut out = vec![(
            "user.kafka.metadata".to_string(),
            c.metadata.clone().into_bytes(),
        )];
        if let Some(epoch) = c.leader_epoch {
            out.push((
                "user.kafka.leader_epoch".to_string(),
                epoch.to_string().into_bytes(),
            ));
        }
        if let Some(ts) = c.commit_timestamp {
            out.push((
                "user.kafka.commit_timestamp".to_string(),
                ts.to_string().into_bytes(),
            ));
        }
        Ok(out)
    }

    /// One row per partition the group committed or a member holds, with
    /// the partition's log end offset (`-` where it cannot be read).
    fn partition_rows(
        &self,
        committed: &[Committed],
        members: &[commitfs_backend::groups::Member],
    ) -> Vec<PartitionRow> {
        let mut rows: Vec<PartitionRow> = Vec::new();
        let mut add = |tp: &TopicPartition, offset: Option<i64>, member| match rows
            .iter_mut()
            .find(|r| r.partition == *tp)
        {
            Some(r) => {
                r.committed = r.committed.or(offset);
                r.member = r.member.or(member);
            }
            None => rows.push(PartitionRow {
                partition: tp.clone(),
                committed: offset,
                log_end: None,
                member,
            }),
        };
        for (i, m) in members.iter().enumerate() {
            for tp in &m.assignment {
                add(tp, None, Some(i));
            }
        }
        for c in committed {
            add(&c.partition, Some(c.offset), None);
        }
        for r in &mut rows {
            r.log_end = self
                .backend
                .partition(&r.partition.name())
                .and_then(|p| p.offsets())
                .ok()
                .map(|o| o.log_end);
        }
        rows
    }

    /// A write to `groups/<G>/offsets/<p>`: the group's offset for the
    /// partition reset, as `--reset-offsets --execute` does.
    pub(super) fn reset_group_offset(
        &self,
        g: &str,
        p: &str,
        data: &[u8],
        path: &str,
    ) -> FsResult<()> {
        let what = format!("write to {path}");
        let to = ResetTo::parse(data).ok_or_else(|| {
            FsError::refuse(
                libc::EINVAL,
                &what,
                "expected an offset, earliest, latest or @<ms> (a time in milliseconds)",
            )
        })?;
        let (topic, partition) =
            parse_partition_name(p).map_err(|_| FsError::quiet(libc::ENOENT))?;
        let part = self.partition(p)?;
        let offsets = part
            .offsets()
            .map_err(|e| FsError::backend(format!("reading the offsets of {p}"), &e))?;
        let offset = match to {
            ResetTo::Earliest => offsets.log_start,
            ResetTo::Latest => offsets.log_end,
            ResetTo::Offset(n) => n.clamp(offsets.log_start, offsets.log_end),
            ResetTo::Time(ms) => part
                .offset_for_timestamp(ms)
                .map_err(|e| FsError::backend(format!("lookup of time {ms} in {p}"), &e))?
                .unwrap_or(offsets.log_end),
        };
        let reset = Reset {
            partition: TopicPartition {
                topic: topic.to_string(),
                partition: partition as i32,
            },
            offset,
        };
        self.groups()?
            .reset(g, &[reset])
            .map_err(|e| FsError::backend(what, &e))?;
        info!("Reset the offset of group {g} for {p} to {offset} ({to:?})");
        Ok(())
    }

    /// `rmdir groups/<G>`: DeleteGroups.
    pub(super) fn rmdir_group(&self, g: &str) -> FsResult<()> {
        let what = format!("rmdir of groups/{g}");
        self.check_writable(&what)?;
        self.groups()?
            .delete(g)
            .map_err(|e| Self::group_error(what, &e))?;
        self.inodes.forget_group(g);
        info!("Deleted group {g}");
        Ok(())
    }
}

/// A name the tree can show: not empty, not `.` or `..`, no `/` or NUL.
fn is_file_name(name: &str) -> bool {
    !name.is_empty() && name != "." && name != ".." && !name.contains(['/', '\0'])
}
