//! The JSON Kafka's generated `*JsonConverter.write(message, version)`
//! builds, as Jackson's `JsonNode.toString()` prints it:
//! - fields in schema order, named in camelCase; a field absent from the
//!   version is left out, a tagged field is left out while it holds its default;
//! - int8..int64, uint16, uint32 as JSON numbers; float64 as Java's
//!   `Double.toString`; bool as true/false;
//! - strings escaped as Jackson escapes them (`"`, `\`, control characters;
//!   nothing else); uuid as its base64url text; bytes as standard base64;
//! - null for a null string, bytes, array or struct.

use super::{Field, Struct, StructValue, Type, Value, base64_standard, default_value, uuid_string};

/// `value` (a `struct_` at `version`) as Kafka's JSON converter writes it.
pub fn to_json(struct_: &Struct, version: i16, value: &StructValue) -> String {
    to_json_with(struct_, version, value, &|_, _| None)
}

/// Replaces a field's JSON: given a field and its value, `Some(json)` is
/// written in the field's place (what kafka-dump-log does to the consumer
/// protocol bytes of a group's members).
pub type Override<'a> = &'a dyn Fn(&Field, &Value) -> Option<String>;

/// [`to_json`], with some fields' JSON replaced by `over`.
pub fn to_json_with(struct_: &Struct, version: i16, value: &StructValue, over: Override) -> String {
    let mut out = String::new();
    write_struct(&mut out, struct_, version, value, over);
    out
}

fn write_struct(out: &mut String, s: &Struct, version: i16, v: &StructValue, over: Override) {
    out.push('{');
    let mut first = true;
    for (field, value) in s.fields.iter().zip(&v.fields) {
        if !field.versions.contains(version) {
            continue;
        }
        if field.tagged_in(version) && *value == default_value(field) {
            continue;
        }
        if !first {
            out.push(',');
        }
        first = false;
        push_string(out, field.name);
        out.push(':');
        match over(field, value) {
            Some(json) => out.push_str(&json),
            None => write_value(out, &field.ty, version, value, over),
        }
    }
    out.push('}');
}

fn write_value(out: &mut String, ty: &Type, version: i16, v: &Value, over: Override) {
    match (ty, v) {
        (_, Value::Bool(b)) => out.push_str(if *b { "true" } else { "false" }),
        (_, Value::Int(i)) => out.push_str(&i.to_string()),
        (_, Value::Float(x)) => out.push_str(&java_double(*x)),
        (_, Value::Uuid(u)) => push_string(out, &uuid_string(u)),
        (_, Value::Str(Some(s))) => push_string(out, s),
        (_, Value::Bytes(Some(b))) => push_string(out, &base64_standard(b)),
        (Type::Array(elem), Value::Array(Some(items))) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_value(out, elem, version, item, over);
            }
            out.push(']');
        }
        (Type::Struct(s), Value::Struct(Some(sv))) => write_struct(out, s, version, sv, over),
        (_, Value::Str(None) | Value::Bytes(None) | Value::Array(None) | Value::Struct(None)) => {
            out.push_str("null")
        }
        // A value that does not match its type cannot come from the decoder.
        _ => out.push_str("null"),
    }
}

/// A JSON string as Jackson writes it.
pub fn push_string(out: &mut String, s: &str) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\u{8}' => out.push_str("\\b"),
            '\t' => out.push_str("\\t"),
            '\n' => out.push_str("\\n"),
            '\u{c}' => out.push_str("\\f"),
            '\r' => out.push_str("\\r"),
            c if (c as u32) < 0x20 => out.push_str(&format!("\\u{:04X}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
}

/// Java's `Double.toString`: plain with at least one decimal between 10^-3
/// and 10^7, computerized scientific notation (`1.0E10`) outside.
pub fn java_double(x: f64) -> String {
    if x.is_nan() {
        return "NaN".into();
    }
    if x.is_infinite() {
        return if x > 0.0 { "Infinity" } else { "-Infinity" }.into();
    }
    if x == 0.0 {
        return if x.is_sign_negative() { "-0.0" } else { "0.0" }.into();
    }
    let a = x.abs();
    if (1e-3..1e7).contains(&a) {
        let s = format!("{x}");
        return if s.contains('.') { s } else { format!("{s}.0") };
    }
    // Rust's `{:e}` gives the shortest digits: "1.5e-5", "1e10".
    let s = format!("{x:e}");
    let (mantissa, exp) = s.split_once('e').unwrap_or((&s, "0"));
    let mantissa = if mantissa.contains('.') {
        mantissa.to_string()
    } else {
        format!("{mantissa}.0")
    };
    format!("{mantissa}E{exp}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn doubles_as_java_prints_them() {
        assert_eq!(java_double(1.0), "1.0");
        assert_eq!(java_double(1024.5), "1024.5");
        assert_eq!(java_double(1e7), "1.0E7");
        assert_eq!(java_double(1.5e-5), "1.5E-5");
        assert_eq!(java_double(0.001), "0.001");
    }

    #[test]
    fn strings_as_jackson_escapes_them() {
        let mut s = String::new();
        push_string(&mut s, "a\"b\\c\nd\u{1}é/");
        assert_eq!(s, "\"a\\\"b\\\\c\\nd\\u0001é/\"");
    }
}
