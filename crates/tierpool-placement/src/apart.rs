//! Where replicas sit within the shares: traded apart onto distinct
//! hosts (`separated`), and each partition's holders ordered so that first
//! replicas spread evenly (`spread`). Neither changes how many slots a
//! worker owns.

use crate::PartitionTable;
use std::collections::BTreeMap;
use tierpool_types::WorkerId;

impl PartitionTable {
    /// The same holders per partition, ordered so that every worker holds
    /// about as many first replicas (and seconds...) as the others: the
    /// worker with the fewest of a replica so far takes it. Only for a
    /// table that holds no chunk yet (reordering moves nothing then).
    pub fn spread(&self) -> PartitionTable {
        let mut next = self.clone();
        let r = usize::from(self.replicas);
        let mut counts: Vec<BTreeMap<WorkerId, i64>> = vec![BTreeMap::new(); r];
        // Partitions seen so far that each worker holds: its fair number of
        // each replica is that over R.
        let mut seen: BTreeMap<WorkerId, i64> = BTreeMap::new();
        for p in 0..self.partitions() {
            let mut holders: Vec<Option<WorkerId>> = self.slots_of(p).map(|s| self.owner(s)).collect();
            for w in holders.iter().flatten() {
                *seen.entry(*w).or_insert(0) += 1;
            }
            for (k, s) in self.slots_of(p).enumerate() {
                // The holder furthest behind its fair number of replica k.
                let ahead = |w: WorkerId| counts[k].get(&w).copied().unwrap_or(0) * r as i64 - seen[&w];
                let pick = (0..holders.len())
                    .filter(|i| holders[*i].is_some())
                    .min_by_key(|i| (ahead(holders[*i].unwrap()), holders[*i]));
                let owner = pick.and_then(|i| holders[i].take());
                if let Some(w) = owner {
                    *counts[k].entry(w).or_insert(0) += 1;
                }
                next.owners[s as usize] = owner;
            }
        }
        next
    }

    /// The same table with slots traded between partitions so that fewer
    /// partitions keep two replicas on one host (`host` names each
    /// worker's; a worker it does not name is a host of its own). A trade
    /// swaps the owners of two slots of the same replica in two
    /// partitions: shares stay exactly as they were, no worker gets two
    /// slots of a partition (here or in `near`, the table this one is a
    /// goal for), and neither partition ends with more replicas sharing a
    /// host. Slots moving in `near` are left alone.
    pub fn separated(&self, host: &dyn Fn(WorkerId) -> Option<u32>, near: Option<&PartitionTable>) -> PartitionTable {
        let mut next = self.clone();
        if self.replicas == 1 {
            return next;
        }
        let n = self.partitions();
        let host_of = |w: WorkerId| host(w).map_or(u64::from(w.0) | 1 << 40, u64::from);
        let clashes = |t: &PartitionTable, p: u32| {
            let hs: Vec<u64> = t.holders(p).into_iter().map(host_of).collect();
            (0..hs.len()).filter(|i| hs[..*i].contains(&hs[*i])).count()
        };
        let free = |t: &PartitionTable, p: u32, w: WorkerId, except: u32| {
            t.slots_of(p).all(|x| x == except || t.owner(x) != Some(w))
                && near.is_none_or(|o| {
                    o.slots_of(p).all(|x| x == except || (o.owner(x) != Some(w) && o.moving.get(&x) != Some(&w)))
                })
        };
        let fixed = |s: u32| near.is_some_and(|o| o.moving.contains_key(&s));
        for p in 0..n {
            let mut tries = 0;
            while clashes(&next, p) > 0 && tries < 4 {
                tries += 1;
                // A slot of p whose owner shares a host with another holder.
                let Some(s) = next.slots_of(p).find(|s| {
                    next.owner(*s).is_some_and(|w| {
                        !fixed(*s)
                            && next
                                .slots_of(p)
                                .any(|x| x < *s && next.owner(x).is_some_and(|o| host_of(o) == host_of(w)))
                    })
                }) else {
                    break;
                };
                let (k, w) = (s / n, next.owner(s).expect("owned"));
                let before = clashes(&next, p);
                let mut traded = false;
                for q in (0..n).filter(|q| *q != p) {
                    let t = k * n + q;
                    let Some(v) = next.owner(t) else { continue };
                    if fixed(t) || v == w || !free(&next, q, w, t) || !free(&next, p, v, s) {
                        continue;
                    }
                    let q_before = clashes(&next, q);
                    next.owners[s as usize] = Some(v);
                    next.owners[t as usize] = Some(w);
                    if clashes(&next, p) < before && clashes(&next, q) <= q_before {
                        traded = true;
                        break;
                    }
                    next.owners[s as usize] = Some(w);
                    next.owners[t as usize] = Some(v);
                }
                if !traded {
                    break;
                }
            }
        }
        next
    }
}
