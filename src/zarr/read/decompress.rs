//! Decompressors run with their output bounded by the size the metadata promises. zarrs'
//! codecs size their output by what the data says: gzip, zlib, bz2 and zstd without a declared
//! size decompress into a growing buffer (a 2 MiB gzip bomb becomes gigabytes), zstd with one
//! and blosc allocate what their header claims. Here a stream decompresses into a buffer of
//! its promised size and stops there, and a header's claim is checked before anything is
//! allocated. zstd's exact path and its front: `zstd_frame.rs`; where these run inside zarrs'
//! codec chains: `bounded_codecs.rs`.

use std::cell::RefCell;
use std::io::{ErrorKind, Read};

use crate::zarr::read::zstd_frame::{self, ZstdFrameError};

/// A decompressing codec whose output ndfusion bounds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Compressor {
    Zstd,
    Gzip,
    Zlib,
    Bz2,
    Blosc,
}

/// How many bytes a decompressed stream must make.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Bound {
    /// Exactly this many (a chunk of fixed-size elements).
    Exact(usize),
    /// No more than this many (what a codec before it may make; variable-length data).
    AtMost(usize),
}

impl Bound {
    fn limit(self) -> usize {
        match self {
            Bound::Exact(n) | Bound::AtMost(n) => n,
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub(crate) enum DecompressError {
    #[error("{codec} stream inflates to more than the {expected} bytes expected")]
    TooLong {
        codec: &'static str,
        expected: usize,
    },
    #[error("{codec} stream inflates to {got} bytes, expected {expected}")]
    TooShort {
        codec: &'static str,
        got: usize,
        expected: usize,
    },
    #[error("{codec} stream is corrupt: {source}")]
    Corrupt {
        codec: &'static str,
        #[source]
        source: std::io::Error,
    },
    #[error("blosc header claims {claimed} bytes, expected {expected}")]
    BloscClaim { claimed: u64, expected: String },
    #[error("blosc frame of {len} bytes is shorter than its 16-byte header")]
    BloscHeader { len: usize },
    #[error(transparent)]
    Zstd(#[from] ZstdFrameError),
}

impl Compressor {
    /// Decompresses `encoded` into a buffer no larger than `bound`. Blosc is only checked
    /// (its header's claim against the bound): zarrs then decompresses it into exactly that.
    pub(crate) fn decompress(
        self,
        encoded: &[u8],
        bound: Bound,
    ) -> Result<Option<Vec<u8>>, DecompressError> {
        let out = match self {
            Compressor::Zstd => match bound {
                Bound::Exact(total) => zstd_frame::decode_exact(encoded, total)?,
                Bound::AtMost(limit) => {
                    zstd_frame::check_claim(encoded, limit)?;
                    let decoder = zstd_frame::stream(encoded, limit)?;
                    inflate("zstd", decoder, bound)?
                }
            },
            Compressor::Gzip => inflate("gzip", flate2::read::GzDecoder::new(encoded), bound)?,
            Compressor::Zlib => match bound {
                Bound::Exact(total) => inflate_zlib_exact(encoded, total)?,
                Bound::AtMost(_) => {
                    inflate("zlib", flate2::read::ZlibDecoder::new(encoded), bound)?
                }
            },
            Compressor::Bz2 => inflate("bz2", bzip2::read::BzDecoder::new(encoded), bound)?,
            Compressor::Blosc => {
                check_blosc_claim(encoded, bound)?;
                return Ok(None);
            }
        };
        Ok(Some(out))
    }
}

/// Checks that the blosc frame `encoded` claims what `bound` allows (its header's `nbytes`,
/// what blosc allocates and decompresses into).
pub(crate) fn check_blosc_claim(encoded: &[u8], bound: Bound) -> Result<(), DecompressError> {
    let Some(header) = encoded.get(..16) else {
        return Err(DecompressError::BloscHeader { len: encoded.len() });
    };
    let claimed = u64::from(u32::from_le_bytes([
        header[4], header[5], header[6], header[7],
    ]));
    let (fits, expected) = match bound {
        Bound::Exact(n) => (claimed == n as u64, n.to_string()),
        Bound::AtMost(n) => (claimed <= n as u64, format!("at most {n}")),
    };
    if !fits {
        return Err(DecompressError::BloscClaim { claimed, expected });
    }
    Ok(())
}

thread_local! {
    /// Each decoding thread's libdeflate decompressor (its tables, made once).
    static INFLATER: RefCell<libdeflater::Decompressor> =
        RefCell::new(libdeflater::Decompressor::new());
}

/// A zlib stream that inflates to exactly `total` bytes (a chunk of fixed-size elements:
/// netCDF-4 and HDF5 deflate), inflated in one call by libdeflate into a buffer of that size
/// (1.76x zlib-rs through flate2 on the netCDF-4 benchmark's chunks). As `inflate`: a stream
/// that would make more stops at `total` bytes, and the Adler-32 trailer is checked.
fn inflate_zlib_exact(encoded: &[u8], total: usize) -> Result<Vec<u8>, DecompressError> {
    let codec = "zlib";
    let mut out = vec![0u8; total];
    let made = INFLATER.with(|inflater| inflater.borrow_mut().zlib_decompress(encoded, &mut out));
    match made {
        Ok(got) if got == total => Ok(out),
        Ok(got) => Err(DecompressError::TooShort {
            codec,
            got,
            expected: total,
        }),
        Err(libdeflater::DecompressionError::InsufficientSpace) => Err(DecompressError::TooLong {
            codec,
            expected: total,
        }),
        Err(libdeflater::DecompressionError::BadData) => Err(DecompressError::Corrupt {
            codec,
            source: std::io::Error::new(ErrorKind::InvalidData, "invalid deflate data"),
        }),
    }
}

/// Reads `reader` into a buffer of no more than `bound`'s bytes, then checks that nothing
/// follows (which also makes the decoder check the stream's trailer: gzip's CRC and size,
/// zlib's Adler-32, bz2's CRC).
fn inflate(
    codec: &'static str,
    mut reader: impl Read,
    bound: Bound,
) -> Result<Vec<u8>, DecompressError> {
    let corrupt = |source| DecompressError::Corrupt { codec, source };
    let limit = bound.limit();
    // A buffer of the exact size, or one that grows as the stream does, up to the limit.
    let mut out = match bound {
        Bound::Exact(n) => vec![0u8; n],
        Bound::AtMost(n) => vec![0u8; n.min(1 << 20)],
    };
    let mut filled = 0;
    loop {
        if filled == out.len() {
            if out.len() == limit {
                break;
            }
            let grown = out.len().saturating_mul(2).min(limit);
            out.resize(grown, 0);
        }
        match reader.read(&mut out[filled..]) {
            Ok(0) => break,
            Ok(n) => filled += n,
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            Err(e) => return Err(corrupt(e)),
        }
    }
    if let Bound::Exact(expected) = bound {
        if filled < expected {
            return Err(DecompressError::TooShort {
                codec,
                got: filled,
                expected,
            });
        }
    }
    let mut probe = [0u8; 1];
    loop {
        match reader.read(&mut probe) {
            Ok(0) => {
                out.truncate(filled);
                return Ok(out);
            }
            Ok(_) => {
                return Err(DecompressError::TooLong {
                    codec,
                    expected: limit,
                })
            }
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            Err(e) => return Err(corrupt(e)),
        }
    }
}

/// `data` compressed by `codec` (a zstd frame that declares its size, or not): what the
/// tests and the generated inputs decompress.
#[cfg(test)]
pub(crate) fn compress(codec: Compressor, data: &[u8], declare_size: bool) -> Vec<u8> {
    use std::io::Write;
    match codec {
        Compressor::Gzip => {
            let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
            e.write_all(data).unwrap();
            e.finish().unwrap()
        }
        Compressor::Zlib => {
            let mut e = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::fast());
            e.write_all(data).unwrap();
            e.finish().unwrap()
        }
        Compressor::Bz2 => {
            let mut e = bzip2::write::BzEncoder::new(Vec::new(), bzip2::Compression::fast());
            e.write_all(data).unwrap();
            e.finish().unwrap()
        }
        Compressor::Zstd => {
            let mut e = zstd::stream::Encoder::new(Vec::new(), 1).unwrap();
            e.include_contentsize(declare_size).unwrap();
            if declare_size {
                e.set_pledged_src_size(Some(data.len() as u64)).unwrap();
            }
            e.write_all(data).unwrap();
            e.finish().unwrap()
        }
        Compressor::Blosc => unreachable!("blosc frames are only checked"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const STREAMS: [Compressor; 4] = [
        Compressor::Gzip,
        Compressor::Zlib,
        Compressor::Bz2,
        Compressor::Zstd,
    ];

    fn run(codec: Compressor, encoded: &[u8], bound: Bound) -> Result<Vec<u8>, String> {
        codec
            .decompress(encoded, bound)
            .map(Option::unwrap)
            .map_err(|e| e.to_string())
    }

    #[test]
    fn streams_inflate_into_exactly_the_chunk_or_less() {
        let data: Vec<u8> = (0..100_000u32)
            .flat_map(|i| (i % 251).to_le_bytes())
            .collect();
        for codec in STREAMS {
            let encoded = compress(codec, &data, false);
            assert_eq!(
                run(codec, &encoded, Bound::Exact(data.len())).unwrap(),
                data
            );
            assert_eq!(
                run(codec, &encoded, Bound::AtMost(data.len())).unwrap(),
                data
            );
            assert_eq!(run(codec, &encoded, Bound::AtMost(1 << 30)).unwrap(), data);
            let err = run(codec, &encoded, Bound::Exact(data.len() + 1)).unwrap_err();
            assert!(
                err.contains("400000 bytes, expected 400001"),
                "{codec:?}: {err}"
            );
            let err = run(codec, &encoded, Bound::AtMost(data.len() - 1)).unwrap_err();
            assert!(
                err.contains("more than the 399999 bytes expected"),
                "{codec:?}: {err}"
            );
        }
        // A stream longer than the chunk of known size stops at it.
        for codec in STREAMS {
            let encoded = compress(codec, &data, false);
            let err = run(codec, &encoded, Bound::Exact(data.len() - 1)).unwrap_err();
            assert!(
                err.contains("more than the 399999 bytes"),
                "{codec:?}: {err}"
            );
        }
        // A flipped byte in zlib's Adler-32 trailer, or in its data, is caught.
        let zlib = compress(Compressor::Zlib, &data, false);
        for at in [zlib.len() - 2, zlib.len() / 2] {
            let mut bad = zlib.clone();
            bad[at] ^= 1;
            let err = run(Compressor::Zlib, &bad, Bound::Exact(data.len())).unwrap_err();
            assert!(err.contains("zlib stream is corrupt"), "{at}: {err}");
        }
        // A flipped byte in the trailer (gzip's CRC-32) is caught once the data is read.
        let mut bad = compress(Compressor::Gzip, &data, false);
        let at = bad.len() - 6;
        bad[at] ^= 1;
        let err = run(Compressor::Gzip, &bad, Bound::Exact(data.len())).unwrap_err();
        assert!(err.contains("gzip stream is corrupt"), "{err}");
    }

    #[test]
    fn bombs_stop_when_the_chunk_is_full() {
        // 64 MiB of zeros in well under 1 MiB, where 1,000 bytes are expected.
        let zeros = vec![0u8; 64 << 20];
        for codec in STREAMS {
            let encoded = compress(codec, &zeros, false);
            assert!(encoded.len() < 1 << 20, "{codec:?}: {}", encoded.len());
            for bound in [Bound::Exact(1000), Bound::AtMost(1000)] {
                let err = run(codec, &encoded, bound).unwrap_err();
                assert!(
                    err.contains("more than the 1000 bytes expected"),
                    "{codec:?}: {err}"
                );
            }
        }
    }

    #[test]
    fn blosc_headers_must_claim_the_chunk() {
        // version 2, lz 1, flags, typesize 8, nbytes, blocksize, cbytes.
        let mut header = vec![2, 1, 1, 8];
        header.extend_from_slice(&(1u32 << 31).to_le_bytes());
        header.extend_from_slice(&4096u32.to_le_bytes());
        header.extend_from_slice(&32u32.to_le_bytes());
        let err = check_blosc_claim(&header, Bound::Exact(1000))
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("claims 2147483648 bytes, expected 1000"),
            "{err}"
        );
        let err = check_blosc_claim(&header, Bound::AtMost(1000))
            .unwrap_err()
            .to_string();
        assert!(err.contains("expected at most 1000"), "{err}");
        header[4..8].copy_from_slice(&1000u32.to_le_bytes());
        assert!(check_blosc_claim(&header, Bound::Exact(1000)).is_ok());
        assert!(check_blosc_claim(&header, Bound::AtMost(4000)).is_ok());
        assert!(check_blosc_claim(&header[..10], Bound::Exact(1000)).is_err());
    }
}
