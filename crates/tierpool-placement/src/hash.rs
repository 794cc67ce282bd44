//! The fixed chunk -> partition hash. Changing it moves every chunk of every
//! existing pool: never change it in place.

use tierpool_types::{ChunkKey, InodeId};

/// SplitMix64 finaliser: cheap, well mixed, stable across platforms.
fn mix(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// The partition of chunk `index` of `inode` in a pool of `partitions` partitions.
///
/// Panics if `partitions` is zero (a pool always has at least one).
pub fn partition_of(inode: InodeId, index: u64, partitions: u32) -> u32 {
    assert!(partitions > 0, "a pool has at least one partition");
    let h = mix(mix(inode.0) ^ index.wrapping_mul(0x9e37_79b9_7f4a_7c15));
    (h % u64::from(partitions)) as u32
}

/// The partition of the stored chunk `key`: its home when its file's
/// placement policy chose one, else the hashed one. A home outside the
/// pool's partitions is refused where keys enter (workers, the
/// coordinator); should one get here, the hashed partition is used.
pub fn partition_of_key(key: ChunkKey, partitions: u32) -> u32 {
    match key.home {
        Some(p) if p < partitions => p,
        _ => partition_of(key.inode, key.index, partitions),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chunks_of_one_file_spread_over_partitions() {
        let mut seen = std::collections::BTreeSet::new();
        for i in 0..64 {
            seen.insert(partition_of(InodeId(42), i, 4096));
        }
        assert!(seen.len() > 60, "64 chunks hit only {} partitions", seen.len());
    }

    #[test]
    fn hash_is_stable() {
        // Pools on disk depend on these exact values.
        assert_eq!(partition_of(InodeId(1), 0, 4096), partition_of(InodeId(1), 0, 4096));
        assert_eq!(mix(0), 0);
        assert_eq!(mix(1), 0x5692_161d_100b_05e5);
    }
}
