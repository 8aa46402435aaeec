//! zarrs 0.23's shuffle decode (its loop, as written) against a loop for 2-byte elements,
//! on 200 MB (200 chunks of 1 MB), one thread, best of 5.
use std::time::Instant;

fn zarrs_decode(encoded: &[u8], elementsize: usize) -> Vec<u8> {
    let mut decoded_value = encoded.to_vec();
    let count = decoded_value.len().div_ceil(elementsize);
    for i in 0..elementsize {
        let offset = i * count;
        for byte_index in 0..count {
            let j = byte_index * elementsize + i;
            decoded_value[j] = encoded[offset + byte_index];
        }
    }
    decoded_value
}

fn unshuffle2(encoded: &[u8]) -> Vec<u8> {
    let count = encoded.len() / 2;
    let (low, high) = encoded.split_at(count);
    let mut out = vec![0u8; encoded.len()];
    for ((o, &l), &h) in out.chunks_exact_mut(2).zip(low).zip(high) {
        o[0] = l;
        o[1] = h;
    }
    out
}

fn main() {
    let chunk: Vec<u8> = (0..1_000_000u32)
        .map(|i| (i.wrapping_mul(2654435761) >> 13) as u8)
        .collect();
    for (name, f) in [
        (
            "zarrs 0.23 shuffle decode",
            (|c: &[u8]| zarrs_decode(c, 2)) as fn(&[u8]) -> Vec<u8>,
        ),
        ("2-byte loop", unshuffle2 as fn(&[u8]) -> Vec<u8>),
    ] {
        let mut best = f64::MAX;
        for _ in 0..5 {
            let start = Instant::now();
            let mut check = 0u64;
            for _ in 0..200 {
                let out = f(&chunk);
                check = check.wrapping_add(out[12345] as u64);
            }
            best = best.min(start.elapsed().as_secs_f64());
            std::hint::black_box(check);
        }
        println!("{name:30} {best:.3} s for 200 MB");
    }
    assert_eq!(zarrs_decode(&chunk, 2), unshuffle2(&chunk));
}
