//! The protobuf wire format, read-only: tags, varints, fixed 64- and 32-bit
//! values and length-delimited bytes (protobuf's "encoding" guide). Groups
//! (wire types 3 and 4) are deprecated and never produced by Kubernetes'
//! generator, so they are malformed input here.

use std::fmt;

/// What went wrong reading the wire format.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WireError {
    /// The input ended inside a tag, varint or length-delimited value.
    Truncated,
    /// A varint longer than ten bytes.
    VarintTooLong,
    /// A wire type other than 0, 1, 2 or 5 (field number given).
    UnsupportedWireType(u32, u8),
    /// Field number 0, which protobuf forbids.
    ZeroFieldNumber,
}

impl fmt::Display for WireError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            WireError::Truncated => f.write_str("unexpected EOF"),
            WireError::VarintTooLong => f.write_str("proto: integer overflow"),
            WireError::UnsupportedWireType(field, wire) => {
                write!(f, "proto: wrong wireType = {wire} for field {field}")
            }
            WireError::ZeroFieldNumber => f.write_str("proto: illegal tag 0"),
        }
    }
}

impl std::error::Error for WireError {}

/// One field's value as it sits on the wire; its meaning (signed, bool,
/// string, nested message) comes from the schema.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WireValue<'a> {
    /// Wire type 0.
    Varint(u64),
    /// Wire type 1 (little-endian).
    Fixed64(u64),
    /// Wire type 2: bytes, a string, a nested message or a packed list.
    Bytes(&'a [u8]),
    /// Wire type 5 (little-endian).
    Fixed32(u32),
}

/// One field occurrence: its number and value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WireField<'a> {
    /// The field number from the tag.
    pub number: u32,
    /// The value.
    pub value: WireValue<'a>,
}

/// Reads the fields of one message in order. Repeated fields appear as
/// several occurrences; the caller decides what they mean.
#[derive(Debug, Clone)]
pub struct Reader<'a> {
    rest: &'a [u8],
}

impl<'a> Reader<'a> {
    /// A reader over the bytes of one message.
    pub fn new(bytes: &'a [u8]) -> Self {
        Reader { rest: bytes }
    }

    /// The next field, `None` at the end of the message.
    pub fn next_field(&mut self) -> Result<Option<WireField<'a>>, WireError> {
        if self.rest.is_empty() {
            return Ok(None);
        }
        let tag = self.varint()?;
        // Field numbers are at most 2^29 - 1, so the shift fits in u32.
        let number = u32::try_from(tag >> 3).map_err(|_| WireError::VarintTooLong)?;
        if number == 0 {
            return Err(WireError::ZeroFieldNumber);
        }
        let value = match (tag & 7) as u8 {
            0 => WireValue::Varint(self.varint()?),
            1 => WireValue::Fixed64(u64::from_le_bytes(self.array::<8>()?)),
            2 => {
                let len = usize::try_from(self.varint()?).map_err(|_| WireError::Truncated)?;
                WireValue::Bytes(self.take(len)?)
            }
            5 => WireValue::Fixed32(u32::from_le_bytes(self.array::<4>()?)),
            other => return Err(WireError::UnsupportedWireType(number, other)),
        };
        Ok(Some(WireField { number, value }))
    }

    /// A base-128 varint, least significant group first.
    pub fn varint(&mut self) -> Result<u64, WireError> {
        let mut value = 0u64;
        for (i, byte) in self.rest.iter().copied().enumerate() {
            if i == 10 {
                return Err(WireError::VarintTooLong);
            }
            value |= u64::from(byte & 0x7f) << (7 * i);
            if byte & 0x80 == 0 {
                self.rest = &self.rest[i + 1..];
                return Ok(value);
            }
        }
        Err(WireError::Truncated)
    }

    /// Is the whole input consumed?
    pub fn is_empty(&self) -> bool {
        self.rest.is_empty()
    }

    fn take(&mut self, len: usize) -> Result<&'a [u8], WireError> {
        if len > self.rest.len() {
            return Err(WireError::Truncated);
        }
        let (head, tail) = self.rest.split_at(len);
        self.rest = tail;
        Ok(head)
    }

    fn array<const N: usize>(&mut self) -> Result<[u8; N], WireError> {
        let bytes = self.take(N)?;
        let mut out = [0u8; N];
        out.copy_from_slice(bytes);
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_multi_byte_varint_reads_least_significant_group_first() {
        let mut r = Reader::new(&[0xac, 0x02]);
        assert_eq!(r.varint(), Ok(300));
        assert!(r.is_empty());
    }

    #[test]
    fn each_wire_type_reads_its_value() {
        let bytes = [
            0x08, 0x96, 0x01, // 1: varint 150
            0x11, 1, 0, 0, 0, 0, 0, 0, 0, // 2: fixed64 1
            0x1a, 0x02, b'h', b'i', // 3: bytes "hi"
            0x25, 2, 0, 0, 0, // 4: fixed32 2
        ];
        let mut r = Reader::new(&bytes);
        let mut got = Vec::new();
        while let Some(field) = r.next_field().expect("well-formed") {
            got.push(field);
        }
        assert_eq!(
            got,
            vec![
                WireField {
                    number: 1,
                    value: WireValue::Varint(150)
                },
                WireField {
                    number: 2,
                    value: WireValue::Fixed64(1)
                },
                WireField {
                    number: 3,
                    value: WireValue::Bytes(b"hi")
                },
                WireField {
                    number: 4,
                    value: WireValue::Fixed32(2)
                },
            ]
        );
    }

    #[test]
    fn a_length_past_the_end_is_truncated_input() {
        let mut r = Reader::new(&[0x0a, 0x05, b'a']);
        assert_eq!(r.next_field(), Err(WireError::Truncated));
    }

    #[test]
    fn a_varint_without_an_end_is_truncated_input() {
        let mut r = Reader::new(&[0x08, 0x80]);
        assert_eq!(r.next_field(), Err(WireError::Truncated));
    }

    #[test]
    fn an_eleven_byte_varint_is_refused() {
        let mut r = Reader::new(&[0xff; 11]);
        assert_eq!(r.varint(), Err(WireError::VarintTooLong));
    }

    #[test]
    fn group_wire_types_are_refused() {
        let mut r = Reader::new(&[0x0b]);
        assert_eq!(r.next_field(), Err(WireError::UnsupportedWireType(1, 3)));
    }

    #[test]
    fn field_number_zero_is_refused() {
        let mut r = Reader::new(&[0x00, 0x01]);
        assert_eq!(r.next_field(), Err(WireError::ZeroFieldNumber));
    }
}
