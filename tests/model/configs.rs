//! The model's own config table: Kafka's topic-level names, defaults and
//! validators (`ConfigDef`), plus the two console-producer properties the
//! tree reads for `log`. Nothing here comes from commitfs's config code.
//!
//! The rules modelled:
//! - a value is UTF-8, the shell's trailing newline is dropped and, as
//!   Kafka's `ConfigDef.parseType` does, blanks around it are trimmed;
//! - INT and LONG values are Java's `parseInt`/`parseLong` (an optional sign,
//!   decimal digits, in range) and at least the minimum; they read back in
//!   canonical decimal;
//! - `compression.type` is one of Kafka's names (`uncompressed`, or `none` as
//!   the README names it, reading back as `none`), case-sensitive;
//! - `message.timestamp.type` is `CreateTime` or `LogAppendTime`;
//! - `cleanup.policy` is a LIST: split at commas (blanks around them
//!   dropped), each item `compact` or `delete`, case-sensitive, the empty
//!   list allowed; it reads back joined by commas;
//! - `min.cleanable.dirty.ratio` is a DOUBLE between 0 and 1, reading back
//!   as Java prints a double (`0.5`, `1.0`);
//! - `min.compaction.lag.ms` may not exceed `max.compaction.lag.ms`
//!   (Kafka's `validateValues`): a write that would make it is refused;
//! - the tiered storage configs: BOOLEANs (`true` or `false` in any case,
//!   reading back in lower case) and `local.retention.*` LONGs of at least
//!   -2; `remote.storage.enable=true` is refused, there being no remote
//!   storage system to turn on;
//! - `parse.key` is `true` or `false`;
//! - `key.separator` keeps its blanks (a space is a separator), loses only
//!   trailing newlines, must not be empty, and takes the properties-file
//!   escapes `\t`, `\n` and `\\` (it reads back escaped).

use std::collections::BTreeMap;

#[derive(Clone, Copy, Debug)]
enum Rule {
    Int(i64),
    Long(i64),
    Compression,
    TimestampType,
    Bool,
    /// Kafka's BOOLEAN, unlike the tree's `parse.key`: any case.
    KafkaBool,
    Separator,
    Policy,
    Ratio,
}

/// Name, Kafka's default as the file reads, rule.
const TABLE: &[(&str, &str, Rule)] = &[
    ("segment.bytes", "1073741824", Rule::Int(1_048_576)),
    ("segment.ms", "604800000", Rule::Long(1)),
    ("segment.jitter.ms", "0", Rule::Long(0)),
    ("segment.index.bytes", "10485760", Rule::Int(4)),
    ("index.interval.bytes", "4096", Rule::Int(0)),
    ("retention.ms", "604800000", Rule::Long(-1)),
    ("retention.bytes", "-1", Rule::Long(i64::MIN)),
    ("flush.messages", "9223372036854775807", Rule::Long(1)),
    ("flush.ms", "9223372036854775807", Rule::Long(0)),
    ("max.message.bytes", "1048588", Rule::Int(0)),
    ("file.delete.delay.ms", "60000", Rule::Long(0)),
    ("compression.type", "producer", Rule::Compression),
    ("message.timestamp.type", "CreateTime", Rule::TimestampType),
    ("cleanup.policy", "delete", Rule::Policy),
    ("min.cleanable.dirty.ratio", "0.5", Rule::Ratio),
    ("min.compaction.lag.ms", "0", Rule::Long(0)),
    (
        "max.compaction.lag.ms",
        "9223372036854775807",
        Rule::Long(1),
    ),
    ("delete.retention.ms", "86400000", Rule::Long(0)),
    ("remote.storage.enable", "false", Rule::KafkaBool),
    ("local.retention.ms", "-2", Rule::Long(-2)),
    ("local.retention.bytes", "-2", Rule::Long(-2)),
    ("remote.log.copy.disable", "false", Rule::KafkaBool),
    ("remote.log.delete.on.disable", "false", Rule::KafkaBool),
    ("parse.key", "false", Rule::Bool),
    ("key.separator", "\\t", Rule::Separator),
];

/// Every config name, in the order `config/` lists them.
pub fn names() -> Vec<&'static str> {
    TABLE.iter().map(|(n, _, _)| *n).collect()
}

/// Values to write to `name`: valid and invalid ones, chosen so that no
/// valid value makes the implementation roll a segment on its own (large
/// `segment.bytes`, `segment.ms`, `segment.index.bytes`; see the module
/// comment of `reference`).
pub fn candidates(name: &str) -> &'static [&'static str] {
    match name {
        "segment.bytes" => &[
            "1048576",
            "104857600",
            " 1073741824 ",
            "1048575",
            "lots",
            "-1",
        ],
        "segment.ms" => &["3600000", "86400000", "+604800000", "0", "-1", "1h"],
        "segment.jitter.ms" => &["0", "1000", "-1", "x"],
        "segment.index.bytes" => &["4096", "1048576", "10485760", "3", "-8", "4096.0"],
        "index.interval.bytes" => &["0", "100", "4096", "-1", "x"],
        "retention.ms" => &["-1", "0", "1000", "3600000", "604800000", "-2", "soon"],
        "retention.bytes" => &["-1", "0", "100", "300", "1000", "99999999999", "-5", "1e3"],
        "flush.messages" => &["1", "3", "9223372036854775807", "0", "-1"],
        "flush.ms" => &["0", "1000", "-1", "9223372036854775808"],
        "max.message.bytes" => &[
            "0",
            "100",
            "150",
            "200",
            "500",
            "1000",
            "1048588",
            "-1",
            "2147483648",
            " 300 ",
        ],
        "file.delete.delay.ms" => &["0", "60000", "-1"],
        "compression.type" => &[
            "gzip",
            "snappy",
            "lz4",
            "zstd",
            "none",
            "uncompressed",
            "producer",
            "brotli",
            "GZIP",
            "",
        ],
        "message.timestamp.type" => &[
            "LogAppendTime",
            "CreateTime",
            " LogAppendTime ",
            "logappendtime",
            "",
        ],
        "parse.key" => &["true", "true", "false", "true", "yes", "TRUE", ""],
        "cleanup.policy" => &[
            "compact",
            "delete",
            "compact,delete",
            " delete , compact ",
            "",
            "Compact",
            "compact,",
            "remove",
        ],
        "min.cleanable.dirty.ratio" => &["0", "0.25", "1", "0.5", "1.5", "-0.1", "half"],
        // Lags of a day and more: a compacted partition rolls by
        // `max.compaction.lag.ms`, which must not roll one on its own.
        "min.compaction.lag.ms" => &["0", "86400000", "172800000", "-1", "x"],
        "max.compaction.lag.ms" => &["86400000", "9223372036854775807", "0", "-1"],
        "delete.retention.ms" => &["0", "86400000", "-1"],
        "remote.storage.enable" => &["false", "true", " FALSE ", "TRUE", "yes"],
        "local.retention.ms" | "local.retention.bytes" => &["-2", "-1", "1000", "-3", "x"],
        "remote.log.copy.disable" | "remote.log.delete.on.disable" => {
            &["true", "false", " TRUE ", "no", ""]
        }
        "key.separator" => &[":", "|", " ", "\\t", "::", "\\n", "\\\\", "", "\n"],
        _ => &["1"],
    }
}

/// One partition's effective configs, as their files read (without `\n`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Configs {
    values: BTreeMap<&'static str, String>,
}

impl Default for Configs {
    fn default() -> Self {
        Configs {
            values: TABLE.iter().map(|(n, d, _)| (*n, d.to_string())).collect(),
        }
    }
}

impl Configs {
    /// What `config/<name>` reads (with its newline).
    pub fn text(&self, name: &str) -> String {
        format!("{}\n", self.values[name])
    }

    pub fn long(&self, name: &str) -> i64 {
        self.values[name].parse().expect("a numeric config")
    }

    /// Appended batches carry the append time as `LogAppendTime`.
    pub fn log_append_time(&self) -> bool {
        self.values["message.timestamp.type"] == "LogAppendTime"
    }

    /// `cleanup.policy` names `compact`: every record needs a key.
    pub fn compact(&self) -> bool {
        self.values["cleanup.policy"]
            .split(',')
            .any(|i| i == "compact")
    }

    /// `cleanup.policy` names `delete`: retention by size and time applies.
    pub fn delete(&self) -> bool {
        self.values["cleanup.policy"]
            .split(',')
            .any(|i| i == "delete")
    }

    pub fn parse_key(&self) -> bool {
        self.values["parse.key"] == "true"
    }

    /// The separator's bytes.
    pub fn separator(&self) -> Vec<u8> {
        unescape(&self.values["key.separator"]).into_bytes()
    }

    /// The codec of appended batches (0 none, 1 gzip, 2 snappy, 3 lz4, 4 zstd).
    pub fn codec(&self) -> u8 {
        match self.values["compression.type"].as_str() {
            "gzip" => 1,
            "snappy" => 2,
            "lz4" => 3,
            "zstd" => 4,
            _ => 0,
        }
    }

    /// A write of `data` to `config/<name>`: applied, or refused with EINVAL.
    pub fn write(&mut self, name: &'static str, data: &[u8]) -> Result<(), i32> {
        let rule = TABLE
            .iter()
            .find(|(n, _, _)| *n == name)
            .map(|(_, _, r)| *r)
            .expect("a known config");
        let text = std::str::from_utf8(data).map_err(|_| libc::EINVAL)?;
        let value = validate(rule, text).ok_or(libc::EINVAL)?;
        let before = self.values.insert(name, value);
        let remote = self.values["remote.storage.enable"] == "true";
        if remote || self.long("min.compaction.lag.ms") > self.long("max.compaction.lag.ms") {
            self.values.insert(name, before.expect("a known config"));
            return Err(libc::EINVAL);
        }
        Ok(())
    }
}

/// The value as it reads back, or `None` when Kafka refuses it.
fn validate(rule: Rule, text: &str) -> Option<String> {
    if let Rule::Separator = rule {
        let v = text.trim_end_matches(['\n', '\r']);
        return (!v.is_empty()).then(|| escape(&unescape(v)));
    }
    let v = text.trim();
    match rule {
        Rule::Int(min) => java_integer(v, i32::MIN as i64, i32::MAX as i64)
            .filter(|n| *n >= min)
            .map(|n| n.to_string()),
        Rule::Long(min) => java_integer(v, i64::MIN, i64::MAX)
            .filter(|n| *n >= min)
            .map(|n| n.to_string()),
        Rule::Compression => match v {
            "uncompressed" | "none" => Some("none".to_string()),
            "gzip" | "snappy" | "lz4" | "zstd" | "producer" => Some(v.to_string()),
            _ => None,
        },
        Rule::TimestampType => matches!(v, "CreateTime" | "LogAppendTime").then(|| v.to_string()),
        Rule::Bool => matches!(v, "true" | "false").then(|| v.to_string()),
        Rule::KafkaBool => {
            let v = v.to_lowercase();
            matches!(v.as_str(), "true" | "false").then_some(v)
        }
        Rule::Policy => {
            let items: Vec<&str> = match v {
                "" => Vec::new(),
                v => v.split(',').map(str::trim).collect(),
            };
            items
                .iter()
                .all(|i| matches!(*i, "compact" | "delete"))
                .then(|| items.join(","))
        }
        Rule::Ratio => {
            let d: f64 = v.parse().ok()?;
            (0.0..=1.0).contains(&d).then(|| {
                let s = d.to_string();
                if s.contains('.') { s } else { format!("{s}.0") }
            })
        }
        Rule::Separator => unreachable!(),
    }
}

/// Java's `Long.parseLong` / `Integer.parseInt` within [lo, hi]: an optional
/// `+` or `-`, then one or more decimal digits.
fn java_integer(s: &str, lo: i64, hi: i64) -> Option<i64> {
    let digits = s.strip_prefix(['+', '-']).unwrap_or(s);
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let magnitude: i128 = digits.parse().ok()?;
    let n = if s.starts_with('-') {
        -magnitude
    } else {
        magnitude
    };
    (lo as i128..=hi as i128).contains(&n).then_some(n as i64)
}

fn unescape(s: &str) -> String {
    let mut out = String::new();
    let mut chars = s.chars();
    while let Some(c) = chars.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        match chars.next() {
            Some('t') => out.push('\t'),
            Some('n') => out.push('\n'),
            Some('\\') => out.push('\\'),
            Some(other) => {
                out.push('\\');
                out.push(other);
            }
            None => out.push('\\'),
        }
    }
    out
}

fn escape(s: &str) -> String {
    let mut out = String::new();
    for c in s.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '\t' => out.push_str("\\t"),
            '\n' => out.push_str("\\n"),
            c => out.push(c),
        }
    }
    out
}
