//! Human renderings of what the pool reports; JSON is the serialised
//! views of `tierpool_client::view`, the one shape every surface shows.

use tierpool_client::{DirEntry, InodeInfo, InodeKind, PoolStatus};
use tierpool_types::ByteSize;

pub fn status_text(coordinator: &str, s: &PoolStatus) -> String {
    let mut out = format!(
        "coordinator {coordinator}  partitions {}  inodes {}  workers {}\n",
        s.partitions,
        s.inodes,
        s.workers.len()
    );
    out += &format!(
        "{:<5} {:<22} {:<12} {:<8} {:<5} {:>5}  {:<28} {:<28}\n",
        "ID", "ADDRESS", "HOST", "RACK", "ALIVE", "PARTS", "MEM used/capacity (chunks)", "DISK used/capacity (chunks)"
    );
    for w in &s.workers {
        let st = w.stats.clone().unwrap_or_default();
        let tier = |used: u64, cap: u64, n: u64| format!("{}/{} ({n})", ByteSize(used), ByteSize(cap));
        out += &format!(
            "{:<5} {:<22} {:<12} {:<8} {:<5} {:>5}  {:<28} {:<28}\n",
            w.record.id.to_string(),
            w.record.addr,
            w.record.host,
            w.record.rack,
            if w.alive { "yes" } else { "NO" },
            w.partitions,
            tier(st.mem_used, w.record.mem_capacity, st.mem_chunks),
            tier(st.disk_used, w.record.disk_capacity, st.disk_chunks),
        );
    }
    out
}

fn kind(k: InodeKind) -> &'static str {
    tierpool_client::view::kind_id(k)
}

pub fn info_text(path: &str, i: &InodeInfo) -> String {
    format!(
        "  path: {path}\n  kind: {}\n inode: {}\n  size: {} ({})\n chunk: {} x {}\n  mode: {:o}\n nlink: {}\n mtime: {}\n  prio: {}{}\n",
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
        if i.attrs.pinned { " (pinned)" } else { "" }
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
    #[test]
    fn formats_utc_times() {
        assert_eq!(super::time_text(0), "1970-01-01 00:00:00");
        assert_eq!(super::time_text(1_700_000_000_000_000_000), "2023-11-14 22:13:20");
    }
}
