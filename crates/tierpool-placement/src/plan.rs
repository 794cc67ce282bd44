//! Moving toward a goal: which partitions to start moving next.
//!
//! A goal is the owner each partition should end with (the table a join,
//! a drain or a rebalance asked for). Partitions reach it a few at a time
//! (the caller bounds how many move at once); a partition that is moving
//! stays where it is until its move finishes.

use crate::PartitionTable;
use std::collections::BTreeMap;
use tierpool_types::WorkerId;

/// Partitions not where the goal wants them: owned by another worker, or
/// moving to another (a move begun toward an older goal).
pub fn remaining(table: &PartitionTable, goal: &[Option<WorkerId>]) -> usize {
    (0..table.partitions())
        .filter(|p| {
            goal.get(*p as usize)
                .copied()
                .flatten()
                .is_some_and(|g| table.owner(*p) != Some(g) || table.moving().get(p).is_some_and(|to| *to != g))
        })
        .count()
}

/// Up to `room` moves `(partition, to)` that bring `table` closer to
/// `goal`, dealt round-robin over their sources so that no one worker
/// carries every copy at once. Partitions already moving are skipped.
pub fn next_moves(table: &PartitionTable, goal: &[Option<WorkerId>], room: usize) -> Vec<(u32, WorkerId)> {
    let mut by_source: BTreeMap<WorkerId, Vec<(u32, WorkerId)>> = BTreeMap::new();
    for p in 0..table.partitions() {
        let (Some(g), Some(o)) = (goal.get(p as usize).copied().flatten(), table.owner(p)) else { continue };
        if g != o && !table.moving().contains_key(&p) {
            by_source.entry(o).or_default().push((p, g));
        }
    }
    let mut queues: Vec<std::vec::IntoIter<(u32, WorkerId)>> = by_source.into_values().map(Vec::into_iter).collect();
    let mut out = Vec::new();
    while out.len() < room {
        let before = out.len();
        for q in &mut queues {
            if out.len() == room {
                break;
            }
            out.extend(q.next());
        }
        if out.len() == before {
            break;
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn w(i: u32) -> WorkerId {
        WorkerId(i)
    }

    #[test]
    fn moves_go_round_robin_over_sources_and_stop_at_the_room() {
        let t = PartitionTable::new(8).rebalanced(&[(w(1), 1), (w(2), 1)]);
        let goal = t.joined(&[(w(1), 1), (w(2), 1), (w(3), 2)], w(3));
        let moves = next_moves(&t, goal.owners(), 3);
        assert_eq!(moves.len(), 3);
        assert!(moves.iter().all(|(_, to)| *to == w(3)));
        let sources: Vec<_> = moves.iter().map(|(p, _)| t.owner(*p).unwrap()).collect();
        assert_ne!(sources[0], sources[1], "{sources:?}");
        assert_eq!(remaining(&t, goal.owners()), 4);
    }

    proptest! {
        /// Moving a few at a time, finishing or giving up moves in any
        /// order, always reaches the goal, and every partition has exactly
        /// one owner at every step.
        #[test]
        fn any_order_of_finishing_reaches_the_goal(
            ws in prop::collection::vec(1u64..100, 2..6),
            room in 1usize..20,
            choices in prop::collection::vec((any::<bool>(), any::<bool>()), 0..400),
        ) {
            let weights: Vec<(WorkerId, u64)> = ws.iter().enumerate().map(|(i, x)| (w(i as u32), *x)).collect();
            let mut t = PartitionTable::new(64).rebalanced(&weights[..weights.len() - 1]);
            let goal = t.joined(&weights, w(weights.len() as u32 - 1));
            let mut choices = choices.into_iter();
            for _ in 0..1000 {
                let room_left = room.saturating_sub(t.moving().len());
                t.begin_moves(&next_moves(&t, goal.owners(), room_left)).unwrap();
                let moving: Vec<u32> = t.moving().keys().copied().collect();
                if moving.is_empty() {
                    break;
                }
                let (finish, all) = choices.next().unwrap_or((true, true));
                let pick: Vec<u32> = if all { moving } else { moving[..1].to_vec() };
                if finish { t.finish_moves(&pick) } else { t.abort_moves(&pick) }
                prop_assert!(t.owners().iter().all(|o| o.is_some()));
                prop_assert!(t.moving().len() <= room);
            }
            prop_assert_eq!(remaining(&t, goal.owners()), 0);
            prop_assert_eq!(t.owners(), goal.owners());
        }
    }
}
