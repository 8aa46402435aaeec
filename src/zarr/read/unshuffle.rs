//! The shuffle filter undone (HDF5's shuffle, `numcodecs.shuffle`): a chunk stored as the
//! first bytes of every element, then the second bytes, ... is put back element by element.
//! zarrs 0.23 copies the chunk, then scatters it a byte at a time with an index computed
//! per byte; here the common widths are one pass that gathers a whole element from its
//! planes (12× zarrs' loop for 2-byte elements on the netCDF-4 benchmark's chunks:
//! `benches/inflaters`, bin `unshuffle`).

/// `encoded` (a multiple of `width` bytes, its planes one after another) unshuffled.
pub(crate) fn unshuffle(encoded: &[u8], width: usize) -> Result<Vec<u8>, String> {
    if width == 0 || !encoded.len().is_multiple_of(width) {
        return Err(format!(
            "a shuffled chunk of {} bytes is not made of {width}-byte elements",
            encoded.len()
        ));
    }
    Ok(match width {
        1 => encoded.to_vec(),
        2 => planes::<2>(encoded),
        4 => planes::<4>(encoded),
        8 => planes::<8>(encoded),
        _ => any_width(encoded, width),
    })
}

/// Elements of `W` bytes, gathered from their `W` planes.
fn planes<const W: usize>(encoded: &[u8]) -> Vec<u8> {
    let count = encoded.len() / W;
    let planes: [&[u8]; W] = std::array::from_fn(|b| &encoded[b * count..(b + 1) * count]);
    let mut out = vec![0u8; encoded.len()];
    for (i, element) in out.chunks_exact_mut(W).enumerate() {
        for (byte, plane) in element.iter_mut().zip(&planes) {
            *byte = plane[i];
        }
    }
    out
}

/// Elements of any width, a plane at a time.
fn any_width(encoded: &[u8], width: usize) -> Vec<u8> {
    let count = encoded.len() / width;
    let mut out = vec![0u8; encoded.len()];
    for (b, plane) in encoded.chunks_exact(count.max(1)).enumerate().take(width) {
        for (i, &byte) in plane.iter().enumerate() {
            out[i * width + b] = byte;
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Shuffles `decoded` as HDF5 and numcodecs do: byte `b` of element `i` at `b * n + i`.
    fn shuffle(decoded: &[u8], width: usize) -> Vec<u8> {
        let n = decoded.len() / width;
        let mut out = vec![0u8; decoded.len()];
        for i in 0..n {
            for b in 0..width {
                out[b * n + i] = decoded[i * width + b];
            }
        }
        out
    }

    #[test]
    fn every_width_is_put_back() {
        for width in [1, 2, 3, 4, 5, 8, 16] {
            for elements in [0, 1, 7, 1000] {
                let decoded: Vec<u8> = (0..width * elements)
                    .map(|i| (i as u32).wrapping_mul(2_654_435_761).to_le_bytes()[2])
                    .collect();
                let shuffled = shuffle(&decoded, width);
                assert_eq!(
                    unshuffle(&shuffled, width).unwrap(),
                    decoded,
                    "{width} × {elements}"
                );
            }
        }
    }

    #[test]
    fn a_length_that_is_not_whole_elements_is_an_error() {
        let err = unshuffle(&[1, 2, 3], 2).unwrap_err();
        assert!(
            err.contains("3 bytes is not made of 2-byte elements"),
            "{err}"
        );
        assert!(unshuffle(&[1, 2], 0).is_err());
    }
}
