//! Decompressing the zstd frame of a `bytes` + `zstd` chunk, bounded by the chunk's decoded
//! size: whole into one buffer of exactly that size, or only its front. zstd decodes a frame
//! from its start, so a selection that ends before its chunk does needs only the bytes up to
//! its end (on average half of a chunk a range starts or ends in).
//!
//! zarrs' zstd codec allocates what a frame's header claims (a 20-byte frame may claim 2^40
//! bytes) or, without a claim, grows its buffer as long as the frame decompresses (a 64 KiB
//! bomb becomes gigabytes); here no more than the chunk's size is ever made.

use std::io::Read;

/// Why the front of a zstd chunk could not be read.
#[derive(Debug, thiserror::Error)]
pub(crate) enum ZstdFrameError {
    #[error("zstd frame decompresses to {declared} bytes, expected {expected}")]
    ContentSize { declared: u64, expected: usize },
    #[error("zstd frame claims {declared} bytes, more than the {limit} bytes expected")]
    ClaimTooLarge { declared: u64, limit: usize },
    #[error("zstd frame decompresses to more than the {expected} bytes expected")]
    TooLong { expected: usize },
    #[error("zstd frame decompresses to {got} bytes, expected {expected}")]
    TooShort { got: usize, expected: usize },
    #[error("not a zstd frame: its header is unreadable")]
    Header,
    #[error("zstd frame ends at byte {end}, but the chunk holds {len} bytes")]
    TrailingBytes { end: usize, len: usize },
    #[error("zstd frame is truncated or corrupt")]
    Truncated,
    #[error("zstd decoder: {0}")]
    Decoder(#[source] std::io::Error),
    #[error("zstd frame fails before byte {len}: {source}")]
    Short {
        len: usize,
        #[source]
        source: std::io::Error,
    },
}

/// The whole frame `encoded`, which must decompress to exactly `total` bytes, into one buffer
/// of that capacity: a frame that claims or makes more is an error, with nothing allocated
/// beyond it (decompressed in one call, into the buffer itself: no window is allocated).
pub(crate) fn decode_exact(encoded: &[u8], total: usize) -> Result<Vec<u8>, ZstdFrameError> {
    check_frame(encoded, total)?;
    let mut out = Vec::with_capacity(total);
    let mut decompressor = zstd::bulk::Decompressor::new().map_err(ZstdFrameError::Decoder)?;
    match decompressor.decompress_to_buffer(encoded, &mut out) {
        Ok(got) if got == total => Ok(out),
        Ok(got) => Err(ZstdFrameError::TooShort {
            got,
            expected: total,
        }),
        // zstd's "destination buffer is too small": the frame goes on past `total`.
        Err(e) if e.to_string().contains("too small") => {
            Err(ZstdFrameError::TooLong { expected: total })
        }
        Err(e) => Err(ZstdFrameError::Decoder(e)),
    }
}

/// The first `len` bytes of the zstd frame `encoded`, which must decompress to `total` bytes,
/// or `None` when the whole frame must be decompressed anyway: `len` reaches its end, the
/// frame carries a content checksum (verified only at the end of the frame), or its header
/// does not say its size (only decompressing it all tells whether it makes `total` bytes).
pub(crate) fn decode_prefix(
    encoded: &[u8],
    len: usize,
    total: usize,
) -> Result<Option<Vec<u8>>, ZstdFrameError> {
    if len >= total || has_checksum(encoded) {
        return Ok(None);
    }
    if !check_frame(encoded, total)? {
        return Ok(None);
    }
    let mut decoder = stream(encoded, total)?;
    let mut out = vec![0; len];
    decoder
        .read_exact(&mut out)
        .map_err(|source| ZstdFrameError::Short { len, source })?;
    Ok(Some(out))
}

/// A streaming decoder of `encoded`, whose output is at most `limit` bytes: the window a frame
/// may ask for is as large as that (a frame of `limit` bytes needs no more), between 8 MiB
/// (what writers that did not say the size use) and zstd's own 128 MiB.
pub(crate) fn stream(
    encoded: &[u8],
    limit: usize,
) -> Result<zstd::stream::read::Decoder<'static, &[u8]>, ZstdFrameError> {
    let mut decoder =
        zstd::stream::read::Decoder::with_buffer(encoded).map_err(ZstdFrameError::Decoder)?;
    let window_log = usize::BITS - limit.max(1).next_power_of_two().leading_zeros() - 1;
    decoder
        .window_log_max(window_log.clamp(23, 27))
        .map_err(ZstdFrameError::Decoder)?;
    Ok(decoder)
}

/// Checks that the first frame of `encoded`, if its header declares its size, declares no more
/// than `limit` bytes (a frame may not say; it is then bounded as it streams).
pub(crate) fn check_claim(encoded: &[u8], limit: usize) -> Result<(), ZstdFrameError> {
    match zstd::zstd_safe::get_frame_content_size(encoded) {
        Ok(Some(n)) if n > limit as u64 => {
            Err(ZstdFrameError::ClaimTooLarge { declared: n, limit })
        }
        Ok(_) => Ok(()),
        Err(_) => Err(ZstdFrameError::Header),
    }
}

/// Checks what the frame's header says before anything is decompressed: its content size, if
/// declared, is `total`, and the frame (its block headers walked, cheaply) spans `encoded`
/// exactly, so a chunk cut short or followed by other bytes is an error. Returns whether the
/// header declares the content size.
fn check_frame(encoded: &[u8], total: usize) -> Result<bool, ZstdFrameError> {
    let declared = match zstd::zstd_safe::get_frame_content_size(encoded) {
        Ok(Some(n)) if n != total as u64 => {
            return Err(ZstdFrameError::ContentSize {
                declared: n,
                expected: total,
            })
        }
        Ok(declared) => declared.is_some(),
        Err(_) => return Err(ZstdFrameError::Header),
    };
    match zstd::zstd_safe::find_frame_compressed_size(encoded) {
        Ok(n) if n == encoded.len() => Ok(declared),
        Ok(n) => Err(ZstdFrameError::TrailingBytes {
            end: n,
            len: encoded.len(),
        }),
        Err(_) => Err(ZstdFrameError::Truncated),
    }
}

/// The content checksum flag: bit 2 of the frame header descriptor, which follows the 4-byte
/// magic number (RFC 8878, 3.1.1.1.1). A frame too short to say counts as checksummed, so it
/// is decompressed whole and its error reported from there.
fn has_checksum(encoded: &[u8]) -> bool {
    encoded
        .get(4)
        .is_none_or(|descriptor| descriptor & 0b100 != 0)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn data() -> Vec<u8> {
        (0..1_000_000u32)
            .flat_map(|i| (i % 977).to_le_bytes())
            .collect()
    }

    fn compress(data: &[u8], checksum: bool) -> Vec<u8> {
        let mut encoder = zstd::stream::Encoder::new(Vec::new(), 3).unwrap();
        encoder.include_checksum(checksum).unwrap();
        encoder
            .set_pledged_src_size(Some(data.len() as u64))
            .unwrap();
        std::io::Write::write_all(&mut encoder, data).unwrap();
        encoder.finish().unwrap()
    }

    #[test]
    fn a_prefix_is_the_front_of_the_whole() {
        let data = data();
        let encoded = compress(&data, false);
        let prefix = decode_prefix(&encoded, 1_234_567, data.len())
            .unwrap()
            .unwrap();
        assert_eq!(prefix, &data[..1_234_567]);
        // The whole chunk is left to the codec chain.
        assert!(matches!(
            decode_prefix(&encoded, data.len(), data.len()),
            Ok(None)
        ));
    }

    #[test]
    fn checksummed_frames_are_decompressed_whole() {
        let data = data();
        assert!(matches!(
            decode_prefix(&compress(&data, true), 10, data.len()),
            Ok(None)
        ));
    }

    #[test]
    fn frames_of_the_wrong_size_or_cut_short_are_errors() {
        let data = data();
        let encoded = compress(&data, false);
        let err = decode_prefix(&encoded, 10, data.len() + 1)
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("decompresses to 4000000 bytes, expected 4000001"),
            "{err}"
        );
        let err = decode_prefix(&encoded[..encoded.len() / 4], 10, data.len())
            .unwrap_err()
            .to_string();
        assert!(err.contains("truncated or corrupt"), "{err}");
        let mut longer = encoded.clone();
        longer.push(0);
        let err = decode_prefix(&longer, 10, data.len())
            .unwrap_err()
            .to_string();
        assert!(err.contains("but the chunk holds"), "{err}");
        assert!(decode_prefix(b"not zstd", 1, 100).is_err());
    }

    /// A frame without a content size in its header, as streaming writers make.
    fn compress_unsized(data: &[u8]) -> Vec<u8> {
        let mut encoder = zstd::stream::Encoder::new(Vec::new(), 1).unwrap();
        encoder.include_contentsize(false).unwrap();
        std::io::Write::write_all(&mut encoder, data).unwrap();
        encoder.finish().unwrap()
    }

    #[test]
    fn whole_frames_decompress_into_exactly_the_chunk() {
        let data = data();
        for encoded in [
            compress(&data, false),
            compress(&data, true),
            compress_unsized(&data),
        ] {
            assert_eq!(decode_exact(&encoded, data.len()).unwrap(), data);
        }
        // Without a size in the header the front is not taken: only the whole frame tells.
        let unsized_frame = compress_unsized(&data);
        assert!(matches!(
            decode_prefix(&unsized_frame, 10, data.len()),
            Ok(None)
        ));
    }

    #[test]
    fn bombs_are_errors_before_more_than_the_chunk_is_made() {
        // 64 MiB of zeros in a few KiB, where a chunk of 1,000 bytes is expected: with its size
        // in the header (refused from the header), and without (refused when the buffer of
        // 1,000 bytes is full).
        let zeros = vec![0u8; 64 << 20];
        let sized = compress(&zeros, false);
        let unsized_bomb = compress_unsized(&zeros);
        assert!(unsized_bomb.len() < 64 << 10, "{}", unsized_bomb.len());
        let err = decode_exact(&sized, 1000).unwrap_err().to_string();
        assert!(
            err.contains("decompresses to 67108864 bytes, expected 1000"),
            "{err}"
        );
        let err = decode_exact(&unsized_bomb, 1000).unwrap_err().to_string();
        assert!(err.contains("more than the 1000 bytes expected"), "{err}");
        // A 16-byte frame whose header claims 2^40 bytes: refused, nothing allocated.
        let mut claim = vec![0x28, 0xb5, 0x2f, 0xfd, 0xe0];
        claim.extend_from_slice(&(1u64 << 40).to_le_bytes());
        claim.extend_from_slice(&[1, 0, 0]);
        assert_eq!(
            zstd::zstd_safe::get_frame_content_size(&claim).unwrap(),
            Some(1 << 40)
        );
        for err in [
            decode_exact(&claim, 1000).unwrap_err().to_string(),
            decode_prefix(&claim, 10, 1000).unwrap_err().to_string(),
        ] {
            assert!(err.contains("decompresses to 1099511627776 bytes"), "{err}");
        }
        // Fewer bytes than the chunk holds.
        let err = decode_exact(&compress_unsized(&[7; 10]), 1000)
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("decompresses to 10 bytes, expected 1000"),
            "{err}"
        );
    }
}
