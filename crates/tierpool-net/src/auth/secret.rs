//! The pool's secret: one key every process of a pool shares, kept in a
//! file only its owner may read.
//!
//! A secret file holds the key as hex text: 64 digits for the 32 random
//! bytes a coordinator writes (at least 32 digits are taken, as `openssl
//! rand -hex 16` prints), surrounding whitespace ignored. A file its group
//! or others may read or write is refused, as ssh refuses such a private
//! key: a secret others can read is no secret. A new file is written
//! atomically (a private temporary file, synced, then linked in place), so
//! no reader sees half a key and an existing secret is never replaced.
//!
//! The key never leaves the process: it is kept as a keyed HMAC-SHA256
//! state, and neither `Debug` nor any message shows it, only where it came
//! from.

use hmac::{Hmac, KeyInit, Mac};
use sha2::Sha256;
use std::fmt;
use std::io::{Read, Write};
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::Path;
use std::sync::Arc;
use tierpool_proto::handshake::MAC_LEN;
use tierpool_types::{Error, ErrorKind, Result};

type HmacSha256 = Hmac<Sha256>;

/// Bytes of a key a coordinator makes.
pub const NEW_KEY_LEN: usize = 32;
/// Fewest bytes of a key taken from a file.
pub const MIN_KEY_LEN: usize = 16;
/// Most bytes of a key taken from a file.
pub const MAX_KEY_LEN: usize = 1024;

/// The pool's key, ready to compute and check MACs. Cheap to clone.
#[derive(Clone)]
pub struct Secret {
    mac: HmacSha256,
    /// Where the key came from (a path), for messages.
    origin: Arc<str>,
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Secret(from {})", self.origin)
    }
}

impl Secret {
    /// A secret of `key` (at least [`MIN_KEY_LEN`] bytes); `origin` says where it came from.
    pub fn from_key(key: &[u8], origin: impl fmt::Display) -> Result<Secret> {
        if !(MIN_KEY_LEN..=MAX_KEY_LEN).contains(&key.len()) {
            let e = format!("{origin}: a key of {} bytes; a secret has {MIN_KEY_LEN} to {MAX_KEY_LEN}", key.len());
            return Err(Error::new(ErrorKind::Unauthenticated, e));
        }
        let mac = HmacSha256::new_from_slice(key).expect("HMAC takes keys of any length");
        Ok(Secret { mac, origin: origin.to_string().into() })
    }

    /// Where the key came from.
    pub fn origin(&self) -> &str {
        &self.origin
    }

    /// The same key, said to come from `origin`.
    pub fn with_origin(self, origin: impl fmt::Display) -> Secret {
        Secret { origin: origin.to_string().into(), ..self }
    }

    /// HMAC-SHA256 of `data` under this key.
    pub(crate) fn sign(&self, data: &[u8]) -> [u8; MAC_LEN] {
        self.mac.clone().chain_update(data).finalize().into_bytes().into()
    }

    /// Whether `tag` is the MAC of `data` under this key, compared in constant time.
    pub(crate) fn verify(&self, data: &[u8], tag: &[u8]) -> bool {
        self.mac.clone().chain_update(data).verify_slice(tag).is_ok()
    }

    /// Reads the secret file at `path`, refusing one that others may read or write.
    pub fn load(path: &Path) -> Result<Secret> {
        let shown = path.display();
        let unusable = |m: String| Error::new(ErrorKind::Unauthenticated, format!("secret file {shown}: {m}"));
        let mut f = std::fs::File::open(path).map_err(|e| Error::from(e).context(format!("secret file {shown}")))?;
        let meta = f.metadata().map_err(|e| Error::from(e).context(format!("secret file {shown}")))?;
        let mode = meta.permissions().mode() & 0o777;
        if mode & 0o077 != 0 {
            return Err(unusable(format!(
                "others may read or change it (mode {mode:03o}); make it private with `chmod 600 {shown}`"
            )));
        }
        if !meta.is_file() {
            return Err(unusable("not a regular file".into()));
        }
        let mut text = String::new();
        let limit = (2 * MAX_KEY_LEN + 64) as u64;
        (&mut f).take(limit + 1).read_to_string(&mut text).map_err(|e| unusable(e.to_string()))?;
        if text.len() as u64 > limit {
            return Err(unusable(format!("longer than a key of {MAX_KEY_LEN} bytes")));
        }
        let key = parse_hex(text.trim()).ok_or_else(|| {
            unusable(format!("expected a key as hex digits (at least {}), as `tierpool` writes", 2 * MIN_KEY_LEN))
        })?;
        Secret::from_key(&key, shown)
    }

    /// The secret in `path`, made first (32 random bytes) if there is none
    /// there; `true` if it was made now.
    pub fn load_or_create(path: &Path) -> Result<(Secret, bool)> {
        match Secret::load(path) {
            Err(e) if e.kind == ErrorKind::NotFound => {}
            other => return other.map(|s| (s, false)),
        }
        let mut key = [0u8; NEW_KEY_LEN];
        getrandom::fill(&mut key).map_err(|e| Error::internal(format!("no random bytes for a new secret: {e}")))?;
        let mut text = hex(&key);
        text.push('\n');
        if write_new(path, text.as_bytes())? {
            Ok((Secret::from_key(&key, path.display())?, true))
        } else {
            // Another process made it meanwhile: theirs stands.
            Secret::load(path).map(|s| (s, false))
        }
    }
}

/// Writes `bytes` to a new private file at `path`, atomically; `false` if
/// a file is there already (left as it is).
fn write_new(path: &Path, bytes: &[u8]) -> Result<bool> {
    let ctx = |e: std::io::Error| Error::from(e).context(format!("writing the secret file {}", path.display()));
    let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_else(|| "secret".into());
    let tmp = path.with_file_name(format!(".{name}.{}.tmp", std::process::id()));
    let written = (|| {
        let mut f = std::fs::OpenOptions::new().write(true).create_new(true).mode(0o600).open(&tmp)?;
        f.write_all(bytes)?;
        f.sync_all()?;
        std::fs::hard_link(&tmp, path)
    })();
    let _ = std::fs::remove_file(&tmp);
    match written {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => return Ok(false),
        Err(e) => return Err(ctx(e)),
    }
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::File::open(dir).and_then(|d| d.sync_all()).map_err(ctx)?;
    }
    Ok(true)
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn parse_hex(s: &str) -> Option<Vec<u8>> {
    let digit = |c: u8| char::from(c).to_digit(16);
    let byte = |pair: &[u8]| match pair {
        [high, low] => Some((digit(*high)? << 4 | digit(*low)?) as u8),
        _ => None,
    };
    s.as_bytes().chunks(2).map(byte).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn private(dir: &Path, name: &str, text: &str, mode: u32) -> std::path::PathBuf {
        let p = dir.join(name);
        std::fs::write(&p, text).unwrap();
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(mode)).unwrap();
        p
    }

    #[test]
    fn a_new_secret_is_private_random_hex_and_kept() {
        let tmp = tempfile::tempdir().unwrap();
        let path = tmp.path().join("secret");
        let (first, made) = Secret::load_or_create(&path).unwrap();
        assert!(made);
        let text = std::fs::read_to_string(&path).unwrap();
        assert_eq!((text.len(), text.trim().len()), (65, 64));
        assert_eq!(std::fs::metadata(&path).unwrap().permissions().mode() & 0o777, 0o600);
        let (again, made) = Secret::load_or_create(&path).unwrap();
        assert!(!made);
        assert_eq!(first.sign(b"x"), again.sign(b"x"), "the same key is read back");
        assert_eq!(std::fs::read_dir(tmp.path()).unwrap().count(), 1, "no temporary file is left");
        let other = Secret::load_or_create(&tmp.path().join("other")).unwrap().0;
        assert_ne!(first.sign(b"x"), other.sign(b"x"));
        assert_eq!(format!("{first:?}"), format!("Secret(from {})", path.display()));
    }

    #[test]
    fn a_secret_others_may_read_or_a_malformed_one_is_refused() {
        let tmp = tempfile::tempdir().unwrap();
        let key = "00112233445566778899aabbccddeeff";
        let open = private(tmp.path(), "open", key, 0o644);
        let e = Secret::load(&open).unwrap_err();
        assert_eq!(e.kind, ErrorKind::Unauthenticated);
        let shown = open.display();
        let expected = format!(
            "secret file {shown}: others may read or change it (mode 644); make it private with `chmod 600 {shown}`"
        );
        assert_eq!(e.message, expected);
        let e = Secret::load(&private(tmp.path(), "short", "0011", 0o600)).unwrap_err();
        assert!(e.message.ends_with("a key of 2 bytes; a secret has 16 to 1024"), "{}", e.message);
        let e = Secret::load(&private(tmp.path(), "text", "not a key at all", 0o600)).unwrap_err();
        assert!(e.message.ends_with("expected a key as hex digits (at least 32), as `tierpool` writes"), "{e}");
        assert_eq!(Secret::load(&tmp.path().join("missing")).unwrap_err().kind, ErrorKind::NotFound);
        let ok = Secret::load(&private(tmp.path(), "ok", &format!("  {key}\n"), 0o400)).unwrap();
        assert_eq!(ok.sign(b"x"), Secret::from_key(&parse_hex(key).unwrap(), "k").unwrap().sign(b"x"));
    }

    #[test]
    fn verify_takes_only_the_mac_of_the_same_key_and_data() {
        let a = Secret::from_key(&[1; 32], "a").unwrap();
        let b = Secret::from_key(&[2; 32], "b").unwrap();
        let tag = a.sign(b"data");
        assert!(a.verify(b"data", &tag));
        assert!(!a.verify(b"other", &tag));
        assert!(!b.verify(b"data", &tag));
        assert!(!a.verify(b"data", &tag[..31]));
    }
}
