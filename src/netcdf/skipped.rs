//! Chunks HDF5 stored with optional filters skipped. A filter added as optional (blosc,
//! zstd and others from hdf5plugin; deflate as `H5Pset_deflate` adds it) may fail on a chunk
//! it cannot shrink, and HDF5 then stores the chunk without it, marking the filter in the
//! chunk's mask. A Zarr array has one codec chain for every chunk, so such a chunk is given
//! to the chain as if the filter had run: its bytes wrapped in the filter's own format
//! without compression (a stored zlib stream, a raw zstd frame, a copied blosc or lz4
//! block), which
//! costs a copy of a chunk that was incompressible anyway.

use std::io::Write;

use zarrs::storage::Bytes;

/// The bytes of a chunk stored with the filters of `mask` (bit i: filter i of `filters`, the
/// HDF5 filter ids in the order they are applied) skipped, as the variable's codecs decode
/// them. Only filters at the end of the pipeline can be made up for (a filter after a
/// skipped one ran on bytes that are not stored), which is where compressors are.
pub(crate) fn restore(
    filters: &[u16],
    mask: u32,
    mut bytes: Bytes,
    typesize: u64,
) -> Result<Bytes, String> {
    if filters.len() < 32 && mask >> filters.len() != 0 {
        return Err(format!(
            "a chunk's filter mask {mask:#x} names filters the pipeline {filters:?} does not have"
        ));
    }
    let skipped = |i: usize| i < 32 && mask & (1 << i) != 0;
    let first = (0..filters.len()).find(|&i| skipped(i));
    let Some(first) = first else {
        return Ok(bytes);
    };
    if (first..filters.len()).any(|i| !skipped(i)) {
        return Err(format!(
            "a chunk was stored with filters {mask:#x} of the pipeline {filters:?} skipped \
             but later ones applied, which ndfusion does not read"
        ));
    }
    for &id in &filters[first..] {
        bytes = wrap(id, &bytes, typesize)?.into();
    }
    Ok(bytes)
}

/// `raw` as filter `id` would leave it, uncompressed.
fn wrap(id: u16, raw: &[u8], typesize: u64) -> Result<Vec<u8>, String> {
    let io = |e: std::io::Error| format!("wrapping a chunk stored unfiltered: {e}");
    match id {
        // deflate: a zlib stream of stored blocks.
        1 => {
            let mut z = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::none());
            z.write_all(raw).map_err(io)?;
            z.finish().map_err(io)
        }
        32015 => zstd::bulk::compress(raw, 1).map_err(io),
        307 => {
            let mut z = bzip2::write::BzEncoder::new(Vec::new(), bzip2::Compression::fast());
            z.write_all(raw).map_err(io)?;
            z.finish().map_err(io)
        }
        32001 => blosc_copy(raw, typesize),
        // szip (`hdf5_codecs.rs`): its codec's header for a stored chunk.
        4 => Ok([&super::hdf5_codecs::SZIP_STORED[..], raw].concat()),
        // lz4 (`hdf5_codecs.rs`): one block, stored as it is.
        32004 => {
            let len = u32::try_from(raw.len()).map_err(|_| "a chunk larger than 4 GiB")?;
            let mut out = Vec::with_capacity(raw.len() + 16);
            out.extend_from_slice(&u64::from(len).to_be_bytes());
            out.extend_from_slice(&len.max(1).to_be_bytes());
            out.extend_from_slice(&len.to_be_bytes());
            out.extend_from_slice(raw);
            Ok(out)
        }
        other => Err(format!(
            "a chunk was stored with HDF5 filter {other} skipped, which ndfusion cannot make up for"
        )),
    }
}

/// A blosc (version 1 format) frame holding `raw` copied, not compressed ("memcpyed").
fn blosc_copy(raw: &[u8], typesize: u64) -> Result<Vec<u8>, String> {
    let len = u32::try_from(raw.len())
        .ok()
        .filter(|n| n.checked_add(16).is_some())
        .ok_or("a chunk larger than a blosc frame holds")?;
    let mut out = Vec::with_capacity(raw.len() + 16);
    // version 2, lz version 1, flags: memcpyed (0x02), no shuffle; typesize (1..255).
    out.extend_from_slice(&[2, 1, 0x02, typesize.clamp(1, 255) as u8]);
    out.extend_from_slice(&len.to_le_bytes()); // nbytes
    out.extend_from_slice(&len.max(1).to_le_bytes()); // blocksize
    out.extend_from_slice(&(len + 16).to_le_bytes()); // cbytes
    out.extend_from_slice(raw);
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_trailing_filters_are_made_up_for() {
        let raw = Bytes::from_static(b"abcdefgh");
        // Nothing skipped: the bytes as they are.
        assert_eq!(restore(&[2, 1], 0, raw.clone(), 2).unwrap(), raw);
        // Deflate (filter 1 of shuffle, deflate) skipped: a zlib stream of the bytes.
        let zlib = restore(&[2, 1], 0b10, raw.clone(), 2).unwrap();
        let mut back = Vec::new();
        std::io::Read::read_to_end(&mut flate2::read::ZlibDecoder::new(&zlib[..]), &mut back)
            .unwrap();
        assert_eq!(back, b"abcdefgh");
        // Shuffle skipped but deflate applied: not readable.
        let err = restore(&[2, 1], 0b01, raw.clone(), 2).unwrap_err();
        assert!(err.contains("later ones applied"), "{err}");
        // A mask naming a filter the pipeline does not have.
        assert!(restore(&[1], 0b110, raw.clone(), 2).is_err());
        let zstd = restore(&[32015], 1, raw.clone(), 1).unwrap();
        assert_eq!(zstd::bulk::decompress(&zstd, 8).unwrap(), b"abcdefgh");
        let blosc = restore(&[32001], 1, raw, 4).unwrap();
        assert_eq!(blosc.len(), 24);
        assert_eq!(&blosc[16..], b"abcdefgh");
    }
}
