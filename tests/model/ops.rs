//! The operations a sequence is made of, and their generators. Indices
//! (`part`, `handle`, ...) are taken modulo what exists when the operation
//! runs, as in mountpoint-s3's reftests, so that shrinking keeps sequences
//! meaningful.

use proptest::collection::vec;
use proptest::prelude::*;

/// Names `mkdir` and `rmdir` are tried with: a few valid ones (which the
/// other operations then use) and invalid ones.
pub const VALID_NAMES: &[&str] = &["t-0", "t-1", "a.b_c-0"];
pub const INVALID_NAMES: &[&str] = &[
    "t",
    "t-",
    "-0",
    "t-01",
    "t--1",
    "t-x",
    ".-0",
    "..-0",
    "t-2147483648",
    "t-+1",
    "t y-0",
    "é-0",
    "log",
];

/// A topic of 249 characters (valid) or 250 (invalid).
pub fn long_name(valid: bool) -> String {
    let n = if valid { 249 } else { 250 };
    format!("{}-0", "x".repeat(n))
}

#[derive(Clone, Debug)]
pub enum NameRef {
    /// A partition that exists (when one does).
    Existing(u8),
    Valid(u8),
    Invalid(u8),
    Long(bool),
}

impl NameRef {
    /// The name, given the partitions that exist.
    pub fn name(&self, existing: &[&String]) -> String {
        match self {
            NameRef::Existing(i) if !existing.is_empty() => {
                existing[*i as usize % existing.len()].to_string()
            }
            NameRef::Existing(i) | NameRef::Valid(i) => {
                VALID_NAMES[*i as usize % VALID_NAMES.len()].to_string()
            }
            NameRef::Invalid(i) => INVALID_NAMES[*i as usize % INVALID_NAMES.len()].to_string(),
            NameRef::Long(valid) => long_name(*valid),
        }
    }
}

/// A file of a partition that takes writes.
#[derive(Clone, Copy, Debug)]
pub enum Target {
    Log,
    Roll,
    Flush,
    DeleteRecords,
    /// Index into the config names.
    Config(u8),
}

/// What a write to a control or config file says; which part is used
/// depends on the file.
#[derive(Clone, Debug)]
pub struct Arg {
    pub offset: OffsetArg,
    /// Index into the config's candidate values.
    pub value: u8,
}

#[derive(Clone, Debug)]
pub enum OffsetArg {
    /// log start + n % (live records + 1): within range.
    Within(u8),
    /// "-1": the log end.
    End,
    /// log end + 1 + n.
    PastEnd(u8),
    /// log start - 1 - n, when that is an offset at all.
    Below(u8),
    /// Text that is no offset.
    Garbage(u8),
}

pub const GARBAGE: &[&str] = &["abc", "1e3", "015", "", "\n", "-2", "+1", "1 2", "0x10"];

/// Bytes written to `log`, and where the writes cut them.
#[derive(Clone, Debug)]
pub struct Payload {
    pub bytes: Vec<u8>,
    /// Cut points (taken modulo the length); each piece is one WRITE.
    pub cuts: Vec<u16>,
}

impl Payload {
    /// The non-empty pieces, in order.
    pub fn pieces(&self) -> Vec<&[u8]> {
        let len = self.bytes.len();
        if len == 0 {
            return Vec::new();
        }
        let mut cuts: Vec<usize> = self.cuts.iter().map(|c| *c as usize % len).collect();
        cuts.push(0);
        cuts.push(len);
        cuts.sort_unstable();
        cuts.dedup();
        cuts.windows(2).map(|w| &self.bytes[w[0]..w[1]]).collect()
    }
}

#[derive(Clone, Copy, Debug)]
pub enum Age {
    /// now_ms = the wall clock plus this many ms.
    Plus(u64),
}

/// A node of a partition, for probes.
#[derive(Clone, Copy, Debug)]
pub enum Node {
    Root,
    Partition,
    Log,
    OffsetDir,
    Offset(u8),
    TimeDir,
    Time(u8),
    Roll,
    Flush,
    DeleteRecords,
    ConfigDir,
    Config(u8),
    Status,
    Raw(u8),
}

#[derive(Clone, Copy, Debug)]
pub enum SetKind {
    Chmod,
    Chown,
    Utimes,
    Truncate0,
    Truncate5,
    Nothing,
}

/// A refusal (or an accepted no-op) the tree must answer with the
/// README's errno.
#[derive(Clone, Debug)]
pub enum Probe {
    OpenWrite(Node),
    OpenRead(Node),
    Setattr(Node, SetKind),
    /// setxattr (true) or removexattr (false).
    XattrChange(Node, bool),
    GetxattrAbsent(Node),
    /// unlink, rename, create, mknod, symlink, link of a name in a directory.
    NameChange(Node, u8, ChildName),
    MkdirIn(ChildName),
    RmdirIn(ChildName),
    /// A lookup of a name that is not (or is) there.
    Lookup(Node, ChildName),
    /// `dd if=log bs=1 skip=pos count=len`.
    ReadLogAt(u16, u16),
}

/// A name under a directory: one that exists there, or not.
#[derive(Clone, Debug)]
pub enum ChildName {
    Existing(u8),
    Other(u8),
}

pub const OTHER_NAMES: &[&str] = &[
    "newfile",
    "007",
    "-1",
    "+1",
    "1e3",
    "99999999999999999999",
    "x",
    "log2",
    "0",
];

pub const NAME_CHANGES: &[&str] = &["unlink", "rename", "create", "mknod", "symlink", "link"];

#[derive(Clone, Debug)]
pub enum Op {
    Mkdir(NameRef),
    Rmdir(NameRef),
    /// `rmdir p && mkdir p`: a new partition under the old name, while
    /// handles of the old one may still be open.
    Recreate(u8),
    /// `printf ... >> p/log`: open, one WRITE per piece, close.
    Append {
        part: u8,
        data: Payload,
    },
    /// Opens a writable file and keeps the handle.
    Open {
        part: u8,
        target: Target,
    },
    /// WRITEs to a held `log` handle.
    WriteLog {
        handle: u8,
        data: Payload,
    },
    /// One WRITE to a held control or config handle.
    WriteHandle {
        handle: u8,
        arg: Arg,
    },
    Close {
        handle: u8,
    },
    Fsync {
        handle: u8,
    },
    /// `echo arg > p/target`: open, truncate to 0, one WRITE, close.
    Echo {
        part: u8,
        target: Target,
        arg: Arg,
    },
    RetentionTick(Age),
    Remount,
    Crash,
    Probe {
        part: u8,
        probe: Probe,
    },
    /// A client of a group commits an offset (`model/groups.rs`).
    GroupCommit {
        group: u8,
        part: u8,
        offset: u8,
    },
    /// `echo value > groups/<G>/offsets/<p>`.
    GroupReset {
        group: u8,
        part: u8,
        arg: super::groups::ResetArg,
    },
    /// `rmdir groups/<G>`.
    GroupDelete {
        group: u8,
    },
}

fn byte() -> impl Strategy<Value = u8> {
    // Separator characters are common, so unkeyed lines sometimes hold one.
    prop_oneof![
        8 => prop::sample::select(b"abcxyz".to_vec()),
        2 => prop::sample::select(b":|\t ".to_vec()),
        1 => prop::sample::select(vec![0u8, 0xff, b'\r', b'\\']),
    ]
}

/// A line without its newline: mostly short, now and then long enough to
/// pass a small `max.message.bytes`.
fn line() -> impl Strategy<Value = Vec<u8>> {
    let long = (80usize..1200, any::<u8>()).prop_map(|(n, b)| {
        let mut v = vec![b'a' + b % 26; n];
        v[n / 2] = b':';
        v
    });
    prop_oneof![12 => vec(byte(), 0..12), 1 => long]
}

/// Separators keyed payloads use (some of `config/key.separator`'s values).
const SEPARATORS: &[&str] = &["\t", "\t", ":", "|", " ", "::"];

/// `key<sep>value`, as `parse.key` reads it; now and then a line without.
fn keyed_line(sep: &'static str) -> impl Strategy<Value = Vec<u8>> {
    let keyed = (vec(byte(), 0..6), line()).prop_map(move |(mut k, v)| {
        k.extend_from_slice(sep.as_bytes());
        k.extend_from_slice(&v);
        k
    });
    prop_oneof![9 => keyed, 1 => line()]
}

fn payload() -> impl Strategy<Value = Payload> {
    let plain = (vec(line(), 0..8), prop::option::weighted(0.3, line()));
    let keyed = prop::sample::select(SEPARATORS.to_vec()).prop_flat_map(|sep| {
        (
            vec(keyed_line(sep), 0..8),
            prop::option::weighted(0.3, keyed_line(sep)),
        )
    });
    let cuts = prop_oneof![2 => Just(Vec::new()), 1 => vec(any::<u16>(), 1..4)];
    (prop_oneof![3 => plain, 2 => keyed], cuts).prop_map(|((lines, tail), cuts)| {
        let mut bytes = Vec::new();
        for l in lines {
            bytes.extend_from_slice(&l);
            bytes.push(b'\n');
        }
        if let Some(t) = tail {
            bytes.extend_from_slice(&t);
        }
        Payload { bytes, cuts }
    })
}

/// Configs whose values change what the tree does, by their index in
/// `configs::names()`: retention, flush.messages, max.message.bytes,
/// compression.type, parse.key, key.separator.
const BUSY_CONFIGS: &[u8] = &[5, 6, 7, 9, 11, 12, 13];

fn target() -> impl Strategy<Value = Target> {
    let config = prop_oneof![
        4 => prop::sample::select(BUSY_CONFIGS.to_vec()),
        1 => any::<u8>(),
    ];
    prop_oneof![
        2 => Just(Target::Roll),
        1 => Just(Target::Flush),
        2 => Just(Target::DeleteRecords),
        6 => config.prop_map(Target::Config),
    ]
}

fn arg() -> impl Strategy<Value = Arg> {
    let offset = prop_oneof![
        4 => any::<u8>().prop_map(OffsetArg::Within),
        1 => Just(OffsetArg::End),
        1 => any::<u8>().prop_map(OffsetArg::PastEnd),
        1 => any::<u8>().prop_map(OffsetArg::Below),
        1 => any::<u8>().prop_map(OffsetArg::Garbage),
    ];
    (offset, any::<u8>()).prop_map(|(offset, value)| Arg { offset, value })
}

fn node() -> impl Strategy<Value = Node> {
    prop_oneof![
        Just(Node::Root),
        Just(Node::Partition),
        Just(Node::Log),
        Just(Node::OffsetDir),
        any::<u8>().prop_map(Node::Offset),
        Just(Node::TimeDir),
        any::<u8>().prop_map(Node::Time),
        Just(Node::Roll),
        Just(Node::Flush),
        Just(Node::DeleteRecords),
        Just(Node::ConfigDir),
        any::<u8>().prop_map(Node::Config),
        Just(Node::Status),
        any::<u8>().prop_map(Node::Raw),
    ]
}

fn child() -> impl Strategy<Value = ChildName> {
    prop_oneof![
        any::<u8>().prop_map(ChildName::Existing),
        any::<u8>().prop_map(ChildName::Other),
    ]
}

fn probe() -> impl Strategy<Value = Probe> {
    let set = prop_oneof![
        Just(SetKind::Chmod),
        Just(SetKind::Chown),
        Just(SetKind::Utimes),
        Just(SetKind::Truncate0),
        Just(SetKind::Truncate5),
        Just(SetKind::Nothing),
    ];
    prop_oneof![
        node().prop_map(Probe::OpenWrite),
        node().prop_map(Probe::OpenRead),
        (node(), set).prop_map(|(n, s)| Probe::Setattr(n, s)),
        (node(), any::<bool>()).prop_map(|(n, s)| Probe::XattrChange(n, s)),
        node().prop_map(Probe::GetxattrAbsent),
        (node(), any::<u8>(), child()).prop_map(|(n, o, c)| Probe::NameChange(n, o, c)),
        child().prop_map(Probe::MkdirIn),
        child().prop_map(Probe::RmdirIn),
        (node(), child()).prop_map(|(n, c)| Probe::Lookup(n, c)),
        (any::<u16>(), 1u16..200).prop_map(|(p, l)| Probe::ReadLogAt(p, l)),
    ]
}

fn name_ref(existing: u32) -> impl Strategy<Value = NameRef> {
    prop_oneof![
        existing => any::<u8>().prop_map(NameRef::Existing),
        6 => any::<u8>().prop_map(NameRef::Valid),
        2 => any::<u8>().prop_map(NameRef::Invalid),
        1 => any::<bool>().prop_map(NameRef::Long),
    ]
}

pub fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        3 => name_ref(2).prop_map(Op::Mkdir),
        2 => name_ref(12).prop_map(Op::Rmdir),
        1 => any::<u8>().prop_map(Op::Recreate),
        10 => (any::<u8>(), payload()).prop_map(|(part, data)| Op::Append { part, data }),
        3 => (any::<u8>(), prop_oneof![1 => Just(Target::Log), 1 => target()])
            .prop_map(|(part, target)| Op::Open { part, target }),
        4 => (any::<u8>(), payload()).prop_map(|(handle, data)| Op::WriteLog { handle, data }),
        3 => (any::<u8>(), arg()).prop_map(|(handle, arg)| Op::WriteHandle { handle, arg }),
        2 => any::<u8>().prop_map(|handle| Op::Close { handle }),
        1 => any::<u8>().prop_map(|handle| Op::Fsync { handle }),
        6 => (any::<u8>(), target(), arg()).prop_map(|(part, target, arg)| Op::Echo {
            part,
            target,
            arg
        }),
        2 => prop::sample::select(vec![0u64, 1_000, 3_600_001, 8 * 86_400_000, 400 * 86_400_000])
            .prop_map(|ms| Op::RetentionTick(Age::Plus(ms))),
        1 => Just(Op::Remount),
        1 => Just(Op::Crash),
        3 => (any::<u8>(), probe()).prop_map(|(part, probe)| Op::Probe { part, probe }),
        2 => (any::<u8>(), any::<u8>(), any::<u8>()).prop_map(|(group, part, offset)| {
            Op::GroupCommit {
                group,
                part,
                offset,
            }
        }),
        2 => (any::<u8>(), any::<u8>(), reset_arg())
            .prop_map(|(group, part, arg)| Op::GroupReset { group, part, arg }),
        1 => any::<u8>().prop_map(|group| Op::GroupDelete { group }),
    ]
}

fn reset_arg() -> impl Strategy<Value = super::groups::ResetArg> {
    use super::groups::ResetArg;
    prop_oneof![
        4 => any::<u8>().prop_map(ResetArg::Offset),
        1 => any::<u8>().prop_map(ResetArg::Past),
        1 => Just(ResetArg::Earliest),
        1 => Just(ResetArg::Latest),
        1 => any::<u8>().prop_map(ResetArg::Garbage),
    ]
}

/// A sequence: it starts by making a partition and setting some of its
/// configs, as a session would, then anything goes.
pub fn ops(max: usize) -> impl Strategy<Value = Vec<Op>> {
    let setup = vec(
        (prop::sample::select(BUSY_CONFIGS.to_vec()), arg()).prop_map(|(c, arg)| Op::Echo {
            part: 0,
            target: Target::Config(c),
            arg,
        }),
        0..4,
    );
    (setup, vec(op(), 1..max)).prop_map(|(setup, ops)| {
        let mut all = vec![Op::Mkdir(NameRef::Valid(0))];
        all.extend(setup);
        all.extend(ops);
        all
    })
}
