//! Every decompressing codec zarrs builds for ndfusion, bounded by the size of what it
//! decodes (`decompress.rs`). zarrs builds an array's codecs (its chain, a shard's inner
//! chunks, string arrays, partial decoders) from its runtime codec registry, which it
//! consults before its own codecs, and zarrs 0.23 offers no way to hand one array a chain of
//! one's own (`Array::new_with_codec_chain` is private; sharding and vlen build their inner
//! chains from the registry). So ndfusion registers gzip, zlib, bz2, zstd and blosc there
//! once per process, and each registered builder wraps zarrs' codec only while
//! [`with_bounded_codecs`] builds an array on that thread: every other array in the process
//! (an application that embeds ndfusion and reads Zarr with zarrs too) gets zarrs' own
//! codec, unwrapped. Arrays are built synchronously, inner chains included, so the
//! thread-local scope covers everything zarrs builds for the array.
//!
//! zarrs hands a bytes-to-bytes codec the size of what it decodes: fixed for fixed-size
//! elements, bounded after another codec, unbounded for variable-length elements (capped at
//! the table's `Limits::string_chunk_bytes`, 64 MiB by default, kept in each wrapped codec).
//! Codecs whose output is no larger than their input (checksums, `shuffle`) need no bound:
//! the stored bytes they decode are bounded already (`ChunkReader::stored_limit`). `shuffle`
//! is wrapped the same way for speed: its decode is `unshuffle.rs`'s (netCDF-4 and HDF5
//! chunks are mostly shuffled before deflate). `fletcher32` is wrapped for correctness: zarrs
//! 0.23's checksum leaves out the last byte of an odd-length chunk (it tests the word count,
//! already counted down to zero, where libhdf5 and numcodecs test the byte count), so every
//! chunk of an odd number of bytes (a compound of odd size, `|S` strings) read as corrupt.

use std::any::Any;
use std::borrow::Cow;
use std::cell::Cell;
use std::sync::{Arc, Once};

use zarrs::array::codec::api::{
    register_codec_v2, register_codec_v3, ArrayBytesRaw, BytesRepresentation,
    BytesToBytesCodecTraits, Codec, CodecError, CodecMetadataOptions, CodecOptions,
    CodecRuntimePluginV2, CodecRuntimePluginV3, CodecTraits, CodecTraitsV2, CodecTraitsV3,
    PartialDecoderCapability, PartialEncoderCapability, RecommendedConcurrency,
};
use zarrs::array::codec::{
    BloscCodec, Bz2Codec, Fletcher32Codec, GzipCodec, ShuffleCodec, ZlibCodec, ZstdCodec,
};
use zarrs::metadata::Configuration;
use zarrs::plugin::{
    ExtensionAliases, ExtensionName, PluginCreateError, ZarrVersion, ZarrVersion2, ZarrVersion3,
};

use crate::zarr::read::decompress::{Bound, Compressor};
use crate::zarr::read::unshuffle::unshuffle;

/// What a wrapped codec's decode is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Decoder {
    /// A decompressor bounded by the size of what it decodes.
    Decompress(Compressor),
    /// The shuffle filter undone, elements of this many bytes (read from the codec's
    /// configuration when it is wrapped).
    Unshuffle(usize),
    /// HDF5's Fletcher-32 checksum checked and stripped (`verify_fletcher32`).
    Fletcher32,
}

thread_local! {
    /// While ndfusion builds an array on this thread: the bytes a chunk of strings may
    /// decompress to. `None`: zarrs builds for someone else, with its own codecs.
    static BUILDING: Cell<Option<usize>> = const { Cell::new(None) };
}

/// Runs `build` (zarrs' `Array::new_with_metadata`) with the bounded decompressors, strings
/// capped at `string_chunk_bytes`; zarrs builds everything else with its own codecs.
pub(crate) fn with_bounded_codecs<T>(string_chunk_bytes: usize, build: impl FnOnce() -> T) -> T {
    install();
    /// Puts back what was there, also when `build` panics.
    struct Restore(Option<usize>);
    impl Drop for Restore {
        fn drop(&mut self) {
            BUILDING.set(self.0);
        }
    }
    let _restore = Restore(BUILDING.replace(Some(string_chunk_bytes)));
    build()
}

/// Registers the bounding builders with zarrs, once per process.
fn install() {
    static INSTALLED: Once = Once::new();
    INSTALLED.call_once(|| {
        register::<ZstdCodec>(Decoder::Decompress(Compressor::Zstd));
        register::<GzipCodec>(Decoder::Decompress(Compressor::Gzip));
        register::<ZlibCodec>(Decoder::Decompress(Compressor::Zlib));
        register::<Bz2Codec>(Decoder::Decompress(Compressor::Bz2));
        register::<BloscCodec>(Decoder::Decompress(Compressor::Blosc));
        register::<ShuffleCodec>(Decoder::Unshuffle(0));
        register::<Fletcher32Codec>(Decoder::Fletcher32);
    });
}

/// Registers `T` under its own names (v2 and v3), built by zarrs and wrapped while ndfusion
/// builds.
fn register<T>(decoder: Decoder)
where
    T: ExtensionAliases<ZarrVersion3> + ExtensionAliases<ZarrVersion2> + 'static,
    T: CodecTraitsV3 + CodecTraitsV2,
{
    // The registration handles are dropped: the codecs stay registered for the process.
    let _ = register_codec_v3(CodecRuntimePluginV3::new(
        <T as ExtensionAliases<ZarrVersion3>>::matches_name,
        move |metadata| bounded(<T as CodecTraitsV3>::create(metadata)?, decoder),
    ));
    let _ = register_codec_v2(CodecRuntimePluginV2::new(
        <T as ExtensionAliases<ZarrVersion2>>::matches_name,
        move |metadata| bounded(<T as CodecTraitsV2>::create(metadata)?, decoder),
    ));
}

/// zarrs' `codec`, wrapped when ndfusion is building.
fn bounded(codec: Codec, decoder: Decoder) -> Result<Codec, PluginCreateError> {
    let Some(string_chunk_bytes) = BUILDING.get() else {
        return Ok(codec);
    };
    let Codec::BytesToBytes(inner) = codec else {
        return Ok(codec);
    };
    let decoder = match decoder {
        Decoder::Unshuffle(_) => match element_size(inner.as_ref()) {
            Some(width) => Decoder::Unshuffle(width),
            // A configuration zarrs reads and ndfusion does not: zarrs' own decode.
            None => return Ok(Codec::BytesToBytes(inner)),
        },
        decompress => decompress,
    };
    Ok(Codec::BytesToBytes(Arc::new(Bounded {
        inner,
        decoder,
        string_chunk_bytes,
    })))
}

/// The element size of a shuffle codec zarrs built, from its configuration.
fn element_size(codec: &dyn BytesToBytesCodecTraits) -> Option<usize> {
    let configuration = codec.configuration(ZarrVersion::V3, &CodecMetadataOptions::default())?;
    let size = configuration.get("elementsize")?.as_u64()?;
    usize::try_from(size).ok().filter(|&s| s > 0)
}

/// A decompressing codec whose decode makes no more than the size zarrs says its output has;
/// everything else is the codec's own.
#[derive(Debug)]
struct Bounded {
    inner: Arc<dyn BytesToBytesCodecTraits>,
    decoder: Decoder,
    /// What a decode of unbounded size (strings) may make.
    string_chunk_bytes: usize,
}

impl ExtensionName for Bounded {
    fn name(&self, version: ZarrVersion) -> Option<Cow<'static, str>> {
        self.inner.name(version)
    }
}

impl CodecTraits for Bounded {
    /// The wrapped codec's: zarrs (and `array.rs`) recognise codecs by their type.
    fn as_any(&self) -> &dyn Any {
        self.inner.as_any()
    }

    fn configuration(
        &self,
        version: ZarrVersion,
        options: &CodecMetadataOptions,
    ) -> Option<Configuration> {
        self.inner.configuration(version, options)
    }

    fn partial_decoder_capability(&self) -> PartialDecoderCapability {
        self.inner.partial_decoder_capability()
    }

    fn partial_encoder_capability(&self) -> PartialEncoderCapability {
        self.inner.partial_encoder_capability()
    }
}

// The partial decoders are the trait's defaults, which decode the whole input through
// `decode` below (the wrapped codecs' own would decode unbounded).
#[async_trait::async_trait]
impl BytesToBytesCodecTraits for Bounded {
    fn into_dyn(self: Arc<Self>) -> Arc<dyn BytesToBytesCodecTraits> {
        self
    }

    fn recommended_concurrency(
        &self,
        decoded_representation: &BytesRepresentation,
    ) -> Result<RecommendedConcurrency, CodecError> {
        self.inner.recommended_concurrency(decoded_representation)
    }

    fn encoded_representation(
        &self,
        decoded_representation: &BytesRepresentation,
    ) -> BytesRepresentation {
        self.inner.encoded_representation(decoded_representation)
    }

    fn encode<'a>(
        &self,
        decoded_value: ArrayBytesRaw<'a>,
        options: &CodecOptions,
    ) -> Result<ArrayBytesRaw<'a>, CodecError> {
        self.inner.encode(decoded_value, options)
    }

    fn decode<'a>(
        &self,
        encoded_value: ArrayBytesRaw<'a>,
        decoded_representation: &BytesRepresentation,
        options: &CodecOptions,
    ) -> Result<ArrayBytesRaw<'a>, CodecError> {
        let size = |n: u64| {
            usize::try_from(n)
                .map_err(|_| CodecError::Other(format!("a decoded size of {n} bytes")))
        };
        let bound = match *decoded_representation {
            BytesRepresentation::FixedSize(n) => Bound::Exact(size(n)?),
            BytesRepresentation::BoundedSize(n) => Bound::AtMost(size(n)?),
            BytesRepresentation::UnboundedSize => Bound::AtMost(self.string_chunk_bytes),
        };
        let compressor = match self.decoder {
            Decoder::Decompress(compressor) => compressor,
            Decoder::Fletcher32 => {
                let checked = options.validate_checksums();
                return verify_fletcher32(encoded_value, checked).map_err(CodecError::Other);
            }
            Decoder::Unshuffle(width) => {
                if let Bound::Exact(n) = bound {
                    if encoded_value.len() != n {
                        return Err(CodecError::Other(format!(
                            "a shuffled chunk of {} bytes, expected {n}",
                            encoded_value.len()
                        )));
                    }
                }
                let decoded = unshuffle(&encoded_value, width).map_err(CodecError::Other)?;
                return Ok(Cow::Owned(decoded));
            }
        };
        match compressor.decompress(&encoded_value, bound) {
            Ok(Some(decoded)) => Ok(Cow::Owned(decoded)),
            // Checked only (blosc): zarrs decodes what the header claims, now within bounds.
            Ok(None) => self
                .inner
                .decode(encoded_value, decoded_representation, options),
            Err(e) => Err(CodecError::Other(e.to_string())),
        }
    }
}

/// `stored` without its last 4 bytes, a little-endian Fletcher-32 of the others (as
/// libhdf5's `H5Z_filter_fletcher32` and numcodecs' `Fletcher32` write it), checked when
/// `check`. As libhdf5 does, the checksum is also accepted with the bytes of each 16-bit half
/// swapped: what HDF5 before 1.6.3 wrote on little-endian machines.
fn verify_fletcher32(stored: ArrayBytesRaw<'_>, check: bool) -> Result<ArrayBytesRaw<'_>, String> {
    let Some(payload) = stored.len().checked_sub(4) else {
        return Err(format!(
            "a fletcher32 chunk of {} bytes, too short for its 4-byte checksum",
            stored.len()
        ));
    };
    if check {
        let mut sum = [0u8; 4];
        sum.copy_from_slice(&stored[payload..]);
        let stored_sum = u32::from_le_bytes(sum);
        let computed = hdf5_reader::checksum::fletcher32(&stored[..payload]);
        let [a, b, c, d] = computed.to_le_bytes();
        let before_1_6_3 = u32::from_le_bytes([b, a, d, c]);
        if stored_sum != computed && stored_sum != before_1_6_3 {
            return Err(format!(
                "the fletcher32 checksum of a chunk of {payload} bytes is invalid (stored \
                 {stored_sum:#010x}, computed {computed:#010x})"
            ));
        }
    }
    let mut decoded = stored.into_owned();
    decoded.truncate(payload);
    Ok(Cow::Owned(decoded))
}

#[cfg(test)]
mod tests {
    use std::io::Write;
    use std::num::NonZeroU64;

    use zarrs::array::codec::CodecChain;
    use zarrs::array::ArrayToBytesCodecTraits;
    use zarrs::array::{data_type, FillValue};

    use super::*;

    /// The chain ndfusion builds for `codecs`.
    fn chain(codecs: serde_json::Value) -> CodecChain {
        with_bounded_codecs(64 << 20, || plain_chain(codecs))
    }

    /// The chain zarrs builds for `codecs` outside ndfusion's arrays.
    fn plain_chain(codecs: serde_json::Value) -> CodecChain {
        let metadata: Vec<zarrs::metadata::v3::MetadataV3> =
            serde_json::from_value(codecs).unwrap();
        CodecChain::from_metadata(&metadata).unwrap()
    }

    fn gzip(data: &[u8]) -> Vec<u8> {
        let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        e.write_all(data).unwrap();
        e.finish().unwrap()
    }

    /// Decodes `encoded` as a chunk of `n` uint8 elements.
    fn decode(chain: &CodecChain, encoded: Vec<u8>, n: u64) -> Result<Vec<u8>, String> {
        chain
            .decode(
                Cow::Owned(encoded),
                &[NonZeroU64::new(n).unwrap()],
                &data_type::uint8(),
                &FillValue::from(0u8),
                &CodecOptions::default(),
            )
            .map_err(|e| e.to_string())
            .and_then(|bytes| (bytes.into_fixed().map(Cow::into_owned)).map_err(|e| e.to_string()))
    }

    const BYTES: &str = r#"{"name": "bytes", "configuration": {"endian": "little"}}"#;

    fn bytes() -> serde_json::Value {
        serde_json::from_str(BYTES).unwrap()
    }

    #[test]
    fn shuffle_is_undone_by_ndfusion_as_zarrs_undoes_it() {
        let codecs = serde_json::json!([
            bytes(),
            {"name": "numcodecs.shuffle", "configuration": {"elementsize": 4}},
            {"name": "gzip", "configuration": {"level": 1}},
        ]);
        let (ours, zarrs) = (chain(codecs.clone()), plain_chain(codecs));
        assert!(ours.bytes_to_bytes_codecs()[0]
            .as_any()
            .is::<ShuffleCodec>());
        // 250 4-byte elements, shuffled by zarrs' own encoder.
        let data: Vec<u8> = (0..1000u32).map(|i| (i * 7 % 251) as u8).collect();
        let encoded = zarrs
            .encode(
                zarrs::array::ArrayBytes::new_flen(Cow::Borrowed(&data[..])),
                &[NonZeroU64::new(1000).unwrap()],
                &data_type::uint8(),
                &FillValue::from(0u8),
                &CodecOptions::default(),
            )
            .unwrap()
            .into_owned();
        assert_eq!(decode(&ours, encoded.clone(), 1000).unwrap(), data);
        assert_eq!(decode(&zarrs, encoded.clone(), 1000).unwrap(), data);
        // Stored bytes of another size than the chunk's are an error, not a guess.
        let shuffle_only = chain(serde_json::json!([
            bytes(),
            {"name": "numcodecs.shuffle", "configuration": {"elementsize": 4}},
        ]));
        let err = decode(&shuffle_only, data.clone(), 996).unwrap_err();
        assert!(
            err.contains("shuffled chunk of 1000 bytes, expected 996"),
            "{err}"
        );
    }

    #[test]
    fn a_compressor_after_transpose_is_bounded_and_the_rest_kept() {
        let chain = chain(serde_json::json!([
            {"name": "transpose", "configuration": {"order": [0]}},
            bytes(),
            {"name": "gzip", "configuration": {"level": 1}},
        ]));
        assert_eq!(chain.array_to_array_codecs().len(), 1);
        // The wrapped codec still reads as gzip to anyone who asks its type.
        assert!(chain.bytes_to_bytes_codecs()[0].as_any().is::<GzipCodec>());
        let data: Vec<u8> = (0..200u8).collect();
        assert_eq!(decode(&chain, gzip(&data), 200).unwrap(), data);
        // 64 MiB of zeros in about 64 KiB, where 200 bytes are expected.
        let err = decode(&chain, gzip(&vec![0; 64 << 20]), 200).unwrap_err();
        assert!(err.contains("more than the 200 bytes expected"), "{err}");
    }

    #[test]
    fn inner_chunks_of_a_shard_are_bounded() {
        let chain = chain(serde_json::json!([{
            "name": "sharding_indexed",
            "configuration": {
                "chunk_shape": [100],
                "codecs": [bytes(), {"name": "gzip", "configuration": {"level": 1}}],
                "index_codecs": [bytes()],
                "index_location": "end"
            }
        }]));
        // One inner chunk of 100 elements, then the index: its offset and length.
        let shard = |inner: Vec<u8>| {
            let len = inner.len() as u64;
            let mut shard = inner;
            shard.extend_from_slice(&0u64.to_le_bytes());
            shard.extend_from_slice(&len.to_le_bytes());
            shard
        };
        let data: Vec<u8> = (0..100u8).collect();
        assert_eq!(decode(&chain, shard(gzip(&data)), 100).unwrap(), data);
        let err = decode(&chain, shard(gzip(&vec![0; 64 << 20])), 100).unwrap_err();
        assert!(err.contains("more than the 100 bytes expected"), "{err}");
    }

    /// Outside ndfusion's arrays (after ndfusion has registered its builders) zarrs decodes
    /// with its own codecs: a chunk bigger than expected is decoded whole and refused by
    /// zarrs' own check, not by ndfusion's bound; and strings decompress past ndfusion's cap.
    /// Inside, each array keeps the string cap it was built with.
    #[test]
    fn other_arrays_in_the_process_decode_with_zarrs_own_codecs() {
        let gzip_chain =
            || serde_json::json!([bytes(), {"name": "gzip", "configuration": {"level": 1}}]);
        let _ours = chain(gzip_chain());
        let plain = plain_chain(gzip_chain());
        // zarrs may refuse the 400 bytes or not; it is not ndfusion's bound that speaks.
        if let Err(err) = decode(&plain, gzip(&[0; 400]), 200) {
            assert!(!err.contains("bytes expected"), "{err}");
        }
        let strings: Vec<u8> = (0..2000).map(|i| (i % 251) as u8).collect();
        let unbounded = |chain: &CodecChain| {
            chain.bytes_to_bytes_codecs()[0]
                .decode(
                    Cow::Owned(gzip(&strings)),
                    &BytesRepresentation::UnboundedSize,
                    &CodecOptions::default(),
                )
                .map(Cow::into_owned)
                .map_err(|e| e.to_string())
        };
        assert_eq!(unbounded(&plain).unwrap(), strings);
        let capped = with_bounded_codecs(1000, || plain_chain(gzip_chain()));
        let err = unbounded(&capped).unwrap_err();
        assert!(err.contains("more than the 1000 bytes expected"), "{err}");
        assert_eq!(unbounded(&chain(gzip_chain())).unwrap(), strings);
        // The scope ended with the array it built: zarrs' own codecs again.
        assert_eq!(unbounded(&plain_chain(gzip_chain())).unwrap(), strings);
    }

    /// Checksums numcodecs 0.17.1 wrote (`Fletcher32().encode(payload)[-4:]`), of even and
    /// odd lengths, in both byte orders HDF5 has written; a changed byte or a short chunk is
    /// an error, and `validate_checksums` off strips without checking.
    #[test]
    fn fletcher32_checks_odd_chunks_as_numcodecs_and_libhdf5_do() {
        let long: Vec<u8> = (0..=254u8).cycle().take(765).collect();
        for (payload, sum) in [
            (b"ndfusion".to_vec(), "b1b73343"),
            (b"odd bytes".to_vec(), "641daf40"),
            (long, "40bf20ff"),
        ] {
            let sum: Vec<u8> = (0..4)
                .map(|i| u8::from_str_radix(&sum[2 * i..2 * i + 2], 16).unwrap())
                .collect();
            let stored = [payload.clone(), sum.clone()].concat();
            let decoded = verify_fletcher32(Cow::Borrowed(&stored), true).unwrap();
            assert_eq!(decoded.as_ref(), payload.as_slice());
            let swapped = [payload.clone(), vec![sum[1], sum[0], sum[3], sum[2]]].concat();
            assert!(verify_fletcher32(Cow::Borrowed(&swapped), true).is_ok());
            let mut damaged = stored.clone();
            damaged[payload.len() - 1] ^= 1;
            let error = verify_fletcher32(Cow::Borrowed(&damaged), true).unwrap_err();
            assert!(
                error.contains("checksum") && error.contains("invalid"),
                "{error}"
            );
            let unchecked = verify_fletcher32(Cow::Borrowed(&damaged), false).unwrap();
            assert_eq!(unchecked.len(), payload.len());
        }
        let error = verify_fletcher32(Cow::Borrowed(&[1, 2, 3][..]), true).unwrap_err();
        assert!(error.contains("too short"), "{error}");
    }
}
