//! Reads and writes messages as Kafka's generated `read(Readable, version)`
//! and `write(Writable, cache, version)` do:
//! - big-endian integers, IEEE doubles, 16-byte UUIDs;
//! - before the flexible versions: int16-length strings, int32-length bytes
//!   and arrays, -1 for null;
//! - in flexible versions: unsigned-varint length + 1 (0 for null), and a
//!   tagged-field section closing every struct (count, then tag, size, data
//!   per field, tags ascending; a tagged field is written only when it is
//!   not its default);
//! - a nullable struct field is preceded by an int8: -1 null, 1 present.

use super::{Field, Message, SchemaError, Struct, StructValue, Type, Value, default_value};

/// Decodes `buf` as `msg` at `version`. Returns the value and the bytes read
/// (the caller decides whether trailing bytes are an error).
pub fn decode(
    msg: &Message,
    version: i16,
    buf: &[u8],
) -> Result<(StructValue, usize), SchemaError> {
    if !msg.valid.contains(version) {
        return Err(SchemaError(format!(
            "Can't read version {version} of {}",
            msg.name
        )));
    }
    let mut r = Reader { buf, pos: 0 };
    let v = r.read_struct(&msg.body, version, msg.flexible.contains(version))?;
    Ok((v, r.pos))
}

/// Appends `value` encoded as `msg` at `version` to `out`.
pub fn encode(
    msg: &Message,
    version: i16,
    value: &StructValue,
    out: &mut Vec<u8>,
) -> Result<(), SchemaError> {
    if !msg.valid.contains(version) {
        return Err(SchemaError(format!(
            "Can't write version {version} of {}",
            msg.name
        )));
    }
    write_struct(
        &msg.body,
        version,
        msg.flexible.contains(version),
        value,
        out,
    )
}

struct Reader<'a> {
    buf: &'a [u8],
    pos: usize,
}

/// What a `BufferUnderflowException` gives as its message.
fn underflow() -> SchemaError {
    SchemaError("null".into())
}

impl Reader<'_> {
    fn remaining(&self) -> usize {
        self.buf.len() - self.pos
    }

    fn take(&mut self, n: usize) -> Result<&[u8], SchemaError> {
        if self.remaining() < n {
            return Err(underflow());
        }
        let s = &self.buf[self.pos..self.pos + n];
        self.pos += n;
        Ok(s)
    }

    fn fixed<const N: usize>(&mut self) -> Result<[u8; N], SchemaError> {
        Ok(self.take(N)?.try_into().expect("length checked"))
    }

    /// `ByteBufferAccessor.readArray`.
    fn array(&mut self, n: usize) -> Result<&[u8], SchemaError> {
        if self.remaining() < n {
            return Err(SchemaError(format!(
                "Error reading byte array of {n} byte(s): only {} byte(s) available",
                self.remaining()
            )));
        }
        self.take(n)
    }

    pub(super) fn uvarint(&mut self) -> Result<u32, SchemaError> {
        let mut value: u32 = 0;
        for i in 0..5 {
            let b = self.fixed::<1>()?[0];
            value |= ((b & 0x7f) as u32) << (7 * i);
            if b & 0x80 == 0 {
                return Ok(value);
            }
        }
        Err(SchemaError(format!(
            "Varint is too long, the most significant bit in the 5th byte is set, converted value: {value:x}"
        )))
    }

    /// A length prefix: int16/int32 before the flexible versions, varint + 1 in them.
    fn length(&mut self, flexible: bool, wide: bool) -> Result<i64, SchemaError> {
        Ok(if flexible {
            self.uvarint()? as i64 - 1
        } else if wide {
            i32::from_be_bytes(self.fixed()?) as i64
        } else {
            i16::from_be_bytes(self.fixed()?) as i64
        })
    }

    fn read_struct(
        &mut self,
        s: &Struct,
        version: i16,
        flexible: bool,
    ) -> Result<StructValue, SchemaError> {
        let mut fields = Vec::with_capacity(s.fields.len());
        for field in s.fields {
            if !field.versions.contains(version) || field.tagged_in(version) {
                fields.push(default_value(field));
            } else {
                fields.push(self.read_field(field, version, flexible)?);
            }
        }
        let mut unknown_tagged = Vec::new();
        if flexible {
            let count = self.uvarint()?;
            for _ in 0..count {
                let tag = self.uvarint()?;
                let size = self.uvarint()? as usize;
                let data = self.array(size)?;
                let known = s.fields.iter().position(|f| {
                    f.versions.contains(version)
                        && matches!(f.tag, Some((t, tv)) if t == tag && tv.contains(version))
                });
                match known {
                    Some(i) => {
                        let mut sub = Reader { buf: data, pos: 0 };
                        fields[i] = sub.read_field(&s.fields[i], version, true)?;
                    }
                    None => unknown_tagged.push((tag, data.to_vec())),
                }
            }
        }
        Ok(StructValue {
            fields,
            unknown_tagged,
        })
    }

    fn read_field(
        &mut self,
        field: &Field,
        version: i16,
        flexible: bool,
    ) -> Result<Value, SchemaError> {
        let nullable = field.nullable.contains(version);
        if let Type::Struct(s) = field.ty {
            if nullable && self.fixed::<1>()?[0] as i8 == -1 {
                return Ok(Value::Struct(None));
            }
            return Ok(Value::Struct(Some(self.read_struct(s, version, flexible)?)));
        }
        self.read_value(&field.ty, field.name, nullable, version, flexible)
    }

    fn read_value(
        &mut self,
        ty: &Type,
        name: &str,
        nullable: bool,
        version: i16,
        flexible: bool,
    ) -> Result<Value, SchemaError> {
        let null = || SchemaError(format!("non-nullable field {name} was serialized as null"));
        Ok(match ty {
            Type::Bool => Value::Bool(self.fixed::<1>()?[0] != 0),
            Type::Int8 => Value::Int(self.fixed::<1>()?[0] as i8 as i64),
            Type::Int16 => Value::Int(i16::from_be_bytes(self.fixed()?) as i64),
            Type::Uint16 => Value::Int(u16::from_be_bytes(self.fixed()?) as i64),
            Type::Int32 => Value::Int(i32::from_be_bytes(self.fixed()?) as i64),
            Type::Uint32 => Value::Int(u32::from_be_bytes(self.fixed()?) as i64),
            Type::Int64 => Value::Int(i64::from_be_bytes(self.fixed()?)),
            Type::Float64 => Value::Float(f64::from_be_bytes(self.fixed()?)),
            Type::Uuid => Value::Uuid(self.fixed()?),
            Type::String => match self.length(flexible, false)? {
                n if n < 0 && nullable => Value::Str(None),
                n if n < 0 => return Err(null()),
                n if n > 0x7fff => {
                    return Err(SchemaError(format!(
                        "string field {name} had invalid length {n}"
                    )));
                }
                n => Value::Str(Some(
                    String::from_utf8_lossy(self.array(n as usize)?).into_owned(),
                )),
            },
            Type::Bytes => match self.length(flexible, true)? {
                n if n < 0 && nullable => Value::Bytes(None),
                n if n < 0 => return Err(null()),
                n => Value::Bytes(Some(self.array(n as usize)?.to_vec())),
            },
            Type::Array(elem) => match self.length(flexible, true)? {
                n if n < 0 && nullable => Value::Array(None),
                n if n < 0 => return Err(null()),
                n if n as usize > self.remaining() => {
                    return Err(SchemaError(format!(
                        "Tried to allocate a collection of size {n}, but there are only {} bytes remaining.",
                        self.remaining()
                    )));
                }
                n => {
                    let mut items = Vec::with_capacity(n as usize);
                    for _ in 0..n {
                        items.push(match elem {
                            Type::Struct(s) => {
                                Value::Struct(Some(self.read_struct(s, version, flexible)?))
                            }
                            t => self.read_value(t, name, false, version, flexible)?,
                        });
                    }
                    Value::Array(Some(items))
                }
            },
            Type::Struct(s) => Value::Struct(Some(self.read_struct(s, version, flexible)?)),
        })
    }
}

/// Appends an unsigned varint (Kafka's `writeUnsignedVarint`).
pub fn put_uvarint(out: &mut Vec<u8>, mut v: u32) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

fn put_length(
    out: &mut Vec<u8>,
    len: Option<usize>,
    flexible: bool,
    wide: bool,
) -> Result<(), SchemaError> {
    match (flexible, len) {
        (true, None) => put_uvarint(out, 0),
        (true, Some(n)) => put_uvarint(out, u32::try_from(n + 1).map_err(|_| too_long(n))?),
        (false, None) if wide => out.extend_from_slice(&(-1i32).to_be_bytes()),
        (false, None) => out.extend_from_slice(&(-1i16).to_be_bytes()),
        (false, Some(n)) if wide => {
            out.extend_from_slice(&i32::try_from(n).map_err(|_| too_long(n))?.to_be_bytes())
        }
        (false, Some(n)) => {
            out.extend_from_slice(&i16::try_from(n).map_err(|_| too_long(n))?.to_be_bytes())
        }
    }
    Ok(())
}

fn too_long(n: usize) -> SchemaError {
    SchemaError(format!("length {n} does not fit its prefix"))
}

fn write_struct(
    s: &Struct,
    version: i16,
    flexible: bool,
    value: &StructValue,
    out: &mut Vec<u8>,
) -> Result<(), SchemaError> {
    if value.fields.len() != s.fields.len() {
        return Err(SchemaError(format!(
            "{} has {} fields, the value {}",
            s.name,
            s.fields.len(),
            value.fields.len()
        )));
    }
    let mut tagged: Vec<(u32, Vec<u8>)> = Vec::new();
    for (field, v) in s.fields.iter().zip(&value.fields) {
        if !field.versions.contains(version) {
            continue;
        }
        match field.tag {
            Some((tag, tv)) if tv.contains(version) => {
                if *v != default_value(field) {
                    let mut data = Vec::new();
                    write_field(field, version, true, v, &mut data)?;
                    tagged.push((tag, data));
                }
            }
            _ => write_field(field, version, flexible, v, out)?,
        }
    }
    if flexible {
        tagged.extend(value.unknown_tagged.iter().cloned());
        tagged.sort_by_key(|(t, _)| *t);
        put_uvarint(out, tagged.len() as u32);
        for (tag, data) in tagged {
            put_uvarint(out, tag);
            put_uvarint(out, data.len() as u32);
            out.extend_from_slice(&data);
        }
    }
    Ok(())
}

fn write_field(
    field: &Field,
    version: i16,
    flexible: bool,
    v: &Value,
    out: &mut Vec<u8>,
) -> Result<(), SchemaError> {
    let nullable = field.nullable.contains(version);
    if let (Type::Struct(s), Value::Struct(sv)) = (field.ty, v) {
        return match sv {
            None if nullable => {
                out.push(-1i8 as u8);
                Ok(())
            }
            None => Err(not_null(field.name)),
            Some(sv) => {
                if nullable {
                    out.push(1);
                }
                write_struct(s, version, flexible, sv, out)
            }
        };
    }
    write_value(&field.ty, field.name, nullable, version, flexible, v, out)
}

fn not_null(name: &str) -> SchemaError {
    SchemaError(format!("non-nullable field {name} was set to null"))
}

fn write_value(
    ty: &Type,
    name: &str,
    nullable: bool,
    version: i16,
    flexible: bool,
    v: &Value,
    out: &mut Vec<u8>,
) -> Result<(), SchemaError> {
    let mismatch = || {
        SchemaError(format!(
            "field {name}: value {v:?} does not match type {ty:?}"
        ))
    };
    match (ty, v) {
        (Type::Bool, Value::Bool(b)) => out.push(*b as u8),
        (Type::Int8, Value::Int(i)) => out.push(*i as i8 as u8),
        (Type::Int16, Value::Int(i)) => out.extend_from_slice(&(*i as i16).to_be_bytes()),
        (Type::Uint16, Value::Int(i)) => out.extend_from_slice(&(*i as u16).to_be_bytes()),
        (Type::Int32, Value::Int(i)) => out.extend_from_slice(&(*i as i32).to_be_bytes()),
        (Type::Uint32, Value::Int(i)) => out.extend_from_slice(&(*i as u32).to_be_bytes()),
        (Type::Int64, Value::Int(i)) => out.extend_from_slice(&i.to_be_bytes()),
        (Type::Float64, Value::Float(x)) => out.extend_from_slice(&x.to_be_bytes()),
        (Type::Uuid, Value::Uuid(u)) => out.extend_from_slice(u),
        (Type::String, Value::Str(s)) => {
            if s.is_none() && !nullable {
                return Err(not_null(name));
            }
            put_length(out, s.as_ref().map(|s| s.len()), flexible, false)?;
            out.extend_from_slice(s.as_deref().unwrap_or("").as_bytes());
        }
        (Type::Bytes, Value::Bytes(b)) => {
            if b.is_none() && !nullable {
                return Err(not_null(name));
            }
            put_length(out, b.as_ref().map(|b| b.len()), flexible, true)?;
            out.extend_from_slice(b.as_deref().unwrap_or(&[]));
        }
        (Type::Array(elem), Value::Array(items)) => {
            if items.is_none() && !nullable {
                return Err(not_null(name));
            }
            put_length(out, items.as_ref().map(|i| i.len()), flexible, true)?;
            for item in items.iter().flatten() {
                match (elem, item) {
                    (Type::Struct(s), Value::Struct(Some(sv))) => {
                        write_struct(s, version, flexible, sv, out)?
                    }
                    (Type::Struct(_), _) => return Err(mismatch()),
                    (t, item) => write_value(t, name, false, version, flexible, item, out)?,
                }
            }
        }
        (Type::Struct(s), Value::Struct(Some(sv))) => write_struct(s, version, flexible, sv, out)?,
        _ => return Err(mismatch()),
    }
    Ok(())
}

/// Reads an unsigned varint at the start of `buf` (Kafka's `readUnsignedVarint`).
pub fn read_uvarint(buf: &[u8]) -> Result<(u32, usize), SchemaError> {
    let mut r = Reader { buf, pos: 0 };
    let v = r.uvarint()?;
    Ok((v, r.pos))
}

/// Kafka's `AbstractApiMessageSerde.read`, the framing of `__cluster_metadata`
/// and `__remote_log_metadata` values: an unsigned-varint frame version (1),
/// record type and version, then the record, which must end the buffer.
/// `schema` finds the record type's message. Errors are worded as Kafka's.
pub(crate) fn read_framed(
    buf: &[u8],
    schema: fn(i16) -> Option<&'static Message>,
) -> Result<(&'static Message, i16, StructValue), String> {
    let mut pos = 0;
    let mut varint = |entity: &str| -> Result<i16, String> {
        let (v, n) =
            read_uvarint(&buf[pos..]).map_err(|_| format!("Error while reading {entity}"))?;
        pos += n;
        i16::try_from(v).map_err(|_| format!("Value for {entity} was too large."))
    };
    let frame = varint("frame version")?;
    if frame == 0 {
        return Err(
            "Could not deserialize metadata record with frame version 0. Note that upgrades \
                    from the preview release of KRaft in 2.8 to newer versions are not supported."
                .into(),
        );
    } else if frame != 1 {
        return Err(format!(
            "Could not deserialize metadata record due to unknown frame version {frame}(only frame version 1 is supported)"
        ));
    }
    let record_type = varint("type")?;
    let version = varint("version")?;
    let msg = schema(record_type).ok_or_else(|| {
        format!(
            "org.apache.kafka.common.errors.UnsupportedVersionException: Unknown metadata id {record_type}"
        )
    })?;
    let (v, used) = decode(msg, version, &buf[pos..])
        .map_err(|_| format!("Failed to deserialize record with type {record_type}"))?;
    let garbage = buf.len() - pos - used;
    if garbage > 0 {
        return Err(format!(
            "Found {garbage} byte(s) of garbage after {record_type}"
        ));
    }
    Ok((msg, version, v))
}
