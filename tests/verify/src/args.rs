//! The command line: `--topology single|cluster|sentinel|redlock --secs N --seed S
//! [--faults a,b,…|all|none] [--control unfenced|nolock|dead-grant] [--clients N] [--tasks N]
//! [--handoff-bound-ms MS] [--out DIR]`, and the client sub-mode the controller starts.

use std::collections::HashMap;
use std::fmt;
use std::path::PathBuf;
use std::str::FromStr;

/// Where the locks live.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Topology {
    /// One server, behind the TCP proxy.
    Single,
    /// Three masters with a replica each.
    Cluster,
    /// A master, a replica and three Sentinels.
    Sentinel,
    /// Three independent masters.
    Redlock,
}

impl FromStr for Topology {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        Ok(match s {
            "single" => Self::Single,
            "cluster" => Self::Cluster,
            "sentinel" => Self::Sentinel,
            "redlock" => Self::Redlock,
            _ => {
                return Err(format!(
                    "unknown topology {s:?} (single, cluster, sentinel, redlock)"
                ))
            }
        })
    }
}

impl fmt::Display for Topology {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Single => "single",
            Self::Cluster => "cluster",
            Self::Sentinel => "sentinel",
            Self::Redlock => "redlock",
        })
    }
}

/// A negative control: a run that must show violations.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Control {
    /// The resource accepts every write, whatever its token.
    Unfenced,
    /// The clients skip the locks (token 0).
    NoLock,
    /// The nemesis kills waiters, and whenever a killed client's owner turns up as a holder
    /// it sets the lock's TTL to a long lease: what a hand-off to a dead waiter did before
    /// grants carried a short claim (the hand-off checker must fire).
    DeadGrant,
}

impl Control {
    /// Whether the client processes run differently under this control (the others are
    /// the controller's alone).
    pub fn in_clients(self) -> bool {
        match self {
            Self::Unfenced | Self::NoLock => true,
            Self::DeadGrant => false,
        }
    }
}

impl FromStr for Control {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "unfenced" => Ok(Self::Unfenced),
            "nolock" => Ok(Self::NoLock),
            "dead-grant" => Ok(Self::DeadGrant),
            _ => Err(format!(
                "unknown control {s:?} (unfenced, nolock, dead-grant)"
            )),
        }
    }
}

impl fmt::Display for Control {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Unfenced => "unfenced",
            Self::NoLock => "nolock",
            Self::DeadGrant => "dead-grant",
        })
    }
}

/// Parsed `--key value` pairs.
#[derive(Debug, Default)]
pub struct Args(HashMap<String, String>);

impl Args {
    /// Parses `--key value` pairs (every option takes a value).
    ///
    /// # Errors
    /// On a stray word or an option without a value.
    pub fn parse(words: impl IntoIterator<Item = String>) -> Result<Self, String> {
        let mut map = HashMap::new();
        let mut words = words.into_iter();
        while let Some(word) = words.next() {
            let key = word
                .strip_prefix("--")
                .ok_or_else(|| format!("unexpected argument {word:?}"))?;
            let value = words
                .next()
                .ok_or_else(|| format!("--{key} needs a value"))?;
            map.insert(key.to_owned(), value);
        }
        Ok(Self(map))
    }

    /// The raw value of `--key`.
    pub fn get(&self, key: &str) -> Option<&str> {
        self.0.get(key).map(String::as_str)
    }

    /// `--key` parsed, or `default` when absent.
    ///
    /// # Errors
    /// When the value does not parse.
    pub fn or<T: FromStr>(&self, key: &str, default: T) -> Result<T, String>
    where
        T::Err: fmt::Display,
    {
        match self.get(key) {
            None => Ok(default),
            Some(v) => v.parse().map_err(|e| format!("--{key} {v:?}: {e}")),
        }
    }

    /// `--key` parsed; an error when absent.
    ///
    /// # Errors
    /// When absent or not parseable.
    pub fn need<T: FromStr>(&self, key: &str) -> Result<T, String>
    where
        T::Err: fmt::Display,
    {
        let v = self
            .get(key)
            .ok_or_else(|| format!("--{key} is required"))?;
        v.parse().map_err(|e| format!("--{key} {v:?}: {e}"))
    }

    /// `--key` as an optional path.
    pub fn path(&self, key: &str) -> Option<PathBuf> {
        self.get(key).map(PathBuf::from)
    }
}

/// The usage line.
pub const USAGE: &str =
    "usage: distlock-verify --topology single|cluster|sentinel|redlock --secs N --seed S \
[--faults all|none|a,b,…] [--control unfenced|nolock|dead-grant] [--clients N] [--tasks N] \
[--handoff-bound-ms MS] [--out DIR]";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn options_parse_and_defaults_apply() {
        let words = ["--topology", "cluster", "--secs", "60"].map(String::from);
        let args = Args::parse(words).unwrap();
        assert_eq!(
            args.need::<Topology>("topology").unwrap(),
            Topology::Cluster
        );
        assert_eq!(args.need::<u64>("secs").unwrap(), 60);
        assert_eq!(args.or("seed", 7u64).unwrap(), 7);
        assert!(args.need::<u64>("seed").is_err());
        assert!(Args::parse(["stray".to_owned()]).is_err());
        assert!("bogus".parse::<Topology>().is_err());
    }
}
