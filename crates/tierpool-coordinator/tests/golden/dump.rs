// A stable text rendering of a metadata state through its public queries, so
// a golden file's expected state does not depend on how `MetaState` is laid out.

use std::fmt::Write;
use tierpool_meta::{InodeKind, MetaState};
use tierpool_types::InodeId;

pub fn dump(s: &MetaState) -> String {
    let mut out = String::new();
    writeln!(out, "initialised {}", s.is_initialised()).unwrap();
    writeln!(out, "next_inode {}", s.next_inode().0).unwrap();
    for w in s.workers().values() {
        writeln!(
            out,
            "worker {} addr={} host={} rack={} mem={} disk={}",
            w.id.0, w.addr, w.host, w.rack, w.mem_capacity, w.disk_capacity
        )
        .unwrap();
    }
    let t = s.table();
    writeln!(out, "table partitions={} epoch={} shares={:?}", t.partitions(), t.epoch(), t.shares()).unwrap();
    let owners: Vec<String> = (0..t.partitions()).map(|p| t.owner(p).map_or("-".into(), |w| w.0.to_string())).collect();
    writeln!(out, "owners {}", owners.join(",")).unwrap();
    // A replicated table: the owners of the other replicas of each
    // partition (lines that a table of one replica never shows).
    if t.replicas() > 1 {
        writeln!(out, "replicas {}", t.replicas()).unwrap();
        for k in 1..u32::from(t.replicas()) {
            let owners: Vec<String> = (0..t.partitions())
                .map(|p| t.owner(k * t.partitions() + p).map_or("-".into(), |w| w.0.to_string()))
                .collect();
            writeln!(out, "owners of replica {k} {}", owners.join(",")).unwrap();
        }
    }
    writeln!(out, "pending_gc {:?}", s.pending_gc().iter().map(|i| i.0).collect::<Vec<_>>()).unwrap();
    let keys: Vec<String> = s.pending_chunks().iter().map(|k| k.to_string()).collect();
    writeln!(out, "pending_chunks {keys:?}").unwrap();
    if !s.retired().is_empty() {
        writeln!(out, "retired {:?}", s.retired()).unwrap();
    }
    if !t.moving().is_empty() || !s.goal().is_empty() || !s.draining().is_empty() || !s.removed().is_empty() {
        writeln!(out, "moving {:?}", t.moving()).unwrap();
        let goal: Vec<String> = s.goal().iter().map(|g| g.map_or("-".into(), |w| w.0.to_string())).collect();
        writeln!(out, "goal {}", goal.join(",")).unwrap();
        writeln!(out, "draining {:?}", s.draining()).unwrap();
        writeln!(out, "removed {:?}", s.removed()).unwrap();
    }
    if !s.speeds().is_empty() {
        writeln!(out, "speeds {:?}", s.speeds()).unwrap();
    }
    if !s.down().is_empty() {
        writeln!(out, "down {:?}", s.down()).unwrap();
    }
    if s.spread() != tierpool_types::Spread::Host {
        writeln!(out, "spread {}", s.spread()).unwrap();
    }
    for (id, a) in s.attachments() {
        writeln!(out, "attached {} {} {:?} ro={} {:?}", id.0, a.uri, a.mode, a.readonly, a.options).unwrap();
    }
    if s.is_initialised() {
        walk(s, InodeId::ROOT, "/", &mut out);
        // Snapshots, shown only when there are some: each read back through `.snapshots`.
        for snap in s.snapshots(None).unwrap() {
            writeln!(
                out,
                "snapshot {}@{} created={} entries={} bytes={} kept_bytes={}",
                snap.path, snap.name, snap.created, snap.entries, snap.bytes, snap.kept_bytes
            )
            .unwrap();
            let under = if snap.path == "/" { String::new() } else { snap.path.clone() };
            walk_path(s, &format!("{under}/.snapshots/{}", snap.name), &mut out);
        }
        // Task ids of committed transactions, shown only when there are some.
        for t in s.tasks() {
            writeln!(out, "task {t:?}").unwrap();
        }
        // Region pages of commits not yet on the workers, only when some are.
        for (id, regions) in s.pending_pages() {
            for r in regions {
                let pages: Vec<String> =
                    r.pages.iter().map(|(i, b)| format!("{i}:{:08x}", crc32c::crc32c(b))).collect();
                writeln!(out, "pending {id} inode {} pages {}", r.inode, pages.join(" ")).unwrap();
            }
        }
    }
    out
}

fn walk_path(s: &MetaState, path: &str, out: &mut String) {
    let i = s.stat(path).unwrap();
    line(s, &i, path, out);
    if i.kind == InodeKind::Dir {
        for e in s.list(path).unwrap() {
            walk_path(s, &format!("{path}/{}", e.name), out);
        }
    }
}

fn walk(s: &MetaState, id: InodeId, path: &str, out: &mut String) {
    let i = s.stat_inode(id, true).unwrap();
    line(s, &i, path, out);
    if i.kind == InodeKind::Dir {
        for e in s.read_dir(id).unwrap() {
            let child = if path == "/" { format!("/{}", e.name) } else { format!("{path}/{}", e.name) };
            walk(s, e.id, &child, out);
        }
    }
}

fn line(s: &MetaState, i: &tierpool_meta::InodeInfo, path: &str, out: &mut String) {
    // Copies per chunk, shown only in a replicated pool (one otherwise).
    let copies = if s.table().replicas() > 1 { format!(" copies={}", i.replicas) } else { String::new() };
    // A chunk's home and a path's placement, shown only when a policy set them.
    let home = |c: &tierpool_types::ChunkRef| c.home.map_or(String::new(), |h| format!("@p{h}"));
    let chunks: Vec<String> =
        i.chunks.iter().map(|c| format!("{}:{}:{:08x}{}", c.version, c.len, c.checksum, home(c))).collect();
    let copies =
        if i.placement != tierpool_types::Placement::Hash { format!("{copies} place={}", i.placement) } else { copies };
    // A file's under-store object, shown only beneath an attachment.
    let copies = match &i.origin {
        Some(o) => {
            let own = o.mode.map_or(String::new(), |m| format!(":mode={}", m.name()));
            format!(
                "{copies} origin={}:{:?}:{}:{}:{:?}:dirty={}{own}",
                o.attach.0, o.key, o.size, o.mtime, o.etag, o.dirty
            )
        }
        None => copies,
    };
    // A small file's bytes held inline, shown only for such a file.
    let copies = match &i.inline {
        Some(d) => format!("{copies} inline={:?}", String::from_utf8_lossy(d)),
        None => copies,
    };
    // A region's unfinished restore, shown only for such a region.
    let copies = match &i.restoring {
        Some(name) => format!("{copies} restoring={name:?}"),
        None => copies,
    };
    writeln!(
        out,
        "{path} id={} kind={:?} size={} cs={} mode={:o} uid={} gid={} nlink={} a={} m={} c={} prio={} pin={} chunks=[{}] target={:?} rdev={}{copies}",
        i.id.0,
        i.kind,
        i.size,
        i.chunk_size,
        i.mode,
        i.uid,
        i.gid,
        i.nlink,
        i.atime,
        i.mtime,
        i.ctime,
        i.attrs.priority.get(),
        i.attrs.pinned,
        chunks.join(" "),
        i.target,
        i.rdev
    )
    .unwrap();
}
