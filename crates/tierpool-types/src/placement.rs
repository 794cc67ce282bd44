//! Placement policies: where the chunks of a file are put (per directory,
//! inherited by what is created in it), and how replicas spread.

use crate::{Error, Result};
use serde::{Deserialize, Serialize};
use std::fmt;
use std::str::FromStr;

/// Where a writer puts the first replica of each chunk of a file.
///
/// Whatever the policy, a chunk lives in a partition of the pool's table:
/// the one its inode and index hash to (`Hash`), or one the writer chose
/// and recorded in the file's metadata as the chunk's home (the others).
/// Partitions move as the pool changes shape, and a chunk with them: it
/// stays findable, but a `local` chunk is local only while its partition
/// stays where it was when written.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Placement {
    /// The partition the chunk hashes to (spreads a file over every worker).
    #[default]
    Hash,
    /// The first replica on the writer's own worker (one with the writer's
    /// host label), else one in its rack, else hashed.
    Local,
    /// Chunks dealt over the workers in turn, first replicas evenly.
    RoundRobin,
    /// One copy, on the writer's own worker; writing fails where the
    /// writer has none. For intermediate data only that node reads.
    LocalOnly,
}

impl Placement {
    pub const ALL: [Placement; 4] = [Placement::Hash, Placement::Local, Placement::RoundRobin, Placement::LocalOnly];

    pub fn name(self) -> &'static str {
        match self {
            Placement::Hash => "hash",
            Placement::Local => "local",
            Placement::RoundRobin => "round-robin",
            Placement::LocalOnly => "local-only",
        }
    }
}

impl fmt::Display for Placement {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Placement {
    type Err = Error;
    fn from_str(s: &str) -> Result<Placement> {
        (Placement::ALL.into_iter().find(|p| p.name() == s)).ok_or_else(|| {
            Error::invalid(format!("unknown placement policy {s:?} (one of: hash, local, round-robin, local-only)"))
        })
    }
}

/// What the replicas of a partition are kept apart by, beyond being on
/// different workers.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Spread {
    /// Different `--host` labels where the pool allows.
    #[default]
    Host,
    /// Different `--rack` labels where the pool allows (then hosts).
    Rack,
}

impl Spread {
    pub fn name(self) -> &'static str {
        match self {
            Spread::Host => "host",
            Spread::Rack => "rack",
        }
    }
}

impl fmt::Display for Spread {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Spread {
    type Err = Error;
    fn from_str(s: &str) -> Result<Spread> {
        match s {
            "host" => Ok(Spread::Host),
            "rack" => Ok(Spread::Rack),
            _ => Err(Error::invalid(format!("unknown spread {s:?} (one of: host, rack)"))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip() {
        for p in Placement::ALL {
            assert_eq!(p.name().parse::<Placement>().unwrap(), p);
        }
        assert_eq!("rack".parse::<Spread>().unwrap(), Spread::Rack);
        let e = "near".parse::<Placement>().unwrap_err();
        assert_eq!(e.message, r#"unknown placement policy "near" (one of: hash, local, round-robin, local-only)"#);
    }
}
