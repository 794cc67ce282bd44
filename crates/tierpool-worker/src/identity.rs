//! A worker's identity on disk, so a restarted worker gets its partitions
//! back and serves the DISK chunks it left.
//!
//! Format version 1, `DIR/worker.state`, text:
//!
//! ```text
//! tierpool worker state 1
//! id 3
//! ```
//!
//! The first line names the format and its version; each later line is a
//! `key value` pair. A reader refuses a version it does not know (naming
//! it) rather than guess. Version 0 was `DIR/worker.id` holding the bare id:
//! it is read, rewritten as the current version, and removed. Golden files
//! of both are in `tests/golden/`. Writes go to a temporary file renamed
//! into place, so the file is always whole.

use std::path::Path;
use tierpool_types::{Error, ErrorKind, Result, WorkerId};

const HEADER: &str = "tierpool worker state";
const VERSION: u32 = 1;
pub const FILE: &str = "worker.state";
const LEGACY_FILE: &str = "worker.id";

/// What a worker remembers about itself.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct Identity {
    pub id: WorkerId,
}

fn corrupt(path: &Path, why: impl std::fmt::Display) -> Error {
    Error::new(ErrorKind::Corrupt, format!("{}: {why}", path.display()))
}

/// The text of `ident` in the current format.
pub fn encode(ident: &Identity) -> String {
    format!("{HEADER} {VERSION}\nid {}\n", ident.id.0)
}

/// Parses the current format (any known version).
pub fn decode(text: &str, path: &Path) -> Result<Identity> {
    let mut lines = text.lines();
    let version = (lines.next().and_then(|l| l.strip_prefix(HEADER)).map(str::trim))
        .ok_or_else(|| corrupt(path, "not a tierpool worker state file"))?;
    if version != VERSION.to_string() {
        return Err(corrupt(
            path,
            format!("worker state version {version} is not known to this build (it reads {VERSION})"),
        ));
    }
    let mut id = None;
    for line in lines.filter(|l| !l.trim().is_empty()) {
        match line.split_once(' ') {
            Some(("id", v)) => {
                id = Some(v.trim().parse::<u32>().map_err(|_| corrupt(path, format!("bad worker id {v:?}")))?)
            }
            _ => return Err(corrupt(path, format!("unexpected line {line:?}"))),
        }
    }
    let id = id.ok_or_else(|| corrupt(path, "no worker id"))?;
    Ok(Identity { id: WorkerId(id) })
}

/// Parses version 0: the bare id.
pub fn decode_legacy(text: &str, path: &Path) -> Result<Identity> {
    let id = text.trim().parse::<u32>().map_err(|_| corrupt(path, "is not a worker id"))?;
    Ok(Identity { id: WorkerId(id) })
}

/// The identity kept in `dir`, if any; a version 0 file is migrated.
pub fn load(dir: &Path) -> Result<Option<Identity>> {
    let path = dir.join(FILE);
    match std::fs::read_to_string(&path) {
        Ok(text) => return decode(&text, &path).map(Some),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(Error::from(e).context(path.display())),
    }
    let legacy = dir.join(LEGACY_FILE);
    match std::fs::read_to_string(&legacy) {
        Ok(text) => {
            let ident = decode_legacy(&text, &legacy)?;
            store(dir, &ident)?;
            std::fs::remove_file(&legacy).map_err(|e| Error::from(e).context(legacy.display()))?;
            tracing::info!("migrated {} to {}", legacy.display(), path.display());
            Ok(Some(ident))
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(Error::from(e).context(legacy.display())),
    }
}

/// Keeps `ident` in `dir`, atomically.
pub fn store(dir: &Path, ident: &Identity) -> Result<()> {
    let path = dir.join(FILE);
    let tmp = dir.join(format!("{FILE}.tmp"));
    std::fs::write(&tmp, encode(ident)).map_err(|e| Error::from(e).context(tmp.display()))?;
    std::fs::rename(&tmp, &path).map_err(|e| Error::from(e).context(path.display()))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn golden(name: &str) -> std::path::PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/golden").join(name)
    }

    #[test]
    fn the_golden_files_of_every_version_load() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::copy(golden("worker-state-v1"), dir.path().join(FILE)).unwrap();
        assert_eq!(load(dir.path()).unwrap(), Some(Identity { id: WorkerId(3) }));
        let old = tempfile::tempdir().unwrap();
        std::fs::copy(golden("worker-id-v0"), old.path().join(LEGACY_FILE)).unwrap();
        assert_eq!(load(old.path()).unwrap(), Some(Identity { id: WorkerId(17) }));
        // Migrated: the current format, byte for byte what this version writes.
        assert!(!old.path().join(LEGACY_FILE).exists());
        assert_eq!(std::fs::read_to_string(old.path().join(FILE)).unwrap(), "tierpool worker state 1\nid 17\n");
    }

    #[test]
    fn the_current_format_is_the_golden_one() {
        let text = std::fs::read_to_string(golden("worker-state-v1")).unwrap();
        assert_eq!(encode(&Identity { id: WorkerId(3) }), text);
    }

    #[test]
    fn unknown_versions_and_garbage_are_refused_by_name() {
        let p = Path::new("/w/worker.state");
        let e = decode("tierpool worker state 2\nid 3\n", p).unwrap_err();
        assert!(e.message.contains("version 2 is not known"), "{}", e.message);
        assert!(decode("hello\n", p).unwrap_err().message.contains("not a tierpool worker state file"));
        assert!(decode("tierpool worker state 1\nid x\n", p).unwrap_err().message.contains("bad worker id"));
        assert!(decode("tierpool worker state 1\n", p).unwrap_err().message.contains("no worker id"));
        assert_eq!(decode_legacy("x", p).unwrap_err().kind, ErrorKind::Corrupt);
    }
}
