//! A Produce's bytes for one partition, framed and their batch headers
//! parsed once, where the request arrives: the listener reads the
//! transactional producers from them, storage validates and appends them
//! (`validate.rs`), and no layer below parses a header again.
//!
//! Parsing refuses nothing: what does not frame or parse is left for
//! validation to refuse, in Kafka's order, with Kafka's reason.

use super::RecordError;
use super::batch::{BatchHeader, peek_frame};
use super::validate::{ValidBatch, validate_parsed, validate_produced_batch};

/// One entry of a Produce's bytes, as framed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Framed {
    /// Where it starts in the bytes.
    pub pos: usize,
    /// Its size as sent: what its framing says, or what is left of the
    /// bytes where that is less.
    pub size: usize,
    /// Its header, when the batch is whole and the header parses.
    pub header: Option<BatchHeader>,
}

/// A Produce's batches for one partition, their headers parsed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ParsedBatches<'a> {
    bytes: &'a [u8],
    framed: Vec<Framed>,
    /// Where framing stopped short of the end of the bytes.
    stopped_at: Option<usize>,
}

impl<'a> ParsedBatches<'a> {
    /// Frames `bytes` (batches back to back) and parses each header.
    pub fn parse(bytes: &'a [u8]) -> Self {
        let mut framed = Vec::new();
        let mut pos = 0;
        while pos < bytes.len() {
            let Ok(frame) = peek_frame(&bytes[pos..]) else {
                return ParsedBatches {
                    bytes,
                    framed,
                    stopped_at: Some(pos),
                };
            };
            let size = frame.size.min(bytes.len() - pos);
            let header = BatchHeader::parse(&bytes[pos..pos + size])
                .ok()
                .filter(|h| h.size() == size);
            framed.push(Framed { pos, size, header });
            pos += size;
        }
        ParsedBatches {
            bytes,
            framed,
            stopped_at: None,
        }
    }

    /// The bytes as sent.
    pub fn bytes(&self) -> &'a [u8] {
        self.bytes
    }

    pub fn is_empty(&self) -> bool {
        self.bytes.is_empty()
    }

    /// The entries that frame, in order.
    pub fn framed(&self) -> &[Framed] {
        &self.framed
    }

    /// The bytes of entry `f`.
    pub fn bytes_of(&self, f: &Framed) -> &'a [u8] {
        &self.bytes[f.pos..f.pos + f.size]
    }

    /// Why the bytes stop framing after the entries, if they do.
    pub fn framing_error(&self) -> Option<RecordError> {
        let pos = self.stopped_at?;
        peek_frame(&self.bytes[pos..]).err()
    }

    /// The headers of the whole batches up to the first entry that is not
    /// one: what a walk with [`BatchIter`](crate::BatchIter) would see.
    pub fn headers(&self) -> impl Iterator<Item = &BatchHeader> {
        self.framed.iter().map_while(|f| f.header.as_ref())
    }

    /// The (producer id, epoch) of every transactional batch of
    /// [`ParsedBatches::headers`].
    pub fn transactional_producers(&self) -> impl Iterator<Item = (i64, i16)> + '_ {
        self.headers()
            .filter(|h| h.is_transactional())
            .map(|h| (h.producer_id, h.producer_epoch))
    }

    /// Kafka's checks of entry `f` ([`validate_produced_batch`]), on the
    /// header parsed here.
    pub fn validate(&self, f: &Framed) -> Result<ValidBatch, RecordError> {
        let bytes = self.bytes_of(f);
        match &f.header {
            Some(h) => validate_parsed(*h, bytes),
            // Refused: the whole check finds the reason, in Kafka's order.
            None => validate_produced_batch(bytes),
        }
    }
}

impl<'a, B: AsRef<[u8]> + ?Sized> From<&'a B> for ParsedBatches<'a> {
    fn from(bytes: &'a B) -> Self {
        ParsedBatches::parse(bytes.as_ref())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Compression, NewRecord, encode_batch_compressed};

    fn two_batches() -> Vec<u8> {
        let mut buf = Vec::new();
        encode_batch_compressed(
            &mut buf,
            0,
            1000,
            &[NewRecord::value(b"a")],
            Compression::None,
        );
        let recs = [NewRecord::value(b"b"), NewRecord::keyed(b"k", b"c")];
        encode_batch_compressed(&mut buf, 0, 2000, &recs, Compression::Lz4);
        buf
    }

    /// Validating from the parsed headers finds what the whole check
    /// finds, for whole batches and for every cut of them.
    #[test]
    fn validates_as_the_whole_check() {
        let buf = two_batches();
        for cut in 0..=buf.len() {
            let parsed = ParsedBatches::parse(&buf[..cut]);
            for f in parsed.framed() {
                assert_eq!(
                    parsed.validate(f),
                    validate_produced_batch(parsed.bytes_of(f)),
                    "cut {cut} at {}",
                    f.pos
                );
            }
        }
        let parsed = ParsedBatches::parse(&buf);
        let maxes: Vec<i64> = parsed.headers().map(|h| h.max_timestamp).collect();
        assert_eq!(maxes, [1000, 2000]);
        assert!(parsed.framing_error().is_none());
    }

    #[test]
    fn framing_stops_where_a_walk_does() {
        let mut buf = two_batches();
        let first = ParsedBatches::parse(&buf).framed()[1].pos;
        buf[first + 16] = 7; // magic
        let parsed = ParsedBatches::parse(&buf);
        assert_eq!(parsed.framed().len(), 1);
        assert!(matches!(
            parsed.framing_error(),
            Some(RecordError::Corrupt(_))
        ));
    }
}
