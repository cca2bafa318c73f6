//! Kafka's message-schema model, interpreted: the layout Kafka's generator
//! derives from its `*.json` message specs (fields with types, versions,
//! nullable and flexible versions, tagged fields, arrays, structs), as tables
//! that one engine reads, writes and renders as JSON.
//!
//! - [`codec`]: decode bytes to a [`StructValue`] and encode one back,
//!   byte-for-byte as Kafka's generated `read`/`write` methods do;
//! - [`json`]: the JSON Kafka's generated `*JsonConverter.write` produces
//!   (the form `kafka-dump-log` prints);
//! - [`group`], [`transaction`], [`share_state`], [`metadata`],
//!   [`remote_log`], [`raft`]: the schemas of
//!   Kafka's internal records, each table citing its Kafka source file.
//!
//! The tables are transcribed from Apache Kafka's JSON specs (Apache-2.0).
//! Pure: no I/O.

pub mod codec;
pub mod group;
pub mod group_share;
pub mod json;
pub mod metadata;
pub mod raft;
pub mod remote_log;
pub mod share_state;
pub mod transaction;

pub use codec::{decode, encode};
pub use json::{to_json, to_json_with};

/// A closed range of versions, as Kafka writes them: `"0+"`, `"1-3"`, `"none"`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Versions {
    pub lo: i16,
    pub hi: i16,
}

impl Versions {
    /// `"none"`.
    pub const NONE: Versions = Versions { lo: 1, hi: 0 };

    pub fn contains(self, v: i16) -> bool {
        self.lo <= v && v <= self.hi
    }
}

/// `"N+"`.
pub const fn from(lo: i16) -> Versions {
    Versions { lo, hi: i16::MAX }
}

/// `"A-B"`.
pub const fn range(lo: i16, hi: i16) -> Versions {
    Versions { lo, hi }
}

/// `"N"`.
pub const fn only(v: i16) -> Versions {
    Versions { lo: v, hi: v }
}

/// The field types of Kafka's message specs.
#[derive(Debug, Clone, Copy)]
pub enum Type {
    Bool,
    Int8,
    Int16,
    Uint16,
    Int32,
    Uint32,
    Int64,
    Float64,
    String,
    Bytes,
    Uuid,
    Array(&'static Type),
    Struct(&'static Struct),
}

pub const BOOL: Type = Type::Bool;
pub const INT8: Type = Type::Int8;
pub const INT16: Type = Type::Int16;
pub const UINT16: Type = Type::Uint16;
pub const INT32: Type = Type::Int32;
pub const UINT32: Type = Type::Uint32;
pub const INT64: Type = Type::Int64;
pub const FLOAT64: Type = Type::Float64;
pub const STRING: Type = Type::String;
pub const BYTES: Type = Type::Bytes;
pub const UUID: Type = Type::Uuid;

/// A field's `"default"`, when it is not the type's zero.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Default {
    /// 0, false, "", the zero UUID, empty bytes or array, a default struct.
    Zero,
    Null,
    Int(i64),
    Bool(bool),
    Float(f64),
    Str(&'static str),
}

/// One field of a struct. `name` is the JSON name Kafka prints (the spec's
/// name with its first letter lowercased).
#[derive(Debug, Clone, Copy)]
pub struct Field {
    pub name: &'static str,
    pub ty: Type,
    pub versions: Versions,
    pub nullable: Versions,
    /// `(tag, taggedVersions)` for a tagged field.
    pub tag: Option<(u32, Versions)>,
    pub default: Default,
}

/// A field present in `versions`, neither nullable nor tagged, zero default.
pub const fn f(name: &'static str, ty: Type, versions: Versions) -> Field {
    Field {
        name,
        ty,
        versions,
        nullable: Versions::NONE,
        tag: None,
        default: Default::Zero,
    }
}

impl Field {
    pub const fn nullable(self, v: Versions) -> Field {
        Field {
            nullable: v,
            ..self
        }
    }
    pub const fn tagged(self, tag: u32, v: Versions) -> Field {
        Field {
            tag: Some((tag, v)),
            ..self
        }
    }
    pub const fn default_int(self, d: i64) -> Field {
        Field {
            default: Default::Int(d),
            ..self
        }
    }
    pub const fn default_null(self) -> Field {
        Field {
            default: Default::Null,
            ..self
        }
    }
    pub const fn default_bool(self, d: bool) -> Field {
        Field {
            default: Default::Bool(d),
            ..self
        }
    }
    pub const fn default_str(self, d: &'static str) -> Field {
        Field {
            default: Default::Str(d),
            ..self
        }
    }
    pub const fn default_float(self, d: f64) -> Field {
        Field {
            default: Default::Float(d),
            ..self
        }
    }

    /// Tagged in this version.
    pub fn tagged_in(&self, v: i16) -> bool {
        matches!(self.tag, Some((_, tv)) if tv.contains(v))
    }
}

/// A struct: a message body, an inline struct or a common struct.
#[derive(Debug)]
pub struct Struct {
    pub name: &'static str,
    pub fields: &'static [Field],
}

impl Struct {
    pub const fn new(name: &'static str, fields: &'static [Field]) -> Struct {
        Struct { name, fields }
    }
}

/// A top-level message spec.
#[derive(Debug)]
pub struct Message {
    pub name: &'static str,
    /// `apiKey` (the record type of metadata and coordinator records), -1 if none.
    pub api_key: i16,
    pub valid: Versions,
    pub flexible: Versions,
    pub body: Struct,
}

/// A decoded value. Integer types all use `Int`; the schema says which.
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    Bool(bool),
    Int(i64),
    Float(f64),
    Str(Option<String>),
    Bytes(Option<Vec<u8>>),
    Uuid([u8; 16]),
    Array(Option<Vec<Value>>),
    Struct(Option<StructValue>),
}

/// A struct's values: one per schema field, in schema order (fields absent
/// from the version hold their defaults), and the tagged fields this schema
/// does not know, kept as raw bytes so they are written back unchanged.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct StructValue {
    pub fields: Vec<Value>,
    pub unknown_tagged: Vec<(u32, Vec<u8>)>,
}

impl StructValue {
    /// All defaults.
    pub fn default_for(s: &Struct) -> StructValue {
        StructValue {
            fields: s.fields.iter().map(default_value).collect(),
            unknown_tagged: Vec::new(),
        }
    }

    /// The value of the field named `name`.
    pub fn get<'a>(&'a self, s: &Struct, name: &str) -> Option<&'a Value> {
        let i = s.fields.iter().position(|f| f.name == name)?;
        self.fields.get(i)
    }

    /// Sets the field named `name`; false if the struct has no such field.
    pub fn set(&mut self, s: &Struct, name: &str, v: Value) -> bool {
        match s.fields.iter().position(|f| f.name == name) {
            Some(i) if i < self.fields.len() => {
                self.fields[i] = v;
                true
            }
            _ => false,
        }
    }
}

/// The value a field holds when the bytes do not carry it.
pub fn default_value(field: &Field) -> Value {
    if field.default == Default::Null {
        return match field.ty {
            Type::String => Value::Str(None),
            Type::Bytes => Value::Bytes(None),
            Type::Array(_) => Value::Array(None),
            Type::Struct(_) => Value::Struct(None),
            _ => zero_value(&field.ty),
        };
    }
    match (field.ty, field.default) {
        (_, Default::Zero) => zero_value(&field.ty),
        (_, Default::Int(d)) => Value::Int(d),
        (_, Default::Bool(d)) => Value::Bool(d),
        (_, Default::Float(d)) => Value::Float(d),
        (_, Default::Str(d)) => Value::Str(Some(d.to_string())),
        (_, Default::Null) => zero_value(&field.ty),
    }
}

fn zero_value(ty: &Type) -> Value {
    match ty {
        Type::Bool => Value::Bool(false),
        Type::Int8 | Type::Int16 | Type::Uint16 | Type::Int32 | Type::Uint32 | Type::Int64 => {
            Value::Int(0)
        }
        Type::Float64 => Value::Float(0.0),
        Type::String => Value::Str(Some(String::new())),
        Type::Bytes => Value::Bytes(Some(Vec::new())),
        Type::Uuid => Value::Uuid([0; 16]),
        Type::Array(_) => Value::Array(Some(Vec::new())),
        Type::Struct(s) => Value::Struct(Some(StructValue::default_for(s))),
    }
}

/// Why bytes do not decode, worded as Kafka's readers word it, so the
/// `Error at offset N, skipping. ...` lines read the same.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct SchemaError(pub String);

/// Kafka's `Uuid.toString()`: URL-safe base64 without padding.
pub fn uuid_string(u: &[u8; 16]) -> String {
    base64(u, URL_SAFE, false)
}

/// Kafka's `Uuid.fromString`.
pub fn parse_uuid(s: &str) -> Option<[u8; 16]> {
    let bytes = unbase64(s, URL_SAFE)?;
    bytes.try_into().ok()
}

const STANDARD: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
const URL_SAFE: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";

/// Jackson's `BinaryNode` text: standard base64 with padding.
pub fn base64_standard(b: &[u8]) -> String {
    base64(b, STANDARD, true)
}

fn base64(b: &[u8], alphabet: &[u8; 64], pad: bool) -> String {
    let mut out = String::with_capacity(b.len().div_ceil(3) * 4);
    for chunk in b.chunks(3) {
        let n = chunk.len();
        let v = (chunk[0] as u32) << 16
            | (*chunk.get(1).unwrap_or(&0) as u32) << 8
            | *chunk.get(2).unwrap_or(&0) as u32;
        for i in 0..4 {
            if i <= n {
                out.push(alphabet[(v >> (18 - 6 * i) & 63) as usize] as char);
            } else if pad {
                out.push('=');
            }
        }
    }
    out
}

fn unbase64(s: &str, alphabet: &[u8; 64]) -> Option<Vec<u8>> {
    let s = s.trim_end_matches('=');
    let mut out = Vec::new();
    let (mut acc, mut bits) = (0u32, 0u32);
    for c in s.bytes() {
        let v = alphabet.iter().position(|&a| a == c)? as u32;
        acc = acc << 6 | v;
        bits += 6;
        if bits >= 8 {
            bits -= 8;
            out.push((acc >> bits) as u8);
        }
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base64_forms() {
        // From Kafka's DumpLogSegmentsTest: "Subscription" and "Assignment".
        assert_eq!(base64_standard(b"Subscription"), "U3Vic2NyaXB0aW9u");
        assert_eq!(base64_standard(b"Assignment"), "QXNzaWdubWVudA==");
        let u = parse_uuid("Uj5wn_FqTXirEASvVZRY1w").unwrap();
        assert_eq!(uuid_string(&u), "Uj5wn_FqTXirEASvVZRY1w");
        assert_eq!(uuid_string(&[0; 16]), "AAAAAAAAAAAAAAAAAAAAAA");
    }
}
