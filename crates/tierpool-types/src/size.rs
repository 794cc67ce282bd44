//! Byte sizes as people write them: `512MiB`, `4GiB`, `1.5GB`, `4096`.

use crate::{Error, Result};
use serde::{Deserialize, Serialize};
use std::fmt;
use std::str::FromStr;

/// A number of bytes. Parses binary (`KiB`, `MiB`, `GiB`, `TiB`) and decimal
/// (`KB`, `MB`, `GB`, `TB`) suffixes, case-insensitive, with an optional `B`.
#[derive(Copy, Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Default, Serialize, Deserialize)]
pub struct ByteSize(pub u64);

const UNITS: &[(&str, u64)] = &[
    ("", 1),
    ("b", 1),
    ("k", 1 << 10),
    ("kib", 1 << 10),
    ("kb", 1_000),
    ("m", 1 << 20),
    ("mib", 1 << 20),
    ("mb", 1_000_000),
    ("g", 1 << 30),
    ("gib", 1 << 30),
    ("gb", 1_000_000_000),
    ("t", 1 << 40),
    ("tib", 1 << 40),
    ("tb", 1_000_000_000_000),
];

impl FromStr for ByteSize {
    type Err = Error;

    fn from_str(s: &str) -> Result<Self> {
        let bad = || {
            Error::invalid(format!(
                "invalid size '{s}': expected a number with an optional unit such as 512MiB or 4GiB"
            ))
        };
        let t = s.trim();
        let split = t.find(|c: char| !(c.is_ascii_digit() || c == '.')).unwrap_or(t.len());
        let (num, unit) = t.split_at(split);
        if num.is_empty() {
            return Err(bad());
        }
        let unit = unit.trim().to_ascii_lowercase();
        let mult = UNITS.iter().find(|(u, _)| *u == unit).map(|(_, m)| *m).ok_or_else(bad)?;
        if let Ok(n) = num.parse::<u64>() {
            return n.checked_mul(mult).map(ByteSize).ok_or_else(bad);
        }
        let f: f64 = num.parse().map_err(|_| bad())?;
        let v = f * mult as f64;
        if !v.is_finite() || v < 0.0 || v > u64::MAX as f64 {
            return Err(bad());
        }
        Ok(ByteSize(v.round() as u64))
    }
}

impl fmt::Display for ByteSize {
    /// Exact binary unit when the value is a whole multiple, else one decimal.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let units = [("TiB", 1u64 << 40), ("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)];
        for (name, m) in units {
            if self.0 >= m {
                if self.0.is_multiple_of(m) {
                    return write!(f, "{}{}", self.0 / m, name);
                }
                return write!(f, "{:.1}{}", self.0 as f64 / m as f64, name);
            }
        }
        write!(f, "{}B", self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn parses_common_forms() {
        assert_eq!("512MiB".parse::<ByteSize>().unwrap(), ByteSize(512 << 20));
        assert_eq!("4GiB".parse::<ByteSize>().unwrap(), ByteSize(4 << 30));
        assert_eq!("4096".parse::<ByteSize>().unwrap(), ByteSize(4096));
        assert_eq!("1.5GiB".parse::<ByteSize>().unwrap(), ByteSize(3 << 29));
        assert_eq!("10mb".parse::<ByteSize>().unwrap(), ByteSize(10_000_000));
        assert_eq!("64k".parse::<ByteSize>().unwrap(), ByteSize(65536));
    }

    #[test]
    fn rejects_garbage_with_a_clear_message() {
        for s in ["", "MiB", "12XB", "1.2.3GiB", "-5", "99999999999999999999TiB"] {
            let e = s.parse::<ByteSize>().unwrap_err();
            assert_eq!(e.kind, crate::ErrorKind::InvalidArgument, "{s}");
            assert!(e.message.contains("invalid size"), "{s}: {}", e.message);
        }
    }

    proptest! {
        #[test]
        fn display_round_trips_exact_multiples(n in 0u64..1 << 20, shift in prop::sample::select(vec![0u32, 10, 20, 30])) {
            let v = ByteSize(n << shift);
            let back: ByteSize = v.to_string().parse().unwrap();
            if v.to_string().contains('.') {
                prop_assert!((back.0 as f64 - v.0 as f64).abs() / (v.0 as f64) < 0.05);
            } else {
                prop_assert_eq!(back, v);
            }
        }
    }
}
