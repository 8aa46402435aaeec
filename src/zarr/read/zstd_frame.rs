//! Decompressing only the front of a zstd-compressed chunk. zstd decodes a frame from its
//! start, so a selection that ends before its chunk does needs only the bytes up to its end
//! (on average half of a chunk a range starts or ends in).

use std::io::Read;

/// Why the front of a zstd chunk could not be read.
#[derive(Debug, thiserror::Error)]
pub(crate) enum ZstdFrontError {
    #[error("zstd frame decompresses to {declared} bytes, expected {expected}")]
    ContentSize { declared: u64, expected: usize },
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

/// The first `len` bytes of the zstd frame `encoded`, which must decompress to `total` bytes,
/// or `None` when the whole frame must be decompressed anyway: `len` reaches its end, or the
/// frame carries a content checksum (verified only at the end of the frame).
pub(crate) fn decode_prefix(
    encoded: &[u8],
    len: usize,
    total: usize,
) -> Result<Option<Vec<u8>>, ZstdFrontError> {
    if len >= total || has_checksum(encoded) {
        return Ok(None);
    }
    match zstd::zstd_safe::get_frame_content_size(encoded) {
        Ok(Some(n)) if n != total as u64 => {
            return Err(ZstdFrontError::ContentSize {
                declared: n,
                expected: total,
            })
        }
        Ok(_) => {}
        Err(_) => return Err(ZstdFrontError::Header),
    }
    // The frame's blocks are not all decompressed, but their headers are walked (cheaply), so
    // a chunk cut short or followed by other bytes is an error as it is for a whole read.
    match zstd::zstd_safe::find_frame_compressed_size(encoded) {
        Ok(n) if n == encoded.len() => {}
        Ok(n) => {
            return Err(ZstdFrontError::TrailingBytes {
                end: n,
                len: encoded.len(),
            })
        }
        Err(_) => return Err(ZstdFrontError::Truncated),
    }
    let mut decoder =
        zstd::stream::read::Decoder::with_buffer(encoded).map_err(ZstdFrontError::Decoder)?;
    let mut out = vec![0; len];
    decoder
        .read_exact(&mut out)
        .map_err(|source| ZstdFrontError::Short { len, source })?;
    Ok(Some(out))
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
}
