//! Generated hostile inputs (issue 23): decompression bombs for each codec, shard indexes with
//! any entries, attribute floods, folder trees with symlinks, and coordinate shapes. Each
//! property checks an answer, not only that there is no panic: a decompressed chunk is its
//! data and its size or an error, a shard passes its check exactly when its entries lie
//! inside it, a flood is refused exactly past the limit, a tree's nodes are listed once each,
//! a coordinate opens exactly when it fits the limit. `PROPTEST_CASES` sets the cases (a few
//! dozen by default; the README's development section has the long run).

use std::borrow::Cow;
use std::num::NonZeroU64;
use std::path::Path;

use proptest::prelude::*;
use serde_json::{json, Map, Value};

use crate::limits::Limits;
use crate::zarr::collection::members::walk_local;
use crate::zarr::metadata::array_meta::parse_v3_value;
use crate::zarr::metadata::attributes::GlobalAttrs;
use crate::zarr::read::decompress::{check_blosc_claim, compress, Bound, Compressor};
use crate::zarr::read::shard_index::ShardIndex;

fn config() -> ProptestConfig {
    crate::proptest_config::config(32)
}

/// Data that compresses well (runs of one byte) or not at all (any bytes), of a length near
/// the expected size or far past it.
fn payload() -> impl Strategy<Value = Vec<u8>> {
    let len = prop_oneof![0usize..64, 900usize..1100, 4_000usize..20_000];
    (len, any::<u8>(), any::<bool>(), any::<u64>()).prop_map(|(len, byte, runs, seed)| {
        if runs {
            vec![byte; len]
        } else {
            // A cheap generator: the bytes of a running linear congruence.
            let mut x = seed | 1;
            (0..len)
                .map(|_| {
                    x = x
                        .wrapping_mul(6364136223846793005)
                        .wrapping_add(1442695040888963407);
                    (x >> 56) as u8
                })
                .collect()
        }
    })
}

/// A sharded uint8 array of one shard of 16 elements in 4 inner chunks, its index (at the
/// end, `bytes` only: entries unchecked by a checksum) of 4 x 16 bytes.
fn sharded_meta() -> crate::zarr::metadata::array_meta::ArrayMeta {
    parse_v3_value(
        "generated",
        json!({
            "zarr_format": 3, "node_type": "array", "shape": [16], "data_type": "uint8",
            "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": [16]}},
            "chunk_key_encoding": {"name": "default"}, "fill_value": 0,
            "codecs": [{"name": "sharding_indexed", "configuration": {
                "chunk_shape": [4], "codecs": [{"name": "bytes"}],
                "index_codecs": [{"name": "bytes", "configuration": {"endian": "little"}}],
                "index_location": "end"}}],
        }),
        Limits::default().attributes,
    )
    .unwrap()
}

/// An index entry: empty, inside a small shard, or anywhere up to the type's limits.
fn entry() -> impl Strategy<Value = (u64, u64)> {
    let word = prop_oneof![
        0u64..80,
        Just(u64::MAX),
        Just(u64::MAX - 1),
        Just(1u64 << 63),
        any::<u64>(),
    ];
    prop_oneof![
        Just((u64::MAX, u64::MAX)),
        (0u64..40, 0u64..8),
        (word.clone(), word),
    ]
}

/// A folder tree: `dirs` folders, each under an earlier one (folder 0 is the root); some are
/// Zarr nodes; symlinks from a folder to any folder (loops included).
#[derive(Debug, Clone)]
struct Tree {
    parents: Vec<usize>,
    nodes: Vec<bool>,
    links: Vec<(usize, usize)>,
}

fn tree() -> impl Strategy<Value = Tree> {
    (2usize..9).prop_flat_map(|dirs| {
        (
            prop::collection::vec(any::<prop::sample::Index>(), dirs - 1),
            prop::collection::vec(any::<bool>(), dirs),
            prop::collection::vec((0..dirs, 0..dirs), 0..5),
        )
            .prop_map(move |(parents, nodes, links)| Tree {
                parents: (parents.iter().enumerate())
                    .map(|(i, p)| p.index(i + 1))
                    .collect(),
                nodes,
                links,
            })
    })
}

impl Tree {
    /// Makes the tree under `root`; returns each folder's path. A node folder holds a
    /// `zarr.json` (its own folders are not entered, so a node's descendants are plain).
    fn make(&self, root: &Path) -> Vec<std::path::PathBuf> {
        let mut paths = vec![root.to_path_buf()];
        for (i, &p) in self.parents.iter().enumerate() {
            let path = paths[p].join(format!("d{}", i + 1));
            std::fs::create_dir(&path).unwrap();
            paths.push(path);
        }
        for (i, path) in paths.iter().enumerate() {
            if self.nodes[i] && i > 0 {
                std::fs::write(path.join("zarr.json"), "{}").unwrap();
            }
        }
        for (k, &(from, to)) in self.links.iter().enumerate() {
            let link = paths[from].join(format!("l{k}"));
            let _ = std::os::unix::fs::symlink(&paths[to], link);
        }
        paths
    }

    /// The node folders a walk from the root reaches: through plain folders and the links in
    /// them (a node's own folders are not entered), by canonical path.
    fn reachable_nodes(&self, paths: &[std::path::PathBuf]) -> Vec<std::path::PathBuf> {
        let mut seen = vec![false; paths.len()];
        let mut queue = vec![0];
        let mut nodes = Vec::new();
        while let Some(f) = queue.pop() {
            if std::mem::replace(&mut seen[f], true) {
                continue;
            }
            if f > 0 && self.nodes[f] {
                nodes.push(paths[f].canonicalize().unwrap());
                continue;
            }
            let children = (1..paths.len()).filter(|&c| self.parents[c - 1] == f);
            let links = (self.links.iter())
                .filter(|(from, _)| *from == f)
                .map(|&(_, to)| to);
            queue.extend(children.chain(links));
        }
        nodes.sort();
        nodes
    }
}

/// Opens `location` as a table; the row count or the error's text.
fn open_count(location: &str) -> Result<usize, String> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        let table = crate::ZarrTable::open(location)
            .await
            .map_err(|e| e.to_string())?;
        let ctx = crate::new_session_context();
        ctx.register_table("t", std::sync::Arc::new(table)).unwrap();
        let batches = (ctx
            .sql("SELECT x FROM t")
            .await
            .map_err(|e| e.to_string())?)
        .collect()
        .await
        .map_err(|e| e.to_string())?;
        Ok(batches.iter().map(|b| b.num_rows()).sum())
    })
}

proptest! {
    #![proptest_config(config())]

    /// Any stream of any codec, expected to make `expected` bytes: the data exactly when it
    /// is that long (or, bounded "at most", no longer), else an error; never more made.
    #[test]
    fn bombs_decompress_to_their_size_or_fail(
        codec in prop::sample::select(vec![
            Compressor::Zstd, Compressor::Gzip, Compressor::Zlib, Compressor::Bz2,
        ]),
        data in payload(),
        expected in prop_oneof![0usize..64, 900usize..1100],
        declare_size in any::<bool>(),
        exact in any::<bool>(),
    ) {
        let encoded = compress(codec, &data, declare_size);
        let bound = if exact { Bound::Exact(expected) } else { Bound::AtMost(expected) };
        let fits = if exact { data.len() == expected } else { data.len() <= expected };
        match codec.decompress(&encoded, bound) {
            Ok(out) => {
                prop_assert!(fits, "{codec:?}: {} bytes accepted for {bound:?}", data.len());
                prop_assert_eq!(out.unwrap(), data);
            }
            Err(e) => prop_assert!(!fits, "{codec:?}: {e}"),
        }
    }

    /// Any blosc header: accepted exactly when it claims the expected size.
    #[test]
    fn blosc_claims_are_checked(header in prop::collection::vec(any::<u8>(), 0..24), expected in 0usize..5000) {
        let claim = header.get(4..8).map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]));
        let ok = check_blosc_claim(&header, Bound::Exact(expected)).is_ok();
        prop_assert_eq!(ok, header.len() >= 16 && claim == Some(expected as u32));
    }

    /// A shard with any index entries: its check passes exactly when every entry that is not
    /// empty lies inside the shard's inner-chunk bytes; then zarrs decodes it without a panic.
    #[test]
    fn shard_indexes_pass_exactly_when_inside(
        chunks in prop::collection::vec(any::<u8>(), 0..48),
        entries in prop::collection::vec(entry(), 4),
    ) {
        let meta = sharded_meta();
        let index = ShardIndex::of(&meta).unwrap();
        let mut shard = chunks.clone();
        for (offset, length) in &entries {
            shard.extend_from_slice(&offset.to_le_bytes());
            shard.extend_from_slice(&length.to_le_bytes());
        }
        let inside = entries.iter().all(|&(offset, length)| {
            (offset == u64::MAX && length == u64::MAX)
                || offset.checked_add(length).is_some_and(|end| end <= chunks.len() as u64)
        });
        let checked = index.check_shard(&shard);
        prop_assert_eq!(checked.is_ok(), inside, "{:?}", checked);
        if inside {
            let array = crate::zarr::read::bounded_codecs::with_bounded_codecs(64 << 20, || {
                zarrs::array::Array::new_with_metadata(
                    std::sync::Arc::new(zarrs::storage::store::MemoryStore::new()),
                    "/",
                    meta.zarrs_metadata.clone(),
                )
            })
            .unwrap();
            let decoded = zarrs::array::ArrayToBytesCodecTraits::decode(
                &*array.codecs(),
                Cow::Owned(shard),
                &[NonZeroU64::new(16).unwrap()],
                array.data_type(),
                array.fill_value(),
                &zarrs::array::CodecOptions::default(),
            );
            if let Ok(bytes) = decoded {
                prop_assert_eq!(bytes.into_fixed().map(|b| b.len()).ok(), Some(16));
            }
        }
    }

    /// Attributes of any count near the limit: refused exactly past it; the union over
    /// members of many keys each is made (in time linear in the keys).
    #[test]
    fn attribute_floods_are_refused_exactly_past_the_limit(
        count in prop_oneof![0usize..50, 9_990usize..10_010],
        members in 1usize..4,
    ) {
        let attributes: Map<String, Value> =
            (0..count).map(|i| (format!("k{i}"), Value::from(i))).collect();
        let doc = json!({
            "zarr_format": 3, "node_type": "array", "shape": [1], "data_type": "uint8",
            "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": [1]}},
            "chunk_key_encoding": {"name": "default"}, "fill_value": 0,
            "codecs": [{"name": "bytes"}], "attributes": attributes.clone(),
        });
        let max = Limits::default().attributes;
        let parsed = parse_v3_value("generated", doc, max);
        prop_assert_eq!(parsed.is_ok(), count <= max, "{:?}", parsed.err());
        let named: Vec<(String, &Map<String, Value>)> =
            (0..members).map(|m| (format!("m{m}"), &attributes)).collect();
        let union = GlobalAttrs::union(&named).unwrap();
        prop_assert_eq!(union.is_some(), count > 0);
    }

    /// A folder tree with symlinks anywhere (loops too): `**` lists every node the plain
    /// folders reach, each once (by its canonical path), or refuses the walk past a limit.
    #[test]
    fn symlink_trees_list_each_node_once(tree in tree()) {
        let dir = tempfile::tempdir().unwrap();
        let paths = tree.make(dir.path());
        let pattern = format!("{}/**/*", dir.path().display());
        match walk_local(&pattern, &Limits::default(), &crate::zarr::node_table::NodeFormat::Zarr) {
            Ok(members) => {
                let mut canonical: Vec<_> = (members.iter())
                    .map(|m| Path::new(m).canonicalize().unwrap())
                    .collect();
                canonical.sort();
                let listed = canonical.len();
                canonical.dedup();
                prop_assert_eq!(listed, canonical.len(), "{:?}", members);
                prop_assert_eq!(canonical, tree.reachable_nodes(&paths));
            }
            Err(e) => prop_assert!(e.to_string().contains("NDFUSION_MAX_GLOB"), "{}", e),
        }
    }

    /// A dataset whose coordinate `x` (metadata only: no chunk stored) has any length: it
    /// opens, with that many rows, exactly when its values fit the coordinate limit; past it
    /// the error names the coordinate (or the document, for lengths no index holds).
    #[test]
    fn coordinate_shapes_open_exactly_within_the_limit(
        n in prop_oneof![1u64..2000, (1u64 << 27) + 1..u64::MAX / 2, Just(u64::MAX)],
    ) {
        let dir = tempfile::tempdir().unwrap();
        let group = dir.path();
        std::fs::write(
            group.join("zarr.json"),
            json!({"zarr_format": 3, "node_type": "group", "attributes": {}}).to_string(),
        )
        .unwrap();
        let chunk = n.min(1 << 20);
        for (name, dtype) in [("x", "float64"), ("v", "float32")] {
            std::fs::create_dir(group.join(name)).unwrap();
            let doc = json!({
                "zarr_format": 3, "node_type": "array", "shape": [n], "data_type": dtype,
                "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": [chunk]}},
                "chunk_key_encoding": {"name": "default"}, "fill_value": 1.5,
                "codecs": [{"name": "bytes", "configuration": {"endian": "little"}}],
                "dimension_names": ["x"], "attributes": {},
            });
            std::fs::write(group.join(name).join("zarr.json"), doc.to_string()).unwrap();
        }
        let fits = n.checked_mul(8).is_some_and(|b| b <= Limits::default().coordinate_bytes);
        match open_count(&group.to_string_lossy()) {
            Ok(rows) => {
                prop_assert!(fits, "{n}: opened");
                prop_assert_eq!(rows as u64, n);
            }
            Err(e) => {
                prop_assert!(!fits, "{n}: {e}");
                // The coordinate, or (a length past 2^63) the document that claims it.
                prop_assert!(e.contains("coordinate 'x'") || e.contains("zarr.json"), "{n}: {e}");
            }
        }
    }
}
