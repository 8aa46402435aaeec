//! HDF5 filters no Zarr codec decodes, as Zarr codecs of ndfusion's, which the netCDF-4
//! layout names for a variable stored with them (`nc4.rs`). Only decoding is offered, bounded
//! like the other codecs (`zarr/read/bounded_codecs.rs`): the size a stream says it holds
//! must be the size zarrs expects, checked before anything is allocated.
//!
//! - `ndfusion.hdf5_lz4`: HDF5's lz4 filter (registered id 32004). Its stream is not any
//!   Zarr lz4 codec's: a 12-byte header (the decoded size as a big-endian u64, the block size
//!   as a big-endian u32), then per block a big-endian u32 of its stored size and its bytes —
//!   an lz4 block, or the block as it is when lz4 could not shrink it (stored size equal to
//!   the block's decoded size); each block decodes into its own slice of the output.
//! - `ndfusion.hdf5_szip`: HDF5's szip filter (id 4, CCSDS 121.0-B extended-Rice coding, as
//!   libaec writes it; NASA's HDF-EOS archives use it), configured with the filter's
//!   `client_data` (options, pixels per block, bits per pixel, pixels per scanline), decoded
//!   by hdf5-reader's pure-Rust decoder. HDF5 adds szip as an optional filter and stores a
//!   chunk it fails on without it (`skipped.rs`): such a chunk reaches the codec as
//!   [`SZIP_STORED`] and its bytes, a header no szip stream has (it would say the chunk
//!   decodes to 4 GiB - 1 bytes, more than a chunk may).
//! - `ndfusion.hdf5_nbit` and `ndfusion.hdf5_scaleoffset`: HDF5's n-bit (id 5) and
//!   scale-offset (id 6) filters, configured with the filter's `client_data` (which HDF5
//!   fills in when it creates the dataset: the type's size, order, precision and offset; the
//!   scale and minimum bits), decoded by hdf5-reader. n-bit leaves an element's value bits
//!   where its type puts them (`precision` bits at `offset`) and the other bits zero; HDF5
//!   hands readers whole integers, so the codec shifts them down and sign-extends a signed
//!   type's (`signed`), as HDF5's conversion to a native integer does.
//! - `ndfusion.hdf5_value_bits`: not a filter — an HDF5 integer type may keep its value in
//!   fewer bits than its size (`value_bits.rs`); without n-bit, its elements are stored
//!   whole and this codec, right after `bytes`, shifts them down and sign-extends them as
//!   the n-bit codec does.
//! - `ndfusion.hdf5_repack`: not a filter — HDF5 compound types may leave bytes unused
//!   between members (a C struct's alignment) or order members apart from their offsets;
//!   the Zarr element is packed in member order (`hdf5/dataset.rs`), so this codec, right
//!   after `bytes`, copies each stored element's `keep` ranges one after another.

use std::any::Any;
use std::borrow::Cow;
use std::sync::{Arc, Once};

use serde_json::Value;
use zarrs::array::codec::api::{
    register_codec_v3, ArrayBytesRaw, BytesRepresentation, BytesToBytesCodecTraits, Codec,
    CodecError, CodecMetadataOptions, CodecOptions, CodecRuntimePluginV3, CodecTraits,
    PartialDecoderCapability, PartialEncoderCapability, RecommendedConcurrency,
};
use zarrs::metadata::Configuration;
use zarrs::plugin::{ExtensionName, ZarrVersion};

use super::value_bits::ValueBits;

/// The codecs' names in the Zarr v3 documents ndfusion makes for netCDF-4 files.
pub(crate) const LZ4: &str = "ndfusion.hdf5_lz4";
pub(crate) const SZIP: &str = "ndfusion.hdf5_szip";
pub(crate) const NBIT: &str = "ndfusion.hdf5_nbit";
pub(crate) const SCALEOFFSET: &str = "ndfusion.hdf5_scaleoffset";

pub(crate) const REPACK: &str = "ndfusion.hdf5_repack";
pub(crate) const VALUE_BITS: &str = "ndfusion.hdf5_value_bits";

/// The header of a chunk HDF5 stored with szip skipped, before its bytes (`skipped.rs`).
pub(crate) const SZIP_STORED: [u8; 4] = [0xff; 4];

/// Registers the codecs with zarrs, once per process (before a netCDF-4 table is built).
pub(crate) fn register() {
    static REGISTERED: Once = Once::new();
    REGISTERED.call_once(|| {
        // The handle is dropped: the codecs stay registered for the process.
        let _ = register_codec_v3(CodecRuntimePluginV3::new(
            |name: &str| [LZ4, SZIP, NBIT, SCALEOFFSET, REPACK, VALUE_BITS].contains(&name),
            |metadata| {
                let filter = match metadata.name() {
                    LZ4 => Hdf5Filter::Lz4,
                    VALUE_BITS => {
                        let config = metadata.configuration().cloned().unwrap_or_default();
                        let number = |key: &str| {
                            let n = config.get(key).and_then(|v| v.as_u64());
                            n.and_then(|n| u32::try_from(n).ok())
                        };
                        let flag = |key: &str| config.get(key).and_then(|v| v.as_bool());
                        let bits = (|| {
                            Some(ValueBits {
                                bytes: number("bytes")?,
                                precision: number("precision")?,
                                offset: number("offset")?,
                                signed: flag("signed")?,
                                big_endian: flag("big_endian")?,
                            })
                        })();
                        let bits = bits.ok_or_else(|| {
                            zarrs::plugin::PluginCreateError::from(format!(
                                "{VALUE_BITS} needs configuration.bytes, precision, offset, \
                                 signed and big_endian"
                            ))
                        })?;
                        Hdf5Filter::ValueBits(bits)
                    }
                    REPACK => {
                        let config = metadata.configuration().cloned().unwrap_or_default();
                        let element = config.get("element_bytes").and_then(|v| v.as_u64());
                        let keep = (config.get("keep")).and_then(|v| {
                            serde_json::from_value::<Vec<(u64, u64)>>(v.clone()).ok()
                        });
                        let (Some(element), Some(keep)) = (element, keep) else {
                            return Err(zarrs::plugin::PluginCreateError::from(format!(
                                "{REPACK} needs configuration.element_bytes and keep"
                            )));
                        };
                        let packed =
                            (keep.iter()).try_fold(0u64, |n, &(_, len)| n.checked_add(len));
                        let outside = |&(at, len): &(u64, u64)| {
                            at.checked_add(len).is_none_or(|end| end > element)
                        };
                        let packed = packed.filter(|&p| p > 0 && p <= element).unwrap_or(0);
                        if element == 0 || packed == 0 || keep.iter().any(outside) {
                            return Err(zarrs::plugin::PluginCreateError::from(format!(
                                "{REPACK}: ranges {keep:?} do not fit an element of {element} bytes"
                            )));
                        }
                        Hdf5Filter::Repack {
                            element,
                            keep,
                            packed,
                        }
                    }
                    name => {
                        let config = metadata.configuration().cloned().unwrap_or_default();
                        let client_data = (config.get("client_data"))
                            .and_then(|v| serde_json::from_value::<Vec<u32>>(v.clone()).ok())
                            .ok_or_else(|| {
                                zarrs::plugin::PluginCreateError::from(format!(
                                    "{name} needs configuration.client_data"
                                ))
                            })?;
                        match name {
                            NBIT => Hdf5Filter::Nbit {
                                client_data,
                                signed: config.get("signed").and_then(|v| v.as_bool())
                                    == Some(true),
                            },
                            SCALEOFFSET => Hdf5Filter::ScaleOffset(client_data),
                            _ => Hdf5Filter::Szip(client_data),
                        }
                    }
                };
                Ok(Codec::BytesToBytes(Arc::new(filter)))
            },
        ));
    });
}

/// The decoder of an HDF5 filter.
#[derive(Debug)]
enum Hdf5Filter {
    Lz4,
    /// With the filter's client data.
    Szip(Vec<u32>),
    /// With the filter's client data, and whether the integers it packs are signed.
    Nbit {
        client_data: Vec<u32>,
        signed: bool,
    },
    /// With the filter's client data.
    ScaleOffset(Vec<u32>),
    /// Whole elements holding their values in fewer bits than their size.
    ValueBits(ValueBits),
    /// Stored elements of `element` bytes, of which the `keep` ranges (offset, length) make
    /// a packed element of `packed` bytes.
    Repack {
        element: u64,
        keep: Vec<(u64, u64)>,
        packed: u64,
    },
}

impl Hdf5Filter {
    fn name(&self) -> &'static str {
        match self {
            Hdf5Filter::Lz4 => LZ4,
            Hdf5Filter::Szip(_) => SZIP,
            Hdf5Filter::Nbit { .. } => NBIT,
            Hdf5Filter::ScaleOffset(_) => SCALEOFFSET,
            Hdf5Filter::Repack { .. } => REPACK,
            Hdf5Filter::ValueBits(_) => VALUE_BITS,
        }
    }
}

impl ExtensionName for Hdf5Filter {
    fn name(&self, version: ZarrVersion) -> Option<Cow<'static, str>> {
        matches!(version, ZarrVersion::V3).then_some(Cow::Borrowed(Hdf5Filter::name(self)))
    }
}

impl CodecTraits for Hdf5Filter {
    fn as_any(&self) -> &dyn Any {
        self
    }

    fn configuration(&self, _: ZarrVersion, _: &CodecMetadataOptions) -> Option<Configuration> {
        let mut config = serde_json::Map::new();
        match self {
            Hdf5Filter::Lz4 => {}
            Hdf5Filter::Szip(client_data) | Hdf5Filter::ScaleOffset(client_data) => {
                config.insert("client_data".into(), serde_json::json!(client_data));
            }
            Hdf5Filter::Nbit {
                client_data,
                signed,
            } => {
                config.insert("client_data".into(), serde_json::json!(client_data));
                config.insert("signed".into(), serde_json::json!(signed));
            }
            Hdf5Filter::Repack { element, keep, .. } => {
                config.insert("element_bytes".into(), serde_json::json!(element));
                config.insert("keep".into(), serde_json::json!(keep));
            }
            Hdf5Filter::ValueBits(bits) => config.extend(value_bits_configuration(bits)),
        }
        Some(Configuration::from(config))
    }

    fn partial_decoder_capability(&self) -> PartialDecoderCapability {
        PartialDecoderCapability {
            partial_read: false,
            partial_decode: false,
        }
    }

    fn partial_encoder_capability(&self) -> PartialEncoderCapability {
        PartialEncoderCapability {
            partial_encode: false,
        }
    }
}

#[async_trait::async_trait]
impl BytesToBytesCodecTraits for Hdf5Filter {
    fn into_dyn(self: Arc<Self>) -> Arc<dyn BytesToBytesCodecTraits> {
        self
    }

    fn recommended_concurrency(
        &self,
        _: &BytesRepresentation,
    ) -> Result<RecommendedConcurrency, CodecError> {
        Ok(RecommendedConcurrency::new_maximum(1))
    }

    fn encoded_representation(&self, decoded: &BytesRepresentation) -> BytesRepresentation {
        match (self, decoded) {
            // Whole elements, each stored with its unused bytes.
            (
                Hdf5Filter::Repack {
                    element, packed, ..
                },
                BytesRepresentation::FixedSize(n),
            ) => BytesRepresentation::FixedSize(n / packed * element),
            (
                Hdf5Filter::Repack {
                    element, packed, ..
                },
                BytesRepresentation::BoundedSize(n),
            ) => BytesRepresentation::BoundedSize(n / packed * element),
            // Elements stay their size.
            (Hdf5Filter::ValueBits(_), decoded) => *decoded,
            _ => BytesRepresentation::UnboundedSize,
        }
    }

    fn encode<'a>(
        &self,
        _: ArrayBytesRaw<'a>,
        _: &CodecOptions,
    ) -> Result<ArrayBytesRaw<'a>, CodecError> {
        Err(CodecError::Other(format!("{} only decodes", self.name())))
    }

    fn decode<'a>(
        &self,
        encoded_value: ArrayBytesRaw<'a>,
        decoded_representation: &BytesRepresentation,
        _: &CodecOptions,
    ) -> Result<ArrayBytesRaw<'a>, CodecError> {
        let (size, exact) = match *decoded_representation {
            BytesRepresentation::FixedSize(n) => (n, true),
            BytesRepresentation::BoundedSize(n) => (n, false),
            BytesRepresentation::UnboundedSize => {
                return Err(CodecError::Other(format!(
                    "{}: a chunk of unbounded size",
                    self.name()
                )))
            }
        };
        match self {
            Hdf5Filter::Lz4 => decode(&encoded_value, size, exact).map_err(|why| {
                CodecError::Other(format!("an lz4 (HDF5 filter 32004) chunk: {why}"))
            }),
            Hdf5Filter::Szip(client_data) => decode_szip(&encoded_value, client_data, size, exact)
                .map_err(|why| CodecError::Other(format!("an szip (HDF5 filter 4) chunk: {why}"))),
            Hdf5Filter::Nbit {
                client_data,
                signed,
            } => decode_nbit(&encoded_value, client_data, *signed, size, exact)
                .map_err(|why| CodecError::Other(format!("an nbit (HDF5 filter 5) chunk: {why}"))),
            Hdf5Filter::ScaleOffset(client_data) => decode_with(
                &encoded_value,
                client_data,
                size,
                exact,
                hdf5_reader::filters::scaleoffset::decompress_with_limit,
            )
            .map_err(|why| {
                CodecError::Other(format!("a scaleoffset (HDF5 filter 6) chunk: {why}"))
            }),
            Hdf5Filter::Repack {
                element,
                keep,
                packed,
            } => repack(&encoded_value, *element, keep, *packed, size, exact)
                .map_err(|why| CodecError::Other(format!("a chunk of a compound type: {why}"))),
            // Widened in place: the decoded chunk is owned by then, so nothing is copied.
            Hdf5Filter::ValueBits(bits) => {
                widen_stored(encoded_value.into_owned(), bits, size, exact)
                    .map_err(|why| CodecError::Other(format!("a chunk of integers: {why}")))
            }
        }
        .map(Cow::Owned)
    }
}

/// The elements of `element` bytes in `stored` with only their `keep` ranges, `size` bytes
/// (`exact`) or at most `size`.
fn repack(
    stored: &[u8],
    element: u64,
    keep: &[(u64, u64)],
    packed: u64,
    size: u64,
    exact: bool,
) -> Result<Vec<u8>, String> {
    let count = stored.len() as u64 / element;
    let want = count * packed;
    if !(stored.len() as u64).is_multiple_of(element) || want > size || (exact && want != size) {
        return Err(format!(
            "{} stored bytes are not the {size} bytes of whole elements of {element}",
            stored.len()
        ));
    }
    let mut out = Vec::with_capacity(want as usize);
    for one in stored.chunks_exact(element as usize) {
        for &(at, len) in keep {
            out.extend_from_slice(&one[at as usize..(at + len) as usize]);
        }
    }
    Ok(out)
}

/// The configuration of `ndfusion.hdf5_value_bits` for `bits`.
pub(crate) fn value_bits_configuration(bits: &ValueBits) -> serde_json::Map<String, Value> {
    let ValueBits {
        bytes,
        precision,
        offset,
        signed,
        big_endian,
    } = *bits;
    serde_json::Map::from_iter([
        ("bytes".into(), bytes.into()),
        ("precision".into(), precision.into()),
        ("offset".into(), offset.into()),
        ("signed".into(), signed.into()),
        ("big_endian".into(), big_endian.into()),
    ])
}

/// Stored elements made whole integers (`widen`): `size` bytes of them (`exact`) or at most.
fn widen_stored(
    mut stored: Vec<u8>,
    bits: &ValueBits,
    size: u64,
    exact: bool,
) -> Result<Vec<u8>, String> {
    let len = stored.len() as u64;
    if len > size || (exact && len != size) {
        return Err(format!("it holds {len} bytes, its chunk holds {size}"));
    }
    whole_integers(&mut stored, bits)?;
    Ok(stored)
}

/// `elements` that keep their values as `bits` says, made whole integers in place (`widen`).
pub(crate) fn whole_integers(elements: &mut [u8], bits: &ValueBits) -> Result<(), String> {
    let ValueBits {
        bytes,
        big_endian,
        precision,
        offset,
        signed,
    } = *bits;
    widen(elements, bytes, big_endian, precision, offset, signed)
}

/// The bytes the szip stream `encoded` holds, `size` of them (`exact`) or at most `size`.
fn decode_szip(
    encoded: &[u8],
    client_data: &[u32],
    size: u64,
    exact: bool,
) -> Result<Vec<u8>, String> {
    if let Some(stored) = encoded.strip_prefix(&SZIP_STORED) {
        if stored.len() as u64 > size || (exact && stored.len() as u64 != size) {
            return Err(format!(
                "it holds {} bytes, its chunk holds {size}",
                stored.len()
            ));
        }
        return Ok(stored.to_vec());
    }
    decode_with(
        encoded,
        client_data,
        size,
        exact,
        hdf5_reader::filters::szip::decompress_with_limit,
    )
}

/// hdf5-reader's decoder of a filter: (stream, client data, most bytes to make).
type Decompress = fn(&[u8], &[u32], usize) -> hdf5_reader::error::Result<Vec<u8>>;

/// What hdf5-reader's `decompress` (of a filter configured by `client_data`) makes of
/// `encoded`: `size` bytes (`exact`) or at most `size`, never more allocated.
fn decode_with(
    encoded: &[u8],
    client_data: &[u32],
    size: u64,
    exact: bool,
    decompress: Decompress,
) -> Result<Vec<u8>, String> {
    let limit = usize::try_from(size).map_err(|_| "a chunk larger than memory")?;
    let out = decompress(encoded, client_data, limit).map_err(|e| e.to_string())?;
    if exact && out.len() as u64 != size {
        return Err(format!(
            "it holds {} bytes, its chunk holds {size}",
            out.len()
        ));
    }
    Ok(out)
}

/// The integers the n-bit stream `encoded` holds, `size` bytes of them (`exact`) or at most
/// `size`, each shifted down from its offset and, when `signed`, sign-extended.
fn decode_nbit(
    encoded: &[u8],
    client_data: &[u32],
    signed: bool,
    size: u64,
    exact: bool,
) -> Result<Vec<u8>, String> {
    let decompress = hdf5_reader::filters::nbit::decompress_with_limit;
    let mut out = decode_with(encoded, client_data, size, exact, decompress)?;
    // [parameters, nothing packed, elements, atomic (1), size, order, precision, offset]
    if let [_, 0, _, 1, bytes, order, precision, offset] = *client_data {
        widen(&mut out, bytes, order == 1, precision, offset, signed)?;
    }
    Ok(out)
}

/// Elements of `bytes` bytes (big-endian or little) holding `precision` value bits at
/// `offset`, made whole integers: shifted down, sign-extended when `signed`.
fn widen(
    elements: &mut [u8],
    bytes: u32,
    big_endian: bool,
    precision: u32,
    offset: u32,
    signed: bool,
) -> Result<(), String> {
    let n = bytes as usize;
    // In u64: the parameters come from the file.
    let value_bits = u64::from(precision) + u64::from(offset);
    let fits = (1..=8).contains(&n) && precision > 0 && value_bits <= u64::from(bytes) * 8;
    if !fits || !elements.len().is_multiple_of(n) {
        return Err(format!(
            "{precision} bits at bit {offset} of {bytes}-byte elements ({} bytes)",
            elements.len()
        ));
    }
    if precision == bytes * 8 {
        return Ok(());
    }
    let mask = (1u64 << precision) - 1;
    for e in elements.chunks_exact_mut(n) {
        let mut raw = [0u8; 8];
        let v = if big_endian {
            raw[8 - n..].copy_from_slice(e);
            u64::from_be_bytes(raw)
        } else {
            raw[..n].copy_from_slice(e);
            u64::from_le_bytes(raw)
        };
        let mut v = (v >> offset) & mask;
        if signed && (v >> (precision - 1)) & 1 == 1 {
            v |= !mask;
        }
        if big_endian {
            e.copy_from_slice(&v.to_be_bytes()[8 - n..]);
        } else {
            e.copy_from_slice(&v.to_le_bytes()[..n]);
        }
    }
    Ok(())
}

/// The bytes the lz4 stream `encoded` holds, `size` of them (`exact`) or at most `size`.
fn decode(encoded: &[u8], size: u64, exact: bool) -> Result<Vec<u8>, String> {
    let header = encoded.get(..12).ok_or("shorter than its 12-byte header")?;
    let total = u64::from_be_bytes(header[..8].try_into().expect("8 bytes"));
    let block = u64::from(u32::from_be_bytes(header[8..].try_into().expect("4 bytes")));
    if total > size || (exact && total != size) {
        return Err(format!(
            "it says it holds {total} bytes, its chunk holds {size}"
        ));
    }
    if block == 0 && total > 0 {
        return Err("its block size is 0".into());
    }
    // `total` is at most the chunk's size, which zarrs has bounded: safe to allocate.
    let mut out = vec![0u8; total as usize];
    let mut rest = &encoded[12..];
    let mut at = 0usize;
    while at < out.len() {
        let this = block.min((out.len() - at) as u64) as usize;
        let stored = rest.get(..4).ok_or("ends inside a block's header")?;
        let stored = u32::from_be_bytes(stored.try_into().expect("4 bytes")) as usize;
        let bytes = rest.get(4..4 + stored).ok_or("ends inside a block")?;
        let target = &mut out[at..at + this];
        if stored == this {
            target.copy_from_slice(bytes);
        } else {
            let n = lz4_flex::block::decompress_into(bytes, target)
                .map_err(|e| format!("a block at byte {at}: {e}"))?;
            if n != this {
                return Err(format!("a block at byte {at} holds {n} bytes, not {this}"));
            }
        }
        at += this;
        rest = &rest[4 + stored..];
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `raw` in HDF5's lz4 format, blocks of `block` bytes, the incompressible ones stored.
    fn encode(raw: &[u8], block: usize) -> Vec<u8> {
        let mut out = (raw.len() as u64).to_be_bytes().to_vec();
        out.extend((block as u32).to_be_bytes());
        for piece in raw.chunks(block) {
            let packed = lz4_flex::block::compress(piece);
            let stored: &[u8] = if packed.len() < piece.len() {
                &packed
            } else {
                piece
            };
            out.extend((stored.len() as u32).to_be_bytes());
            out.extend(stored);
        }
        out
    }

    #[test]
    fn nbit_integers_are_shifted_down_and_sign_extended() {
        // 12 value bits at bit 2 of little-endian 2-byte elements: -7, 2047, 5.
        let at = |v: i16| (((v as u16) & 0x0fff) << 2).to_le_bytes();
        let mut le: Vec<u8> = [-7, 2047, 5].into_iter().flat_map(at).collect();
        widen(&mut le, 2, false, 12, 2, true).unwrap();
        let got: Vec<i16> = (le.chunks(2))
            .map(|b| i16::from_le_bytes([b[0], b[1]]))
            .collect();
        assert_eq!(got, [-7, 2047, 5]);
        // Unsigned: the top value bit is a value bit; big-endian bytes.
        let mut be = 0x0ff9u16.to_be_bytes().to_vec();
        widen(&mut be, 2, true, 12, 0, false).unwrap();
        assert_eq!(be, 0x0ff9u16.to_be_bytes());
        let mut signed_be = 0x0ff9u16.to_be_bytes().to_vec();
        widen(&mut signed_be, 2, true, 12, 0, true).unwrap();
        assert_eq!(i16::from_be_bytes([signed_be[0], signed_be[1]]), -7);
        // Parameters that do not fit the elements are an error, not a panic.
        assert!(widen(&mut [0; 4], 2, false, 12, 8, true).is_err());
        assert!(widen(&mut [0; 3], 2, false, 12, 0, true).is_err());
        assert!(widen(&mut [0; 9], 9, false, 12, 0, true).is_err());
        assert!(widen(&mut [0; 2], 2, false, u32::MAX, 1, true).is_err());
        assert!(widen(&mut [0; 2], 2, false, 1, u32::MAX, true).is_err());
    }

    #[test]
    fn padded_elements_are_packed() {
        // Elements of 8 bytes: a u8 at 0, an i32 at 4; 3 bytes unused.
        let stored = [
            1, 0xaa, 0xaa, 0xaa, 2, 0, 0, 0, 3, 0xbb, 0xbb, 0xbb, 4, 0, 0, 0,
        ];
        let keep = [(0, 1), (4, 4)];
        let packed = repack(&stored, 8, &keep, 5, 10, true).unwrap();
        assert_eq!(packed, [1, 2, 0, 0, 0, 3, 4, 0, 0, 0]);
        assert!(repack(&stored[..12], 8, &keep, 5, 10, true).is_err());
        assert!(repack(&stored, 8, &keep, 5, 5, true).is_err());
    }

    #[test]
    fn szip_streams_and_stored_chunks_decode_within_the_chunk_size() {
        // netCDF-C's parameters for int32 with entropy coding (szip.nc's `t`).
        let client_data = [141, 8, 32, 16];
        let stored = [&SZIP_STORED[..], &[7u8; 64][..]].concat();
        assert_eq!(
            decode_szip(&stored, &client_data, 64, true).unwrap(),
            [7u8; 64]
        );
        let err = decode_szip(&stored, &client_data, 60, true).unwrap_err();
        assert!(err.contains("holds 64 bytes"), "{err}");
        // A stream saying it decodes to more than the chunk is refused before allocating.
        let mut lying = (1u32 << 30).to_le_bytes().to_vec();
        lying.extend([0u8; 16]);
        let err = decode_szip(&lying, &client_data, 64, true).unwrap_err();
        assert!(err.contains("exceeds the limit"), "{err}");
        // Cut short.
        assert!(decode_szip(&64u32.to_le_bytes(), &client_data, 64, true).is_err());
    }

    #[test]
    fn blocks_decode_within_the_chunk_size() {
        let raw: Vec<u8> = (0..1000u32).flat_map(|i| (i / 10).to_le_bytes()).collect();
        let encoded = encode(&raw, 1024);
        assert_eq!(decode(&encoded, raw.len() as u64, true).unwrap(), raw);
        // A block stored as it is (too short to compress).
        let tiny = encode(b"abc", 1024);
        assert_eq!(decode(&tiny, 3, true).unwrap(), b"abc");
        // A header claiming more than the chunk holds is refused before allocating.
        let mut lying = encoded.clone();
        lying[..8].copy_from_slice(&(1u64 << 40).to_be_bytes());
        let err = decode(&lying, raw.len() as u64, true).unwrap_err();
        assert!(err.contains("holds"), "{err}");
        // Cut short; a block that decodes to the wrong size.
        assert!(decode(&encoded[..encoded.len() - 5], raw.len() as u64, true).is_err());
        let mut short = encode(&raw[..3000], 1024);
        short[..8].copy_from_slice(&4000u64.to_be_bytes());
        assert!(decode(&short, 4000, true).is_err());
    }
}
