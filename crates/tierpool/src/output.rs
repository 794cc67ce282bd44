//! Human renderings of what the pool reports; JSON is the serialised
//! views of `tierpool_client::view`, the one shape every surface shows.

use tierpool_client::view::{FsckView, MigrationView, ReplicationView, StatusView, TierView};
use tierpool_client::{DirEntry, InodeInfo, InodeKind};
use tierpool_types::ByteSize;

/// The pool's state as `tierpool status` prints it; with `bar`, a
/// migration under way gets a progress bar (for a terminal).
pub fn status_text(v: &StatusView, bar: bool) -> String {
    let mut out = format!(
        "coordinator {}  partitions {}  inodes {}  workers {}\n",
        v.coordinator,
        v.partitions,
        v.inodes,
        v.workers.len()
    );
    out += &format!(
        "{:<5} {:<22} {:<12} {:<8} {:<5} {:>5}  {:<28} {:<28} {:<10} {}\n",
        "ID",
        "ADDRESS",
        "HOST",
        "RACK",
        "STATE",
        "PARTS",
        "MEM used/capacity (chunks)",
        "DISK used/capacity (chunks)",
        "GARBAGE",
        "BANDWIDTH (share)"
    );
    for w in &v.workers {
        let tier = |t: &TierView| format!("{}/{} ({})", ByteSize(t.used), ByteSize(t.capacity), t.chunks);
        let disk = if w.disk_full { format!("{} FULL", tier(&w.disk)) } else { tier(&w.disk) };
        let bandwidth = w.bandwidth.map_or("-".into(), |b| format!("{}/s", ByteSize(b)));
        let (id, share) = (format!("w{}", w.id), format!("{bandwidth} ({}%)", w.speed));
        out += &format!(
            "{:<5} {:<22} {:<12} {:<8} {:<5} {:>5}  {:<28} {:<28} {:<10} {}\n",
            id,
            w.address,
            w.host,
            w.rack,
            match (w.alive, w.draining) {
                (false, _) => "DOWN",
                (true, true) => "drain",
                (true, false) => "up",
            },
            w.partitions,
            tier(&w.mem),
            disk,
            ByteSize(w.reclaimable).to_string(),
            share,
        );
    }
    if v.migration.active {
        let bar = if bar { format!("{} ", progress_bar(&v.migration)) } else { String::new() };
        out += &format!("{bar}{}\n", migration_text(&v.migration));
    }
    if !v.workers.is_empty() {
        out += &format!("{}\n", replication_text(&v.replication));
    }
    for a in &v.attachments {
        let ro = if a.readonly { ", read-only" } else { "" };
        out += &format!(
            "under-store {} at {} ({}{ro}): {} files, {} in the pool, {} only below",
            a.uri,
            a.path,
            a.mode,
            a.files,
            ByteSize(a.bytes_in_pool),
            ByteSize(a.bytes_below)
        );
        if a.dirty_files > 0 {
            out += &format!("; {} files ({}) not yet written below", a.dirty_files, ByteSize(a.dirty_bytes));
            if a.write_back_files > 0 && a.mode != "back" {
                out += &format!(" ({} of them written back in the background)", a.write_back_files);
            }
        }
        if a.own_mode_files > 0 {
            out += &format!("; {} files with a write mode of their own", a.own_mode_files);
        }
        out += "\n";
    }
    if v.inline.files > 0 {
        out += &format!(
            "small files kept inline by the metadata: {} ({} of {})\n",
            v.inline.files,
            ByteSize(v.inline.bytes),
            ByteSize(v.inline.max_bytes)
        );
    }
    if v.metadata_log.sync_every_ms > 0 {
        let l = &v.metadata_log;
        out += &format!(
            "metadata log: fsynced every {}ms (changes are acknowledged once written; fsynced up to {} of {})\n",
            l.sync_every_ms, l.synced_lsn, l.lsn
        );
    }
    if v.change_feed.followers > 0 {
        let f = &v.change_feed;
        out += &format!(
            "change feed: {} following (mounts keeping names and attributes), {} changes of the last {} ops kept\n",
            f.followers, f.items, f.ops
        );
    }
    let t = &v.transactions;
    if t.open > 0 || t.tasks > 0 || t.pages_pending > 0 {
        out += &format!("transactions: {} open, {} task ids committed", t.open, t.tasks);
        if t.pages_pending > 0 {
            out += &format!(", {} region pages committed not yet on the workers", t.pages_pending);
        }
        out += "\n";
    }
    if v.snapshots.count > 0 {
        out += &format!(
            "snapshots: {} (keeping {} no live file uses)\n",
            v.snapshots.count,
            ByteSize(v.snapshots.kept_bytes)
        );
    }
    out
}

/// `"1 copy"`, `"2 copies"`: a count and its noun, singular or plural.
pub fn count(n: u64, one: &str, many: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { many })
}

/// One line on the copies of chunks: what the pool keeps, whether it has
/// the workers for it, and what is short of copies or lost.
pub fn replication_text(r: &ReplicationView) -> String {
    let mut s = format!("replication: {}", count(u64::from(r.replicas), "copy", "copies"));
    if r.spread == "rack" {
        s += " on distinct racks where possible";
    }
    let few = r.possible < r.replicas;
    if few {
        s += &format!(
            "; too few workers to keep {}: chunks have {} at most until more join",
            r.replicas,
            count(u64::from(r.possible), "copy", "copies")
        );
    }
    if r.degraded && r.chunks_under == 0 {
        s += &format!("; degraded: {} lost", count(r.chunks_lost, "chunk", "chunks"));
    } else if r.degraded {
        s += &format!(
            "; degraded: {} ({}) short of copies, {} lost",
            count(r.chunks_under, "chunk", "chunks"),
            ByteSize(r.bytes_under),
            r.chunks_lost
        );
    } else {
        s += if few { "; no chunk short of copies" } else { ", all chunks complete" };
    }
    if !r.workers_down.is_empty() {
        let down: Vec<String> = r.workers_down.iter().map(|w| format!("w{w}")).collect();
        s += &format!("; workers down: {}", down.join(", "));
    }
    s
}

/// What `fsck` prints: a line per file short of copies, then a summary.
pub fn fsck_text(path: &str, entries: &[FsckView]) -> String {
    if entries.is_empty() {
        return format!("{path}: every chunk has all its copies\n");
    }
    let mut out = format!("{:>6} {:>8} {:>8} {:>8}  {}\n", "COPIES", "CHUNKS", "UNDER", "LOST", "PATH");
    for e in entries {
        out += &format!("{:>6} {:>8} {:>8} {:>8}  {}\n", e.replicas, e.chunks, e.under, e.lost, e.path);
    }
    let (under, lost): (u64, u64) = (entries.iter().map(|e| e.under).sum(), entries.iter().map(|e| e.lost).sum());
    out += &format!(
        "{path}: {} short of copies: {} with fewer copies than wanted, {} with none left{}\n",
        count(entries.len() as u64, "file", "files"),
        count(under, "chunk", "chunks"),
        count(lost, "chunk", "chunks"),
        if lost > 0 { " (lost: unreadable until its worker comes back)" } else { "" }
    );
    out
}

/// One line on the partitions moving between workers.
/// `[#########-----------]  45%`: how far a migration is, by bytes when
/// they are known, else by partitions.
pub fn progress_bar(m: &MigrationView) -> String {
    if m.bytes_total > 0 {
        bar(m.bytes_moved, m.bytes_total)
    } else {
        bar(u64::from(m.partitions_done), u64::from(m.partitions_done) + u64::from(m.partitions_left))
    }
}

/// `[#########-----------]  45%`: `done` of `total` (all done when `total` is 0).
pub fn bar(done: u64, total: u64) -> String {
    const WIDTH: u64 = 20;
    let frac = if total == 0 { 1.0 } else { (done as f64 / total as f64).min(1.0) };
    let filled = (frac * WIDTH as f64).round() as u64;
    format!("[{}{}] {:>3.0}%", "#".repeat(filled as usize), "-".repeat((WIDTH - filled) as usize), frac * 100.0)
}

pub fn migration_text(m: &MigrationView) -> String {
    let mut s = format!(
        "moving partitions: {} moved, {} left ({} moving now)",
        m.partitions_done, m.partitions_left, m.partitions_moving
    );
    if m.bytes_total > 0 {
        s += &format!(", {} of {}", ByteSize(m.bytes_moved), ByteSize(m.bytes_total));
    }
    if m.rate > 0 {
        s += &format!(", {}/s", ByteSize(m.rate));
    }
    if let Some(eta) = m.eta_secs {
        s += &format!(", about {eta}s left");
    }
    if m.moves_failed > 0 {
        s += &format!(", {} moves given up", m.moves_failed);
    }
    s
}

fn kind(k: InodeKind) -> &'static str {
    tierpool_client::view::kind_id(k)
}

pub fn info_text(path: &str, i: &InodeInfo) -> String {
    let mut s = info_lines(path, i);
    if let Some(u) = tierpool_client::view::UnderView::new(i) {
        let state = if u.dirty { "changes not yet in the under-store" } else { "same as the under-store" };
        let own = u.write_mode.map_or(String::new(), |m| format!("; writes {m} (its own mode)"));
        s += &format!(
            " under: {} ({} of {} chunks in the pool; {state}{own})\n",
            u.key,
            u.chunks_in_pool,
            u.chunks_in_pool + u.chunks_below
        );
    }
    s
}

fn info_lines(path: &str, i: &InodeInfo) -> String {
    format!(
        "  path: {path}\n  kind: {}\n inode: {}\n  size: {} ({})\n chunk: {} x {}\n  mode: {:o}\n nlink: {}\n mtime: {}\n  prio: {}{}\ncopies: {}{}\n place: {}{}\n",
        kind(i.kind),
        i.id,
        i.size,
        ByteSize(i.size),
        tierpool_client::chunk_count(i),
        ByteSize(i.chunk_size),
        i.mode,
        i.nlink,
        time_text(i.mtime),
        i.attrs.priority,
        if i.attrs.pinned { " (pinned)" } else { "" },
        i.replicas,
        if i.kind == InodeKind::Dir { " (for new entries)" } else { "" },
        i.placement,
        if i.kind == InodeKind::Dir { " (for new entries)" } else { "" }
    )
}

pub fn long_line(e: &DirEntry) -> String {
    let i = &e.info;
    let t = match i.kind {
        InodeKind::Dir => 'd',
        InodeKind::Region => 'r',
        InodeKind::File => '-',
        InodeKind::Symlink => 'l',
        InodeKind::Fifo => 'p',
        InodeKind::Socket => 's',
        InodeKind::CharDevice => 'c',
        InodeKind::BlockDevice => 'b',
    };
    format!(
        "{t}{:o} {:>12} p{}{} {} {}{}",
        i.mode,
        i.size,
        i.attrs.priority,
        if i.attrs.pinned { "*" } else { " " },
        time_text(i.mtime),
        e.name,
        match i.kind {
            InodeKind::Dir => "/".to_string(),
            InodeKind::Symlink => format!(" -> {}", i.target),
            _ => String::new(),
        }
    )
}

/// UTC time as `YYYY-MM-DD HH:MM:SS`.
pub fn time_text(ns: u64) -> String {
    let secs = (ns / 1_000_000_000) as i64;
    let (days, rem) = (secs.div_euclid(86_400), secs.rem_euclid(86_400));
    // Civil date from days since 1970-01-01 (Howard Hinnant's algorithm).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!("{y:04}-{m:02}-{d:02} {:02}:{:02}:{:02}", rem / 3600, rem % 3600 / 60, rem % 60)
}

#[cfg(test)]
mod tests {
    use tierpool_client::view::{FsckView, ReplicationView};

    #[test]
    fn formats_utc_times() {
        assert_eq!(super::time_text(0), "1970-01-01 00:00:00");
        assert_eq!(super::time_text(1_700_000_000_000_000_000), "2023-11-14 22:13:20");
    }

    #[test]
    fn a_progress_bar_goes_by_bytes_else_by_partitions() {
        let m = |done, left, moved, total| tierpool_client::view::MigrationView {
            active: true,
            partitions_moving: 0,
            partitions_left: left,
            partitions_done: done,
            bytes_moved: moved,
            bytes_total: total,
            elapsed_secs: 0.0,
            rate: 0,
            eta_secs: None,
            moves_failed: 0,
        };
        assert_eq!(super::progress_bar(&m(1, 3, 45, 100)), "[#########-----------]  45%");
        assert_eq!(super::progress_bar(&m(1, 3, 0, 0)), "[#####---------------]  25%");
        assert_eq!(super::progress_bar(&m(0, 0, 0, 0)), "[####################] 100%");
    }

    fn replication(replicas: u8, possible: u8, down: &[u32], under: u64, lost: u64) -> ReplicationView {
        ReplicationView {
            replicas,
            possible,
            workers_down: down.to_vec(),
            replicas_missing: 0,
            chunks_under: under,
            bytes_under: under << 22,
            chunks_lost: lost,
            degraded: under + lost > 0,
            spread: "host",
        }
    }

    #[test]
    fn the_replication_line_says_what_is_short_of_copies() {
        assert_eq!(
            super::replication_text(&replication(2, 2, &[], 0, 0)),
            "replication: 2 copies, all chunks complete"
        );
        assert_eq!(super::replication_text(&replication(1, 1, &[], 0, 0)), "replication: 1 copy, all chunks complete");
        assert_eq!(
            super::replication_text(&replication(2, 2, &[3], 12, 0)),
            "replication: 2 copies; degraded: 12 chunks (48MiB) short of copies, 0 lost; workers down: w3"
        );
        assert_eq!(
            super::replication_text(&replication(1, 1, &[2, 4], 0, 5)),
            "replication: 1 copy; degraded: 5 chunks lost; workers down: w2, w4"
        );
        assert_eq!(
            super::replication_text(&replication(3, 2, &[], 0, 0)),
            "replication: 3 copies; too few workers to keep 3: chunks have 2 copies at most until more join; \
             no chunk short of copies"
        );
    }

    #[test]
    fn fsck_lists_each_file_short_of_copies_then_a_summary() {
        assert_eq!(super::fsck_text("/", &[]), "/: every chunk has all its copies\n");
        let e = |path: &str, under, lost| FsckView { path: path.into(), replicas: 2, chunks: 4, under, lost };
        let text = super::fsck_text("/d", &[e("/d/a", 3, 0), e("/d/b", 0, 1)]);
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 4, "{text}");
        assert_eq!(lines[0].split_whitespace().collect::<Vec<_>>(), ["COPIES", "CHUNKS", "UNDER", "LOST", "PATH"]);
        assert_eq!(lines[1].split_whitespace().collect::<Vec<_>>(), ["2", "4", "3", "0", "/d/a"]);
        assert_eq!(
            lines[3],
            "/d: 2 files short of copies: 3 chunks with fewer copies than wanted, 1 chunk with none left \
             (lost: unreadable until its worker comes back)"
        );
    }
}
