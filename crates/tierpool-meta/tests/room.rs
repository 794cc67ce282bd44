//! The choice of files to let go when the pool is nearly full, against its
//! stated invariants (`room.rs`) for random candidates and amounts.

use proptest::prelude::*;
use tierpool_meta::{choose_to_free, RoomCandidate};

fn candidate() -> impl Strategy<Value = RoomCandidate> {
    let read = prop_oneof![Just(0u64), 0u64..8];
    (0u64..40, 0u8..4, any::<bool>(), any::<bool>(), prop_oneof![Just(0u64), 1u64..1000], 0u64..8, read).prop_map(
        |(inode, priority, pinned, dirty, held, mtime, last_read)| RoomCandidate {
            inode,
            priority,
            pinned,
            dirty,
            held,
            mtime,
            last_read,
        },
    )
}

proptest! {
    #[test]
    fn the_choice_is_the_shortest_prefix_of_the_order_that_frees_enough(
        files in proptest::collection::vec(candidate(), 0..30),
        raw in 0u64..20_000,
        how in 0u8..3,
        cut in 0usize..30,
    ) {
        // Inodes are unique in a pool: keep the first of each.
        let mut seen = std::collections::HashSet::new();
        let files: Vec<RoomCandidate> = files.into_iter().filter(|f| seen.insert(f.inode)).collect();
        // Used longest ago: the later of the last change and the last read.
        let key = |f: &RoomCandidate| (f.priority, f.mtime.max(f.last_read), f.inode);
        // Amounts at the edges too: nothing, and exactly what the first `cut` files in the order hold.
        let mut ordered: Vec<&RoomCandidate> = files.iter().filter(|f| !f.pinned && !f.dirty && f.held > 0).collect();
        ordered.sort_by_key(|f| key(f));
        let want = match how {
            0 => raw,
            1 => 0,
            _ => ordered.iter().take(cut).map(|f| f.held).sum(),
        };
        let chosen = choose_to_free(&files, want);

        for c in &chosen {
            prop_assert!(!c.pinned && !c.dirty && c.held > 0, "only a clean, unpinned file holding bytes goes: {c:?}");
        }
        let inodes: std::collections::HashSet<u64> = chosen.iter().map(|c| c.inode).collect();
        prop_assert_eq!(inodes.len(), chosen.len(), "none twice");
        prop_assert!(chosen.windows(2).all(|w| key(w[0]) < key(w[1])), "in order");
        let may_go: Vec<&RoomCandidate> = files.iter().filter(|f| !f.pinned && !f.dirty && f.held > 0).collect();
        for u in may_go.iter().filter(|u| !inodes.contains(&u.inode)) {
            for c in &chosen {
                prop_assert!(key(c) < key(u), "a prefix: {c:?} chosen before {u:?}");
            }
        }
        let total: u64 = chosen.iter().map(|c| c.held).sum();
        let available: u64 = may_go.iter().map(|f| f.held).sum();
        if available >= want {
            prop_assert!(total >= want, "enough: {total} of {want}");
            if let Some(last) = chosen.last() {
                prop_assert!(total - last.held < want, "the shortest such prefix");
            }
        } else {
            prop_assert_eq!(chosen.len(), may_go.len(), "all that may go");
        }
    }
}
