//! Framing: a request is a 4-byte big-endian size, then that many bytes.
//! The size is checked against `socket.request.max.bytes` before anything
//! is buffered (the server then takes it from the memory pool and reads
//! the bytes into a buffer whose pages are touched only as bytes arrive, so
//! a client that claims 100 MB and sends nothing holds no 100 MB).

use crate::error::Refusal;

/// The size a request's prefix announces, if it is one the listener reads.
pub fn frame_size(prefix: [u8; 4], max: usize) -> Result<usize, Refusal> {
    let size = i32::from_be_bytes(prefix);
    if size < 0 {
        return Err(Refusal::NegativeSize(size));
    }
    if size as usize > max {
        return Err(Refusal::FrameTooLarge {
            size: size as i64,
            max,
        });
    }
    Ok(size as usize)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes() {
        assert_eq!(frame_size([0, 0, 0, 2], 10).unwrap(), 2);
        assert_eq!(frame_size([0, 0, 0, 0], 10).unwrap(), 0);
        assert!(matches!(
            frame_size([0, 0, 0, 11], 10),
            Err(Refusal::FrameTooLarge { size: 11, .. })
        ));
        assert!(matches!(
            frame_size([0xff, 0xff, 0xff, 0xff], 10),
            Err(Refusal::NegativeSize(-1))
        ));
    }
}
