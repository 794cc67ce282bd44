//! The two AWS shared files, read the way the AWS tools read them:
//! `~/.aws/credentials` has sections named after profiles (`[dev]`),
//! `~/.aws/config` names them `[profile dev]` (and `[default]` for the default
//! profile). Pure parsing of text; the caller reads the files.
//!
//! Only flat `key = value` lines are kept; nested blocks (an indented
//! continuation under a key with an empty value, such as `s3 =` sub-settings)
//! and comments (`#`, `;`) are skipped. Keys are lowercase in these files and
//! are matched as written.

use std::collections::BTreeMap;

/// The `key = value` pairs of one profile, from one file.
pub(crate) type Section = BTreeMap<String, String>;

/// Which of the two files a text came from: they name sections differently.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub(crate) enum FileKind {
    Credentials,
    Config,
}

/// The settings of `profile` in `text`, or `None` if it has no such section.
pub(crate) fn profile_section(text: &str, kind: FileKind, profile: &str) -> Option<Section> {
    let mut found: Option<Section> = None;
    let mut in_profile = false;
    let mut in_nested = false;
    for raw in text.lines() {
        let line = raw.trim();
        if line.is_empty() || line.starts_with('#') || line.starts_with(';') {
            continue;
        }
        if let Some(name) = line.strip_prefix('[').and_then(|l| l.strip_suffix(']')) {
            in_profile = section_is(name.trim(), kind, profile);
            in_nested = false;
            if in_profile && found.is_none() {
                found = Some(Section::new());
            }
            continue;
        }
        let indented = raw.starts_with([' ', '\t']);
        if in_nested && indented {
            continue;
        }
        in_nested = false;
        let Some((key, value)) = line.split_once('=') else { continue };
        let (key, value) = (key.trim(), value.trim());
        if value.is_empty() {
            in_nested = true;
            continue;
        }
        if let (true, Some(section)) = (in_profile, found.as_mut()) {
            section.insert(key.to_string(), value.to_string());
        }
    }
    found
}

fn section_is(name: &str, kind: FileKind, profile: &str) -> bool {
    match kind {
        FileKind::Credentials => name == profile,
        FileKind::Config => match name.strip_prefix("profile").filter(|r| r.starts_with([' ', '\t'])) {
            Some(named) => named.trim() == profile,
            None => profile == "default" && name == "default",
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const CREDENTIALS: &str = "\
# comment
[default]
aws_access_key_id = AKDEFAULT
aws_secret_access_key = secret/default

[dev]
aws_access_key_id=AKDEV
aws_secret_access_key = secret=dev
aws_session_token = tok
";

    const CONFIG: &str = "\
[default]
region = eu-west-1
s3 =
    endpoint_url = http://nested.invalid
    addressing_style = path
[profile dev]
region = us-west-2
endpoint_url = http://127.0.0.1:9000
";

    #[test]
    fn reads_credentials_sections_by_profile_name() {
        let dev = profile_section(CREDENTIALS, FileKind::Credentials, "dev").unwrap();
        assert_eq!(dev["aws_access_key_id"], "AKDEV");
        assert_eq!(dev["aws_secret_access_key"], "secret=dev");
        assert_eq!(dev["aws_session_token"], "tok");
        let default = profile_section(CREDENTIALS, FileKind::Credentials, "default").unwrap();
        assert_eq!(default["aws_secret_access_key"], "secret/default");
        assert!(profile_section(CREDENTIALS, FileKind::Credentials, "prod").is_none());
    }

    #[test]
    fn reads_config_sections_with_the_profile_word_and_skips_nested_blocks() {
        let default = profile_section(CONFIG, FileKind::Config, "default").unwrap();
        assert_eq!(default.get("region").map(String::as_str), Some("eu-west-1"));
        assert!(!default.contains_key("endpoint_url"), "nested s3 settings are not the profile's");
        let dev = profile_section(CONFIG, FileKind::Config, "dev").unwrap();
        assert_eq!(dev["region"], "us-west-2");
        assert_eq!(dev["endpoint_url"], "http://127.0.0.1:9000");
        assert!(profile_section("[profiledev]\nregion = x\n", FileKind::Config, "dev").is_none());
    }
}
