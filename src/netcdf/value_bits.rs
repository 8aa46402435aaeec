//! How many of an HDF5 number's bits hold its value. An HDF5 integer type may keep its value
//! in `precision` bits from bit `offset` of a larger element (h5py makes one with
//! `set_precision`/`set_offset`; the n-bit filter packs such types). HDF5 converts such an
//! element to a native integer for its readers: shifted down, the other bits dropped and a
//! signed value sign-extended. So h5py reads -1 where the element's 16 bits say 16380.
//!
//! hdf5-reader parses the precision and discards it, so it is read here from the datatype
//! message as stored (`Dataset::raw_datatype`). An integer, enum or bitfield type alone is
//! widened by a codec (`hdf5_codecs.rs`, `VALUE_BITS`); a float, or a number inside a
//! compound, array or vlen type, that does not use all its bits is an error: ndfusion does
//! not read it yet, and reading the stored bits would give wrong values silently.

/// Where an HDF5 integer type keeps its value: `precision` bits from bit `offset` of
/// elements of `bytes` bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct ValueBits {
    pub bytes: u32,
    pub precision: u32,
    pub offset: u32,
    pub signed: bool,
    pub big_endian: bool,
}

/// The value bits of the type whose datatype message is `raw`: `None` when every number in
/// it uses all its bits (nearly every file), those of an integer, enum or bitfield type that
/// does not, and an error for any other type with a number that does not.
pub(crate) fn value_bits(raw: &[u8]) -> Result<Option<ValueBits>, String> {
    let mut message = Message { raw, at: 0 };
    let found = message.datatype(0)?;
    match found {
        Some(Found::Integer(bits)) => Ok(Some(bits)),
        Some(Found::Other(what)) => Err(what),
        None => Ok(None),
    }
}

/// A number that does not use all its bits.
enum Found {
    /// An integer type on its own, which the codec widens.
    Integer(ValueBits),
    /// Anything else, said as the error says it.
    Other(String),
}

/// Nesting deeper than this is refused (as hdf5-reader refuses it).
const MAX_DEPTH: usize = 32;

/// A datatype message being read.
struct Message<'a> {
    raw: &'a [u8],
    at: usize,
}

impl Message<'_> {
    fn take(&mut self, n: usize) -> Result<&[u8], String> {
        let end = self.at.checked_add(n).filter(|&end| end <= self.raw.len());
        let end = end.ok_or("its datatype message ends early")?;
        let bytes = &self.raw[self.at..end];
        self.at = end;
        Ok(bytes)
    }

    fn u8(&mut self) -> Result<u8, String> {
        Ok(self.take(1)?[0])
    }

    fn u16(&mut self) -> Result<u16, String> {
        Ok(u16::from_le_bytes(
            self.take(2)?.try_into().expect("2 bytes"),
        ))
    }

    fn u32(&mut self) -> Result<u32, String> {
        Ok(u32::from_le_bytes(
            self.take(4)?.try_into().expect("4 bytes"),
        ))
    }

    /// A NUL-terminated name, padded to a multiple of 8 bytes from its start when `padded`.
    fn name(&mut self, padded: bool) -> Result<(), String> {
        let rest = &self.raw[self.at..];
        let len = rest
            .iter()
            .position(|&b| b == 0)
            .ok_or("a name without its end")?
            + 1;
        self.take(if padded { len.next_multiple_of(8) } else { len })?;
        Ok(())
    }

    /// The number that does not use all its bits in the datatype description here, if any.
    fn datatype(&mut self, depth: usize) -> Result<Option<Found>, String> {
        if depth > MAX_DEPTH {
            return Err(format!("its type nests deeper than {MAX_DEPTH} levels"));
        }
        let head = self.u32()?;
        let (class, version, flags) = (head & 0x0f, (head >> 4) & 0x0f, head >> 8);
        let size = self.u32()?;
        let reduced = |offset: u16, precision: u16| {
            u64::from(offset) != 0 || u64::from(precision) != u64::from(size) * 8
        };
        Ok(match class {
            // Fixed-point and bitfield: bit offset and precision.
            0 | 4 => {
                let (offset, precision) = (self.u16()?, self.u16()?);
                reduced(offset, precision).then_some(Found::Integer(ValueBits {
                    bytes: size,
                    precision: u32::from(precision),
                    offset: u32::from(offset),
                    signed: class == 0 && flags & 0x08 != 0,
                    big_endian: flags & 0x01 != 0,
                }))
            }
            // Floating-point: offset and precision, then the layout of its fields.
            1 => {
                let (offset, precision) = (self.u16()?, self.u16()?);
                self.take(8)?;
                reduced(offset, precision).then(|| {
                    Found::Other(format!(
                        "its floats keep their value in {precision} of {} bits (from bit \
                         {offset}), which ndfusion does not read",
                        u64::from(size) * 8
                    ))
                })
            }
            // Time: a precision, and nothing ndfusion reads.
            2 => {
                self.u16()?;
                None
            }
            3 | 7 => None,
            // Opaque: a tag of the length the flags give, padded to 8 bytes.
            5 => {
                self.take(((flags & 0xff) as usize).next_multiple_of(8))?;
                None
            }
            6 => {
                let offset_bytes = match size {
                    0..=0xff => 1,
                    0x100..=0xffff => 2,
                    0x1_0000..=0xff_ffff => 3,
                    _ => 4,
                };
                let mut found = None;
                for _ in 0..(flags & 0xffff) {
                    self.name(version < 3)?;
                    self.take(if version >= 3 { offset_bytes } else { 4 })?;
                    if version == 1 {
                        // Dimensionality, reserved, permutation, reserved, 4 sizes.
                        self.take(28)?;
                    }
                    found = found.or(self.datatype(depth + 1)?);
                }
                found.map(|_| inside("compound"))
            }
            8 => {
                let base = self.datatype(depth + 1)?;
                let members = (flags & 0xffff) as usize;
                for _ in 0..members {
                    self.name(version < 3)?;
                }
                // One value of the enum's size per member.
                self.take(
                    members
                        .checked_mul(size as usize)
                        .ok_or("an enum too large")?,
                )?;
                base
            }
            9 => self.datatype(depth + 1)?.map(|_| inside("vlen")),
            10 => {
                let rank = usize::from(self.u8()?);
                if version < 3 {
                    self.take(3)?;
                }
                // Sizes, and before version 3 a permutation, of u32 each.
                self.take(rank * 4 * if version < 3 { 2 } else { 1 })?;
                self.datatype(depth + 1)?.map(|_| inside("array"))
            }
            other => {
                return Err(format!(
                    "its type is of HDF5 class {other}, which has no meaning"
                ))
            }
        })
    }
}

fn inside(what: &str) -> Found {
    Found::Other(format!(
        "its {what} type holds a number that keeps its value in fewer bits than its size, \
         which ndfusion does not read"
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An integer's datatype message: `size` bytes, value in `precision` bits at `offset`.
    fn integer(size: u32, signed: bool, offset: u16, precision: u16) -> Vec<u8> {
        // Version 1, class 0; bit 3 of the flags: signed.
        let mut raw = vec![0x10, if signed { 0x08 } else { 0 }, 0, 0];
        raw.extend(size.to_le_bytes());
        raw.extend(offset.to_le_bytes());
        raw.extend(precision.to_le_bytes());
        raw
    }

    /// A version 3 compound of one member named "a" at offset 0.
    fn compound_of(member: &[u8], size: u32) -> Vec<u8> {
        let mut raw = vec![0x36, 1, 0, 0];
        raw.extend(size.to_le_bytes());
        raw.extend(b"a\0");
        raw.push(0); // offset, one byte
        raw.extend(member);
        raw
    }

    #[test]
    fn integers_that_use_fewer_bits_are_found_and_others_are_not() {
        assert_eq!(value_bits(&integer(2, true, 0, 16)).unwrap(), None);
        let bits = value_bits(&integer(2, true, 2, 12)).unwrap().unwrap();
        assert_eq!((bits.bytes, bits.precision, bits.offset), (2, 12, 2));
        assert!(bits.signed && !bits.big_endian);
        assert_eq!(
            value_bits(&compound_of(&integer(4, false, 0, 32), 4)).unwrap(),
            None
        );
    }

    #[test]
    fn reduced_numbers_inside_other_types_and_bad_messages_are_errors() {
        // A float32 of 24 value bits (class 1: offset, precision, then 8 bytes of layout).
        let mut float = vec![0x11, 0, 0, 0, 4, 0, 0, 0, 0, 0, 24, 0];
        float.extend([0; 8]);
        assert!(value_bits(&float).unwrap_err().contains("24 of 32 bits"));
        float[10] = 32;
        assert_eq!(value_bits(&float).unwrap(), None);
        let err = value_bits(&compound_of(&integer(2, true, 0, 12), 2)).unwrap_err();
        assert!(err.contains("compound"), "{err}");
        assert!(value_bits(&integer(2, true, 0, 12)[..10]).is_err());
        // A class with no meaning, and nesting without end (each a vlen of the next).
        assert!(value_bits(&[0x1b, 0, 0, 0, 0, 0, 0, 0]).is_err());
        let vlens: Vec<u8> = (0..40).flat_map(|_| [0x19, 0, 0, 0, 16, 0, 0, 0]).collect();
        assert!(value_bits(&vlens).unwrap_err().contains("deeper"));
    }
}
