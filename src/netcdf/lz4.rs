//! HDF5's lz4 filter (registered id 32004) as a Zarr codec, `ndfusion.hdf5_lz4`, which the
//! netCDF-4 layout names for a variable stored with it (`nc4.rs`). Its stream is not any
//! Zarr lz4 codec's: a 12-byte header (the decoded size as a big-endian u64, the block size
//! as a big-endian u32), then per block a big-endian u32 of its stored size and its bytes —
//! an lz4 block, or the block as it is when lz4 could not shrink it (stored size equal to
//! the block's decoded size). Decoding is bounded like the other codecs
//! (`zarr/read/bounded_codecs.rs`): the header's size must be the size zarrs expects, and
//! each block decodes into its own slice of the output. Only decoding is offered.

use std::any::Any;
use std::borrow::Cow;
use std::sync::{Arc, Once};

use zarrs::array::codec::api::{
    register_codec_v3, ArrayBytesRaw, BytesRepresentation, BytesToBytesCodecTraits, Codec,
    CodecError, CodecMetadataOptions, CodecOptions, CodecRuntimePluginV3, CodecTraits,
    PartialDecoderCapability, PartialEncoderCapability, RecommendedConcurrency,
};
use zarrs::metadata::Configuration;
use zarrs::plugin::{ExtensionName, ZarrVersion};

/// The codec's name in the Zarr v3 documents ndfusion makes for netCDF-4 files.
pub(crate) const NAME: &str = "ndfusion.hdf5_lz4";

/// Registers the codec with zarrs, once per process (before a netCDF-4 table is built).
pub(crate) fn register() {
    static REGISTERED: Once = Once::new();
    REGISTERED.call_once(|| {
        // The handle is dropped: the codec stays registered for the process.
        let _ = register_codec_v3(CodecRuntimePluginV3::new(
            |name: &str| name == NAME,
            |_metadata| Ok(Codec::BytesToBytes(Arc::new(Hdf5Lz4))),
        ));
    });
}

/// The decoder of HDF5's lz4 filter.
#[derive(Debug)]
struct Hdf5Lz4;

impl ExtensionName for Hdf5Lz4 {
    fn name(&self, version: ZarrVersion) -> Option<Cow<'static, str>> {
        matches!(version, ZarrVersion::V3).then_some(Cow::Borrowed(NAME))
    }
}

impl CodecTraits for Hdf5Lz4 {
    fn as_any(&self) -> &dyn Any {
        self
    }

    fn configuration(&self, _: ZarrVersion, _: &CodecMetadataOptions) -> Option<Configuration> {
        Some(Configuration::default())
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
impl BytesToBytesCodecTraits for Hdf5Lz4 {
    fn into_dyn(self: Arc<Self>) -> Arc<dyn BytesToBytesCodecTraits> {
        self
    }

    fn recommended_concurrency(
        &self,
        _: &BytesRepresentation,
    ) -> Result<RecommendedConcurrency, CodecError> {
        Ok(RecommendedConcurrency::new_maximum(1))
    }

    fn encoded_representation(&self, _: &BytesRepresentation) -> BytesRepresentation {
        BytesRepresentation::UnboundedSize
    }

    fn encode<'a>(
        &self,
        _: ArrayBytesRaw<'a>,
        _: &CodecOptions,
    ) -> Result<ArrayBytesRaw<'a>, CodecError> {
        Err(CodecError::Other(format!("{NAME} only decodes")))
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
                    "{NAME}: a chunk of unbounded size"
                )))
            }
        };
        decode(&encoded_value, size, exact)
            .map(Cow::Owned)
            .map_err(|why| CodecError::Other(format!("an lz4 (HDF5 filter 32004) chunk: {why}")))
    }
}

/// The bytes `encoded` holds, `size` of them (`exact`) or at most `size`.
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
