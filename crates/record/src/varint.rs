//! Zig-zag varints as Kafka's `ByteUtils` writes them (protobuf encoding).

use super::RecordError;

/// Appends a zig-zag varint (32-bit) to `buf`.
pub fn put_varint(buf: &mut Vec<u8>, value: i32) {
    put_varlong(buf, value as i64)
}

/// Appends a zig-zag varlong (64-bit) to `buf`.
pub fn put_varlong(buf: &mut Vec<u8>, value: i64) {
    let mut v = ((value << 1) ^ (value >> 63)) as u64;
    while v >= 0x80 {
        buf.push((v as u8) | 0x80);
        v >>= 7;
    }
    buf.push(v as u8);
}

/// Bytes a zig-zag varlong takes.
pub fn varlong_size(value: i64) -> usize {
    let v = ((value << 1) ^ (value >> 63)) as u64;
    let bits = 64 - (v | 1).leading_zeros() as usize;
    bits.div_ceil(7)
}

/// Bytes a zig-zag varint takes.
pub fn varint_size(value: i32) -> usize {
    varlong_size(value as i64)
}

/// Reads a zig-zag varint at `*pos`, advancing it.
#[inline]
pub fn get_varint(buf: &[u8], pos: &mut usize) -> Result<i32, RecordError> {
    let v = read_raw(buf, pos, 5)?;
    let decoded = ((v >> 1) as i64) ^ -((v & 1) as i64);
    i32::try_from(decoded).map_err(|_| out_of_range())
}

#[cold]
fn out_of_range() -> RecordError {
    RecordError::Corrupt("varint out of 32-bit range".into())
}

/// Reads a zig-zag varlong at `*pos`, advancing it.
#[inline]
pub fn get_varlong(buf: &[u8], pos: &mut usize) -> Result<i64, RecordError> {
    let v = read_raw(buf, pos, 10)?;
    Ok(((v >> 1) as i64) ^ -((v & 1) as i64))
}

/// A record's fields are mostly varints of one or two bytes (deltas,
/// attributes, the lengths of short keys, values and records): they take
/// the inlined paths; the rest the loop.
#[inline]
fn read_raw(buf: &[u8], pos: &mut usize, max_bytes: usize) -> Result<u64, RecordError> {
    match buf.get(*pos..*pos + 2) {
        Some(&[b0, _]) if b0 < 0x80 => {
            *pos += 1;
            return Ok(b0 as u64);
        }
        Some(&[b0, b1]) if b1 < 0x80 => {
            *pos += 2;
            return Ok((b0 & 0x7f) as u64 | (b1 as u64) << 7);
        }
        _ => {}
    }
    read_raw_long(buf, pos, max_bytes)
}

fn read_raw_long(buf: &[u8], pos: &mut usize, max_bytes: usize) -> Result<u64, RecordError> {
    let mut value: u64 = 0;
    for i in 0..max_bytes {
        let Some(&b) = buf.get(*pos) else {
            return Err(RecordError::Corrupt(
                "varint runs past the end of the record".into(),
            ));
        };
        *pos += 1;
        value |= ((b & 0x7f) as u64) << (7 * i);
        if b & 0x80 == 0 {
            return Ok(value);
        }
    }
    Err(RecordError::Corrupt(format!(
        "varint longer than {max_bytes} bytes"
    )))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn known_encodings() {
        // Values from Kafka's ByteUtilsTest.
        let cases: &[(i64, &[u8])] = &[
            (0, &[0x00]),
            (-1, &[0x01]),
            (1, &[0x02]),
            (63, &[0x7e]),
            (-64, &[0x7f]),
            (64, &[0x80, 0x01]),
            (-65, &[0x81, 0x01]),
            (i32::MAX as i64, &[0xfe, 0xff, 0xff, 0xff, 0x0f]),
            (i32::MIN as i64, &[0xff, 0xff, 0xff, 0xff, 0x0f]),
        ];
        for (v, bytes) in cases {
            let mut buf = Vec::new();
            put_varlong(&mut buf, *v);
            assert_eq!(&buf[..], *bytes, "encoding {v}");
            assert_eq!(varlong_size(*v), bytes.len());
            let mut pos = 0;
            assert_eq!(get_varlong(&buf, &mut pos).unwrap(), *v);
            assert_eq!(pos, bytes.len());
        }
    }

    #[test]
    fn truncated_and_overlong_are_errors() {
        let mut pos = 0;
        assert!(get_varint(&[0x80], &mut pos).is_err());
        let mut pos = 0;
        assert!(get_varint(&[0xff; 6], &mut pos).is_err());
        let mut pos = 0;
        // Fits in 5 bytes but not in an i32.
        assert!(get_varint(&[0xfe, 0xff, 0xff, 0xff, 0x7f], &mut pos).is_err());
    }

    proptest! {
        #[test]
        fn varlong_round_trip(v in any::<i64>()) {
            let mut buf = Vec::new();
            put_varlong(&mut buf, v);
            prop_assert_eq!(buf.len(), varlong_size(v));
            let mut pos = 0;
            prop_assert_eq!(get_varlong(&buf, &mut pos).unwrap(), v);
        }

        #[test]
        fn varint_round_trip(v in any::<i32>()) {
            let mut buf = Vec::new();
            put_varint(&mut buf, v);
            prop_assert_eq!(buf.len(), varint_size(v));
            let mut pos = 0;
            prop_assert_eq!(get_varint(&buf, &mut pos).unwrap(), v);
        }

        /// Values of one and two bytes, followed by more bytes or not (the
        /// inlined paths look at two bytes at once), and from an offset.
        #[test]
        fn short_varints_among_other_bytes(
            v in -9000i64..9000,
            before in proptest::collection::vec(any::<u8>(), 0..3),
            after in proptest::collection::vec(any::<u8>(), 0..3),
        ) {
            let mut buf = before.clone();
            put_varlong(&mut buf, v);
            let end = buf.len();
            buf.extend_from_slice(&after);
            let mut pos = before.len();
            prop_assert_eq!(get_varlong(&buf, &mut pos).unwrap(), v);
            prop_assert_eq!(pos, end);
        }
    }
}
