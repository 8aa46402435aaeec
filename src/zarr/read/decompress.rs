//! A chunk's compressor, when it is the one codec after `bytes`, run with its output bounded by
//! the chunk's decoded size. zarrs' codecs size their output by what the data says: gzip and
//! zlib inflate into a growing buffer (a 2 MiB gzip bomb becomes gigabytes), blosc allocates
//! what its header claims. Here gzip and zlib inflate into a buffer of exactly the chunk's size,
//! and a blosc header's claim is checked before zarrs decodes it. zstd: `zstd_frame.rs`.

use std::io::{ErrorKind, Read};

/// The one bytes-to-bytes codec of a `bytes` + compressor chain.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Compressor {
    Zstd,
    Gzip,
    Zlib,
    Blosc,
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
    BloscClaim { claimed: u64, expected: usize },
    #[error("blosc frame of {len} bytes is shorter than its 16-byte header")]
    BloscHeader { len: usize },
}

/// The gzip member `encoded`, which must inflate to exactly `total` bytes.
pub(crate) fn gunzip_exact(encoded: &[u8], total: usize) -> Result<Vec<u8>, DecompressError> {
    inflate_exact("gzip", flate2::read::GzDecoder::new(encoded), total)
}

/// The zlib stream `encoded`, which must inflate to exactly `total` bytes.
pub(crate) fn unzlib_exact(encoded: &[u8], total: usize) -> Result<Vec<u8>, DecompressError> {
    inflate_exact("zlib", flate2::read::ZlibDecoder::new(encoded), total)
}

/// Checks that the blosc frame `encoded` claims `total` bytes (its header's `nbytes`, what
/// blosc allocates and decompresses into).
pub(crate) fn check_blosc_claim(encoded: &[u8], total: usize) -> Result<(), DecompressError> {
    let Some(header) = encoded.get(..16) else {
        return Err(DecompressError::BloscHeader { len: encoded.len() });
    };
    let claimed = u64::from(u32::from_le_bytes([
        header[4], header[5], header[6], header[7],
    ]));
    if claimed != total as u64 {
        return Err(DecompressError::BloscClaim {
            claimed,
            expected: total,
        });
    }
    Ok(())
}

/// Reads `reader` into a buffer of `total` bytes, then checks that nothing follows (which also
/// makes the decoder check the stream's trailer: gzip's CRC and size, zlib's Adler-32).
fn inflate_exact(
    codec: &'static str,
    mut reader: impl Read,
    total: usize,
) -> Result<Vec<u8>, DecompressError> {
    let corrupt = |source| DecompressError::Corrupt { codec, source };
    let mut out = vec![0u8; total];
    let mut filled = 0;
    while filled < total {
        match reader.read(&mut out[filled..]) {
            Ok(0) => {
                return Err(DecompressError::TooShort {
                    codec,
                    got: filled,
                    expected: total,
                })
            }
            Ok(n) => filled += n,
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            Err(e) => return Err(corrupt(e)),
        }
    }
    let mut probe = [0u8; 1];
    loop {
        match reader.read(&mut probe) {
            Ok(0) => return Ok(out),
            Ok(_) => {
                return Err(DecompressError::TooLong {
                    codec,
                    expected: total,
                })
            }
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            Err(e) => return Err(corrupt(e)),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::io::Write;

    use super::*;

    fn gzip(data: &[u8]) -> Vec<u8> {
        let mut encoder = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        encoder.write_all(data).unwrap();
        encoder.finish().unwrap()
    }

    fn zlib(data: &[u8]) -> Vec<u8> {
        let mut encoder = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::fast());
        encoder.write_all(data).unwrap();
        encoder.finish().unwrap()
    }

    #[test]
    fn streams_inflate_into_exactly_the_chunk() {
        let data: Vec<u8> = (0..100_000u32)
            .flat_map(|i| (i % 251).to_le_bytes())
            .collect();
        assert_eq!(gunzip_exact(&gzip(&data), data.len()).unwrap(), data);
        assert_eq!(unzlib_exact(&zlib(&data), data.len()).unwrap(), data);
        let err = gunzip_exact(&gzip(&data), data.len() + 1)
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("inflates to 400000 bytes, expected 400001"),
            "{err}"
        );
        // A flipped byte in the trailer (gzip's CRC-32) is caught once the data is read.
        let mut bad = gzip(&data);
        let at = bad.len() - 6;
        bad[at] ^= 1;
        let err = gunzip_exact(&bad, data.len()).unwrap_err().to_string();
        assert!(err.contains("gzip stream is corrupt"), "{err}");
    }

    #[test]
    fn bombs_stop_when_the_chunk_is_full() {
        // 64 MiB of zeros in about 64 KiB, where 1,000 bytes are expected.
        let zeros = vec![0u8; 64 << 20];
        for (encoded, inflate) in [
            (gzip(&zeros), gunzip_exact as fn(&[u8], usize) -> _),
            (zlib(&zeros), unzlib_exact),
        ] {
            assert!(encoded.len() < 1 << 20, "{}", encoded.len());
            let err = inflate(&encoded, 1000).unwrap_err().to_string();
            assert!(err.contains("more than the 1000 bytes expected"), "{err}");
        }
    }

    #[test]
    fn blosc_headers_must_claim_the_chunk() {
        // version 2, lz 1, flags, typesize 8, nbytes, blocksize, cbytes.
        let mut header = vec![2, 1, 1, 8];
        header.extend_from_slice(&(1u32 << 31).to_le_bytes());
        header.extend_from_slice(&4096u32.to_le_bytes());
        header.extend_from_slice(&32u32.to_le_bytes());
        let err = check_blosc_claim(&header, 1000).unwrap_err().to_string();
        assert!(
            err.contains("claims 2147483648 bytes, expected 1000"),
            "{err}"
        );
        header[4..8].copy_from_slice(&1000u32.to_le_bytes());
        assert!(check_blosc_claim(&header, 1000).is_ok());
        assert!(check_blosc_claim(&header[..10], 1000).is_err());
    }
}
