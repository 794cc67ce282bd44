//! Moving toward a goal: which slots to start moving next.
//!
//! A goal is the owner each slot should end with (the table a join, a
//! drain, a rebalance or a repair asked for). Slots reach it a few at a
//! time (the caller bounds how many move at once); a slot that is moving
//! stays where it is until its move finishes. One slot of a partition
//! moves at a time (its holders track and freeze the whole partition), and
//! never to a worker holding another of its slots.

use crate::PartitionTable;
use std::collections::BTreeMap;
use tierpool_types::WorkerId;

/// Slots not where the goal wants them: owned by another worker (or by
/// none), or moving to another (a move begun toward an older goal).
pub fn remaining(table: &PartitionTable, goal: &[Option<WorkerId>]) -> usize {
    (0..table.slots())
        .filter(|s| {
            goal.get(*s as usize)
                .copied()
                .flatten()
                .is_some_and(|g| table.owner(*s) != Some(g) || table.moving().get(s).is_some_and(|to| *to != g))
        })
        .count()
}

/// Up to `room` moves `(slot, to)` that bring `table` closer to `goal`,
/// dealt round-robin over their sources (the slot's owner, or the sibling
/// an unowned slot is copied from) so that no one worker carries every
/// copy at once. Slots of a partition already moving are skipped, and so
/// are moves to a worker that holds another slot of the partition now
/// (they wait for that slot to move away first).
pub fn next_moves(table: &PartitionTable, goal: &[Option<WorkerId>], room: usize) -> Vec<(u32, WorkerId)> {
    let mut by_source: BTreeMap<WorkerId, Vec<(u32, WorkerId)>> = BTreeMap::new();
    let mut busy: std::collections::BTreeSet<u32> =
        table.moving().keys().map(|s| table.partition_of_slot(*s)).collect();
    for s in 0..table.slots() {
        let p = table.partition_of_slot(s);
        let (Some(g), Some(src)) = (goal.get(s as usize).copied().flatten(), table.source_needed(s)) else { continue };
        if table.owner(s) != Some(g) && !busy.contains(&p) && !table.holds(p, g) {
            busy.insert(p);
            by_source.entry(src).or_default().push((s, g));
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
        let goal = t.joined(&[(w(1), 1), (w(2), 1), (w(3), 2)], w(3), None);
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
            let goal = t.joined(&weights, w(weights.len() as u32 - 1), None);
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
