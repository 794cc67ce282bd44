//! The options of an under-store, and how missing ones are found.
//!
//! Six keys exist (`KEYS`); any other is refused, for every scheme, so that a
//! misspelt key fails where it is written instead of being ignored. A value
//! given by the caller is never changed or dropped: resolution only fills in
//! what is missing, so resolving twice gives the same map.
//!
//! For s3, in the order the AWS tools use: the endpoint from
//! `AWS_ENDPOINT_URL_S3`, `AWS_ENDPOINT_URL`, then the profile's `endpoint_url`;
//! the region from `AWS_REGION`, `AWS_DEFAULT_REGION`, the profile's `region`,
//! then "us-east-1"; the credentials from the `AWS_ACCESS_KEY_ID` /
//! `AWS_SECRET_ACCESS_KEY` / `AWS_SESSION_TOKEN` variables, then the profile in
//! the credentials file, then the profile in the config file. An explicit
//! "profile" option puts the profile's credentials before the variables (as
//! `--profile` does); `AWS_PROFILE` only picks the profile. Files:
//! `AWS_SHARED_CREDENTIALS_FILE` (default `~/.aws/credentials`) and
//! `AWS_CONFIG_FILE` (default `~/.aws/config`). Profiles that get their
//! credentials another way (roles, SSO, processes) give none here.
//!
//! The environment and the files are read through `Sources`, so the rules are
//! tested without touching the process environment.

use std::collections::BTreeMap;
use std::path::PathBuf;

use tierpool_types::{Error, Result};

use crate::aws_files::{profile_section, FileKind, Section};
use crate::location::Location;

/// The option keys an under-store accepts.
pub const KEYS: [&str; 6] = ["endpoint", "region", "access_key_id", "secret_access_key", "session_token", "profile"];

/// Keys whose values are secrets, never shown.
const SECRET_KEYS: [&str; 2] = ["secret_access_key", "session_token"];

/// The region used when nothing names one.
const DEFAULT_REGION: &str = "us-east-1";

/// The options with their secret values replaced by "***", safe to log or show.
pub fn redact(options: &BTreeMap<String, String>) -> BTreeMap<String, String> {
    options
        .iter()
        .map(|(k, v)| {
            let shown = if SECRET_KEYS.contains(&k.as_str()) { "***".to_string() } else { v.clone() };
            (k.clone(), shown)
        })
        .collect()
}

/// Where resolution looks: environment variables and file contents.
pub(crate) trait Sources {
    fn var(&self, name: &str) -> Option<String>;
    fn read(&self, path: &std::path::Path) -> Option<String>;
}

/// The process environment and the real files.
pub(crate) struct ProcessSources;

impl Sources for ProcessSources {
    fn var(&self, name: &str) -> Option<String> {
        std::env::var(name).ok().filter(|v| !v.is_empty())
    }

    fn read(&self, path: &std::path::Path) -> Option<String> {
        match std::fs::read_to_string(path) {
            Ok(text) => Some(text),
            Err(e) => {
                if e.kind() != std::io::ErrorKind::NotFound {
                    tracing::warn!("cannot read {}: {e}; ignoring it", path.display());
                }
                None
            }
        }
    }
}

/// Refuses keys other than `KEYS`, naming them.
pub(crate) fn check_keys(uri: &str, options: &BTreeMap<String, String>) -> Result<()> {
    let unknown: Vec<&str> = options.keys().map(String::as_str).filter(|k| !KEYS.contains(k)).collect();
    if unknown.is_empty() {
        return Ok(());
    }
    Err(Error::invalid(format!("{uri}: unknown option {} (known: {})", unknown.join(", "), KEYS.join(", "))))
}

/// `UnderStore::resolve_options`, reading through `sources`.
pub(crate) fn resolve(
    uri: &str,
    given: &BTreeMap<String, String>,
    sources: &dyn Sources,
) -> Result<BTreeMap<String, String>> {
    check_keys(uri, given)?;
    match Location::parse(uri)? {
        Location::Dir(_) | Location::Hdfs { .. } => Ok(given.clone()),
        Location::S3 { .. } => resolve_s3(uri, given, sources),
    }
}

fn resolve_s3(uri: &str, given: &BTreeMap<String, String>, sources: &dyn Sources) -> Result<BTreeMap<String, String>> {
    let mut out = given.clone();
    let explicit_profile = given.get("profile").filter(|p| !p.is_empty()).cloned();
    let profile = explicit_profile.clone().or_else(|| sources.var("AWS_PROFILE")).unwrap_or_else(|| "default".into());
    let home = sources.var("HOME").map(PathBuf::from);
    let file = |var: &str, name: &str| {
        sources.var(var).map(PathBuf::from).or_else(|| home.as_ref().map(|h| h.join(".aws").join(name)))
    };
    let read_section = |path: Option<PathBuf>, kind| {
        path.and_then(|p| sources.read(&p)).and_then(|text| profile_section(&text, kind, &profile)).unwrap_or_default()
    };
    let config = read_section(file("AWS_CONFIG_FILE", "config"), FileKind::Config);
    let credentials = read_section(file("AWS_SHARED_CREDENTIALS_FILE", "credentials"), FileKind::Credentials);

    if !out.contains_key("endpoint") {
        let endpoint = sources
            .var("AWS_ENDPOINT_URL_S3")
            .or_else(|| sources.var("AWS_ENDPOINT_URL"))
            .or_else(|| config.get("endpoint_url").cloned());
        if let Some(endpoint) = endpoint {
            out.insert("endpoint".into(), endpoint);
        }
    }
    if !out.contains_key("region") {
        let region = sources
            .var("AWS_REGION")
            .or_else(|| sources.var("AWS_DEFAULT_REGION"))
            .or_else(|| config.get("region").cloned())
            .unwrap_or_else(|| DEFAULT_REGION.into());
        out.insert("region".into(), region);
    }

    match (given.contains_key("access_key_id"), given.contains_key("secret_access_key")) {
        (true, true) => return Ok(out),
        (true, false) | (false, true) => {
            return Err(Error::invalid(format!("{uri}: access_key_id and secret_access_key must be given together")))
        }
        (false, false) => {}
    }
    let env = env_credentials(sources);
    let files = [from_section(&credentials), from_section(&config)];
    let found = if explicit_profile.is_some() {
        files.into_iter().chain([env]).flatten().next()
    } else {
        [env].into_iter().chain(files).flatten().next()
    };
    if let Some(creds) = found {
        out.insert("access_key_id".into(), creds.key_id);
        out.insert("secret_access_key".into(), creds.secret);
        if let (Some(token), false) = (creds.token, given.contains_key("session_token")) {
            out.insert("session_token".into(), token);
        }
    }
    Ok(out)
}

struct Credentials {
    key_id: String,
    secret: String,
    token: Option<String>,
}

fn env_credentials(sources: &dyn Sources) -> Option<Credentials> {
    Some(Credentials {
        key_id: sources.var("AWS_ACCESS_KEY_ID")?,
        secret: sources.var("AWS_SECRET_ACCESS_KEY")?,
        token: sources.var("AWS_SESSION_TOKEN"),
    })
}

fn from_section(section: &Section) -> Option<Credentials> {
    Some(Credentials {
        key_id: section.get("aws_access_key_id")?.clone(),
        secret: section.get("aws_secret_access_key")?.clone(),
        token: section.get("aws_session_token").cloned(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;
    use tierpool_types::ErrorKind;

    #[derive(Default)]
    struct Fake {
        vars: BTreeMap<String, String>,
        files: BTreeMap<PathBuf, String>,
    }

    impl Fake {
        fn var(mut self, k: &str, v: &str) -> Self {
            self.vars.insert(k.into(), v.into());
            self
        }
        fn file(mut self, p: &str, text: &str) -> Self {
            self.files.insert(p.into(), text.into());
            self
        }
    }

    impl Sources for Fake {
        fn var(&self, name: &str) -> Option<String> {
            self.vars.get(name).cloned()
        }
        fn read(&self, path: &Path) -> Option<String> {
            self.files.get(path).cloned()
        }
    }

    fn opts(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
    }

    const CREDS: &str = "[default]\naws_access_key_id = AKFILE\naws_secret_access_key = SKFILE\n\
                         [dev]\naws_access_key_id = AKDEV\naws_secret_access_key = SKDEV\naws_session_token = TDEV\n";
    const CONFIG: &str =
        "[default]\nregion = eu-west-1\n[profile dev]\nregion = ap-south-1\nendpoint_url = http://dev:9000\n";

    fn with_files() -> Fake {
        Fake::default()
            .var("HOME", "/home/u")
            .file("/home/u/.aws/credentials", CREDS)
            .file("/home/u/.aws/config", CONFIG)
    }

    #[test]
    fn given_values_win_and_resolving_twice_changes_nothing() {
        let given =
            opts(&[("endpoint", "http://e"), ("region", "r"), ("access_key_id", "a"), ("secret_access_key", "s")]);
        let sources = with_files().var("AWS_REGION", "env-region").var("AWS_ACCESS_KEY_ID", "envak");
        let once = resolve("s3://b", &given, &sources).unwrap();
        assert_eq!(once, given);
        assert_eq!(resolve("s3://b", &once, &sources).unwrap(), once);
    }

    #[test]
    fn environment_comes_before_the_default_profile() {
        let sources = with_files()
            .var("AWS_ENDPOINT_URL", "http://generic")
            .var("AWS_ENDPOINT_URL_S3", "http://s3-only")
            .var("AWS_DEFAULT_REGION", "default-region")
            .var("AWS_ACCESS_KEY_ID", "AKENV")
            .var("AWS_SECRET_ACCESS_KEY", "SKENV");
        let out = resolve("s3://b/p", &BTreeMap::new(), &sources).unwrap();
        let want = opts(&[
            ("endpoint", "http://s3-only"),
            ("region", "default-region"),
            ("access_key_id", "AKENV"),
            ("secret_access_key", "SKENV"),
        ]);
        assert_eq!(out, want);
    }

    #[test]
    fn files_fill_in_what_the_environment_lacks() {
        let out = resolve("s3://b", &BTreeMap::new(), &with_files()).unwrap();
        let want = opts(&[("region", "eu-west-1"), ("access_key_id", "AKFILE"), ("secret_access_key", "SKFILE")]);
        assert_eq!(out, want);
        let out = resolve("s3://b", &BTreeMap::new(), &with_files().var("AWS_PROFILE", "dev")).unwrap();
        let want = opts(&[
            ("endpoint", "http://dev:9000"),
            ("region", "ap-south-1"),
            ("access_key_id", "AKDEV"),
            ("secret_access_key", "SKDEV"),
            ("session_token", "TDEV"),
        ]);
        assert_eq!(out, want);
    }

    #[test]
    fn an_explicit_profile_beats_environment_credentials_but_aws_profile_does_not() {
        let sources = with_files().var("AWS_ACCESS_KEY_ID", "AKENV").var("AWS_SECRET_ACCESS_KEY", "SKENV");
        let out = resolve("s3://b", &opts(&[("profile", "dev")]), &sources).unwrap();
        assert_eq!(out["access_key_id"], "AKDEV");
        assert_eq!(out["profile"], "dev", "given values are kept");
        let out = resolve("s3://b", &BTreeMap::new(), &sources.var("AWS_PROFILE", "dev")).unwrap();
        assert_eq!(out["access_key_id"], "AKENV");
        assert!(!out.contains_key("session_token"), "a token belongs to the credentials it came with");
    }

    #[test]
    fn file_locations_follow_their_variables_and_default_region_is_us_east_1() {
        let sources = Fake::default()
            .var("HOME", "/home/u")
            .var("AWS_SHARED_CREDENTIALS_FILE", "/etc/creds")
            .file("/etc/creds", CREDS)
            .file("/home/u/.aws/config", CONFIG)
            .var("AWS_CONFIG_FILE", "/nowhere");
        let out = resolve("s3://b", &BTreeMap::new(), &sources).unwrap();
        let want = opts(&[("region", "us-east-1"), ("access_key_id", "AKFILE"), ("secret_access_key", "SKFILE")]);
        assert_eq!(out, want);
        let none = resolve("s3://b", &BTreeMap::new(), &Fake::default()).unwrap();
        assert_eq!(none, opts(&[("region", "us-east-1")]));
    }

    #[test]
    fn unknown_keys_and_half_credentials_are_refused() {
        let e = resolve("file:///d", &opts(&[("regoin", "x")]), &Fake::default()).unwrap_err();
        assert_eq!(e.kind, ErrorKind::InvalidArgument);
        assert!(e.message.contains("unknown option regoin"), "{}", e.message);
        assert_eq!(
            resolve("s3://b", &opts(&[("bogus", "")]), &Fake::default()).unwrap_err().kind,
            ErrorKind::InvalidArgument
        );
        let e = resolve("s3://b", &opts(&[("access_key_id", "a")]), &with_files()).unwrap_err();
        assert_eq!(e.kind, ErrorKind::InvalidArgument);
    }

    #[test]
    fn directory_options_are_returned_unchanged() {
        let given = opts(&[("region", "x")]);
        assert_eq!(resolve("file:///d", &given, &with_files().var("AWS_REGION", "y")).unwrap(), given);
    }

    #[test]
    fn redact_hides_only_secrets() {
        let given =
            opts(&[("access_key_id", "AK"), ("secret_access_key", "SK"), ("session_token", "T"), ("region", "r")]);
        let shown = redact(&given);
        assert_eq!(
            shown,
            opts(&[("access_key_id", "AK"), ("secret_access_key", "***"), ("session_token", "***"), ("region", "r")])
        );
    }
}
