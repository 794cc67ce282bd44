//! Durations as people write them: `500ms`, `30s`, `2m`, `1h`, or a bare
//! number of seconds (`1.5`).

use crate::{Error, Result};
use std::fmt;
use std::str::FromStr;
use std::time::Duration;

/// A length of time for configuration and command lines.
#[derive(Copy, Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Span(pub Duration);

impl FromStr for Span {
    type Err = Error;

    fn from_str(s: &str) -> Result<Span> {
        let bad = || {
            Error::invalid(format!(
                "invalid duration '{s}': expected a number with a unit such as 500ms, 30s, 2m or 1h"
            ))
        };
        let t = s.trim();
        let split = t.find(|c: char| !(c.is_ascii_digit() || c == '.')).unwrap_or(t.len());
        let (num, unit) = t.split_at(split);
        let n: f64 = num.parse().map_err(|_| bad())?;
        let secs = match unit.trim() {
            "ms" => n / 1000.0,
            "" | "s" => n,
            "m" | "min" => n * 60.0,
            "h" => n * 3600.0,
            _ => return Err(bad()),
        };
        Duration::try_from_secs_f64(secs).map(Span).map_err(|_| bad())
    }
}

impl fmt::Display for Span {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let ms = self.0.as_millis();
        if !ms.is_multiple_of(1000) {
            write!(f, "{ms}ms")
        } else if !ms.is_multiple_of(60_000) || ms == 0 {
            write!(f, "{}s", ms / 1000)
        } else {
            write!(f, "{}m", ms / 60_000)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_and_prints_common_forms() {
        for (s, d, back) in
            [("500ms", 500, "500ms"), ("30s", 30_000, "30s"), ("2m", 120_000, "2m"), ("1.5", 1500, "1500ms")]
        {
            let v: Span = s.parse().unwrap();
            assert_eq!(v.0, Duration::from_millis(d), "{s}");
            assert_eq!(v.to_string(), back);
        }
        assert_eq!("1h".parse::<Span>().unwrap().0, Duration::from_secs(3600));
    }

    #[test]
    fn refuses_garbage_with_a_clear_message() {
        for s in ["", "s", "5x", "-1s", "1e400s", "1.2.3s"] {
            let e = s.parse::<Span>().unwrap_err();
            assert!(e.message.contains("invalid duration"), "{s}: {}", e.message);
        }
    }
}
