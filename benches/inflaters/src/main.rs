//! Inflaters on the netCDF-4 benchmark file's deflate chunks (issue 67, item 5): each chunk
//! inflated into a buffer of its known size (1,000,000 bytes), single-threaded, best of 5.
use std::io::Read;
use std::time::Instant;

const CHUNK: usize = 5 * 100 * 1000 * 2;

fn chunks(path: &str) -> Vec<Vec<u8>> {
    let bytes = std::fs::read(path).unwrap();
    let mut at = 0;
    let mut out = Vec::new();
    while at < bytes.len() {
        let len = u32::from_le_bytes(bytes[at..at + 4].try_into().unwrap()) as usize;
        out.push(bytes[at + 4..at + 4 + len].to_vec());
        at += 4 + len;
    }
    out
}

fn time(name: &str, chunks: &[Vec<u8>], mut inflate: impl FnMut(&[u8], &mut [u8])) {
    let mut out = vec![0u8; CHUNK];
    let mut best = f64::MAX;
    let mut check = 0u64;
    for _ in 0..5 {
        let start = Instant::now();
        check = 0;
        for c in chunks {
            inflate(c, &mut out);
            check = check.wrapping_add(out.iter().step_by(4099).map(|&b| b as u64).sum::<u64>());
        }
        best = best.min(start.elapsed().as_secs_f64());
    }
    let mb = (chunks.len() * CHUNK) as f64 / 1e6;
    println!(
        "{name:40} {best:.3} s  {:.0} MB/s  check {check}",
        mb / best
    );
}

fn main() {
    let chunks = chunks(&std::env::args().nth(1).unwrap_or("chunks.bin".into()));
    time("flate2 ZlibDecoder (zlib-rs), Read", &chunks, |c, out| {
        let mut d = flate2::read::ZlibDecoder::new(c);
        d.read_exact(out).unwrap();
        assert_eq!(d.read(&mut [0u8; 1]).unwrap(), 0);
    });
    time(
        "flate2 Decompress (zlib-rs), one call",
        &chunks,
        |c, out| {
            let mut d = flate2::Decompress::new(true);
            let s = d
                .decompress(c, out, flate2::FlushDecompress::Finish)
                .unwrap();
            assert_eq!(s, flate2::Status::StreamEnd);
            assert_eq!(d.total_out() as usize, out.len());
        },
    );
    let mut lib = libdeflater::Decompressor::new();
    time("libdeflater (libdeflate 1.x)", &chunks, |c, out| {
        let n = lib.zlib_decompress(c, out).unwrap();
        assert_eq!(n, out.len());
    });
    #[cfg(feature = "libz-ng-sys")]
    time(
        "zlib-ng (libz-ng-sys), uncompress",
        &chunks,
        |c, out| unsafe {
            let mut len: usize = out.len();
            let r = libz_ng_sys::uncompress(out.as_mut_ptr(), &mut len, c.as_ptr(), c.len() as _);
            assert_eq!(r, 0);
            assert_eq!(len as usize, out.len());
        },
    );
}
