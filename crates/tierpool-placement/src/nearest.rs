//! The order a reader tries the replicas of a chunk in (RCSS's ranking):
//! replicas on its host, then in its rack, then the others, each class in
//! replica order; replicas on workers that failed lately after all of
//! those. Within a class the reader then prefers those holding the chunk in
//! memory (it asks them, see the client's `replicas`): that part is not
//! known from the table.

use tierpool_types::WorkerId;

/// How near a replica's worker is to the reader.
#[derive(Copy, Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Nearness {
    /// The reader's host (same `--host` label).
    Host,
    /// The reader's rack (same `--rack` label).
    Rack,
    Remote,
}

/// `holders` (replica order) grouped into classes of equally near
/// workers, nearest class first: every holder exactly once, each class in
/// replica order, workers `suspect` says failed lately in classes after
/// all the others.
pub fn read_classes(
    holders: &[WorkerId],
    near: impl Fn(WorkerId) -> Nearness,
    suspect: impl Fn(WorkerId) -> bool,
) -> Vec<Vec<WorkerId>> {
    let class = |w: WorkerId| (suspect(w), near(w));
    let mut ranked: Vec<(usize, WorkerId)> = holders.iter().copied().enumerate().collect();
    ranked.sort_by_key(|(k, w)| (class(*w), *k));
    let mut classes: Vec<Vec<WorkerId>> = Vec::new();
    let mut last = None;
    for (_, w) in ranked {
        let c = class(w);
        match classes.last_mut() {
            Some(group) if last == Some(c) => group.push(w),
            _ => classes.push(vec![w]),
        }
        last = Some(c);
    }
    classes
}
