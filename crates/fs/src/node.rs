//! The kinds of node in the tree, their names, and the text of generated files.

use std::sync::Arc;

/// Identity of a node. Partition names are shared (`Arc<str>`) because every
/// node below a partition carries its name.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum NodeKey {
    Root,
    /// A Kafka file of the data-directory root (`meta.properties`, checkpoints);
    /// listed on read-only mounts only.
    RootFile(Arc<str>),
    Partition(Arc<str>),
    /// A file of the partition directory as storage lists it (segments, side files).
    Raw(Arc<str>, Arc<str>),
    Log(Arc<str>),
    /// `committed`: the log as a `read_committed` consumer reads it.
    Committed(Arc<str>),
    OffsetDir(Arc<str>),
    Offset(Arc<str>, i64),
    TimeDir(Arc<str>),
    /// `time/<ms>`: the first offset whose timestamp is >= ms.
    Time(Arc<str>, i64),
    Control(Arc<str>, Control),
    Status(Arc<str>),
    ConfigDir(Arc<str>),
    Config(Arc<str>, &'static str),
    /// `groups/`: the consumer groups, where the backend offers them.
    GroupsDir,
    Group(Arc<str>),
    /// `groups/<G>/describe`, `members`, `state`.
    GroupFile(Arc<str>, GroupFile),
    /// `groups/<G>/offsets/`.
    GroupOffsetsDir(Arc<str>),
    /// `groups/<G>/offsets/<topic>-<p>`: the group and the partition's name.
    GroupOffset(Arc<str>, Arc<str>),
}

/// The tables of a group, as `kafka-consumer-groups.sh --describe` prints them.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum GroupFile {
    Describe,
    Members,
    State,
}

impl GroupFile {
    pub const ALL: [GroupFile; 3] = [GroupFile::Describe, GroupFile::Members, GroupFile::State];

    pub fn name(self) -> &'static str {
        match self {
            GroupFile::Describe => "describe",
            GroupFile::Members => "members",
            GroupFile::State => "state",
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Control {
    Roll,
    Flush,
    DeleteRecords,
    /// A pass of the log cleaner.
    Compact,
}

impl Control {
    pub fn name(self) -> &'static str {
        match self {
            Control::Roll => "roll",
            Control::Flush => "flush",
            Control::DeleteRecords => "delete-records",
            Control::Compact => "compact",
        }
    }
}

pub const LOG: &str = "log";
pub const COMMITTED: &str = "committed";
pub const OFFSET: &str = "offset";
pub const ROLL: &str = "roll";
pub const FLUSH: &str = "flush";
pub const CONFIG: &str = "config";
pub const STATUS: &str = "status";
pub const TIME: &str = "time";
pub const DELETE_RECORDS: &str = "delete-records";
pub const COMPACT: &str = "compact";
/// The root's directory of consumer groups: never a partition's name,
/// which ends in `-<number>`.
pub const GROUPS: &str = "groups";
pub const GROUP_OFFSETS: &str = "offsets";

/// The generated entries of a partition directory, listed after its raw files.
pub const SPECIAL_NAMES: &[&str] = &[
    LOG,
    COMMITTED,
    OFFSET,
    TIME,
    ROLL,
    FLUSH,
    DELETE_RECORDS,
    COMPACT,
    CONFIG,
    STATUS,
];

/// The nodes that live in no partition (the root's and the groups'), as a
/// pattern: [`NodeKey::partition`] and every match that relies on its
/// `None` name the same set, so a node added to it is added to them all.
macro_rules! outside_partitions {
    () => {
        $crate::node::NodeKey::Root
            | $crate::node::NodeKey::RootFile(_)
            | $crate::node::NodeKey::GroupsDir
            | $crate::node::NodeKey::Group(_)
            | $crate::node::NodeKey::GroupFile(..)
            | $crate::node::NodeKey::GroupOffsetsDir(_)
            | $crate::node::NodeKey::GroupOffset(..)
    };
}
pub(crate) use outside_partitions;

impl NodeKey {
    /// The partition this node lives in, if any.
    pub fn partition(&self) -> Option<&Arc<str>> {
        match self {
            outside_partitions!() => None,
            NodeKey::Partition(p)
            | NodeKey::Raw(p, _)
            | NodeKey::Log(p)
            | NodeKey::Committed(p)
            | NodeKey::OffsetDir(p)
            | NodeKey::Offset(p, _)
            | NodeKey::TimeDir(p)
            | NodeKey::Time(p, _)
            | NodeKey::Control(p, _)
            | NodeKey::Status(p)
            | NodeKey::ConfigDir(p)
            | NodeKey::Config(p, _) => Some(p),
        }
    }

    pub fn is_dir(&self) -> bool {
        matches!(
            self,
            NodeKey::Root
                | NodeKey::Partition(_)
                | NodeKey::OffsetDir(_)
                | NodeKey::TimeDir(_)
                | NodeKey::ConfigDir(_)
                | NodeKey::GroupsDir
                | NodeKey::Group(_)
                | NodeKey::GroupOffsetsDir(_)
        )
    }

    /// The group this node belongs to, if any.
    pub fn group(&self) -> Option<&Arc<str>> {
        match self {
            NodeKey::Group(g)
            | NodeKey::GroupFile(g, _)
            | NodeKey::GroupOffsetsDir(g)
            | NodeKey::GroupOffset(g, _) => Some(g),
            _ => None,
        }
    }

    /// The special child `name` of partition `p`, if `name` is one.
    pub fn special(p: &Arc<str>, name: &str) -> Option<NodeKey> {
        let p = p.clone();
        Some(match name {
            LOG => NodeKey::Log(p),
            COMMITTED => NodeKey::Committed(p),
            OFFSET => NodeKey::OffsetDir(p),
            TIME => NodeKey::TimeDir(p),
            DELETE_RECORDS => NodeKey::Control(p, Control::DeleteRecords),
            ROLL => NodeKey::Control(p, Control::Roll),
            FLUSH => NodeKey::Control(p, Control::Flush),
            COMPACT => NodeKey::Control(p, Control::Compact),
            CONFIG => NodeKey::ConfigDir(p),
            STATUS => NodeKey::Status(p),
            _ => return None,
        })
    }

    /// The path below the mountpoint, for log lines.
    pub fn path(&self) -> String {
        match self {
            NodeKey::Root => "/".to_string(),
            NodeKey::RootFile(f) => f.to_string(),
            NodeKey::Partition(p) => p.to_string(),
            NodeKey::Raw(p, f) => format!("{p}/{f}"),
            NodeKey::Log(p) => format!("{p}/{LOG}"),
            NodeKey::Committed(p) => format!("{p}/{COMMITTED}"),
            NodeKey::OffsetDir(p) => format!("{p}/{OFFSET}"),
            NodeKey::Offset(p, n) => format!("{p}/{OFFSET}/{n}"),
            NodeKey::TimeDir(p) => format!("{p}/{TIME}"),
            NodeKey::Time(p, ms) => format!("{p}/{TIME}/{ms}"),
            NodeKey::Control(p, c) => format!("{p}/{}", c.name()),
            NodeKey::Status(p) => format!("{p}/{STATUS}"),
            NodeKey::ConfigDir(p) => format!("{p}/{CONFIG}"),
            NodeKey::Config(p, n) => format!("{p}/{CONFIG}/{n}"),
            NodeKey::GroupsDir => GROUPS.to_string(),
            NodeKey::Group(g) => format!("{GROUPS}/{g}"),
            NodeKey::GroupFile(g, f) => format!("{GROUPS}/{g}/{}", f.name()),
            NodeKey::GroupOffsetsDir(g) => format!("{GROUPS}/{g}/{GROUP_OFFSETS}"),
            NodeKey::GroupOffset(g, p) => format!("{GROUPS}/{g}/{GROUP_OFFSETS}/{p}"),
        }
    }

    /// Nodes whose permission bits say "writable" (a root caller ignores the
    /// bits, so `open` enforces this itself).
    pub fn writable(&self) -> bool {
        matches!(
            self,
            NodeKey::Log(_) | NodeKey::Control(..) | NodeKey::Config(..) | NodeKey::GroupOffset(..)
        )
    }

    /// Nodes that can be opened for reading (`log` reads as the consumer stream).
    pub fn readable(&self) -> bool {
        !matches!(self, NodeKey::Control(..))
    }
}

/// An offset as a file name: canonical decimal only, so that each offset has
/// exactly one name (`007`, `+7`, `7e0` would otherwise alias `7`).
pub fn parse_offset_name(name: &str) -> Option<i64> {
    let b = name.as_bytes();
    if b.is_empty() || !b.iter().all(u8::is_ascii_digit) || (b.len() > 1 && b[0] == b'0') {
        return None;
    }
    name.parse().ok()
}

/// A value written to `delete-records`: a canonical offset, or `-1` for the
/// log end offset (Kafka's DeleteRecords meaning of -1: up to the high watermark).
pub fn parse_delete_records(data: &[u8]) -> Option<i64> {
    let s = std::str::from_utf8(data).ok()?.trim();
    if s == "-1" {
        return Some(-1);
    }
    parse_offset_name(s)
}

/// The value written to a config file, as `LogConfig::set` should see it: the
/// shell's trailing newline dropped; surrounding blanks dropped too except for
/// `key.separator`, where a blank can be the value.
pub fn config_value<'a>(name: &str, data: &'a [u8]) -> Result<&'a str, std::str::Utf8Error> {
    let s = std::str::from_utf8(data)?;
    let s = s.strip_suffix('\n').unwrap_or(s);
    let s = s.strip_suffix('\r').unwrap_or(s);
    Ok(if name == "key.separator" { s } else { s.trim() })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn offset_names_are_canonical() {
        assert_eq!(parse_offset_name("0"), Some(0));
        assert_eq!(parse_offset_name("680"), Some(680));
        for bad in [
            "",
            "007",
            "00",
            "+1",
            "-1",
            "1e3",
            " 1",
            "1 ",
            "0x10",
            "99999999999999999999",
        ] {
            assert_eq!(parse_offset_name(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn delete_records_values() {
        assert_eq!(parse_delete_records(b"1000\n"), Some(1000));
        assert_eq!(parse_delete_records(b" 0 \n"), Some(0));
        assert_eq!(parse_delete_records(b"-1\n"), Some(-1));
        for bad in ["", "\n", "-2", "1e3", "007", "x", "1 2"] {
            assert_eq!(parse_delete_records(bad.as_bytes()), None, "{bad:?}");
        }
        assert_eq!(parse_delete_records(b"\xff"), None, "not UTF-8");
    }

    #[test]
    fn config_values() {
        assert_eq!(
            config_value("segment.bytes", b"1048576\n").unwrap(),
            "1048576"
        );
        assert_eq!(config_value("segment.bytes", b" 5 \r\n").unwrap(), "5");
        assert_eq!(config_value("key.separator", b" \n").unwrap(), " ");
    }
}
