//! The Sentinels' switches of the named master, as unsafe windows. A switch is an unplanned
//! failover whatever caused it — the nemesis' `failover`, or the Sentinels failing over a
//! master that a `redis-pause` froze, which can finish after that fault's own window — and
//! loses what the new master had not replicated (SAFETY.md). Read from the Sentinels' and
//! servers' own view (`sentinel-view.jsonl`, see [`crate::sentinel_watch`]).
//!
//! Found by the seed-723 run: a `redis-pause` ended at 403.4 s, the Sentinels switched at
//! 404.5 s to a server that had not replicated since 389 s, and 2.2 s later a request ran
//! again for a key whose response had been stored on the old master, while a client paused
//! through the switch still replayed the old response.

use std::path::Path;

use serde::Deserialize;

use super::Window;

/// One line of the view: when, and what each Sentinel names as master.
#[derive(Debug, Deserialize)]
struct View {
    t: u64,
    named: Vec<String>,
}

/// The unsafe windows of `dir`'s Sentinel view (none without one): from each change of the
/// master a majority of Sentinels names, for `margin`.
pub fn read(dir: &Path, margin: u64) -> Vec<Window> {
    let Ok(text) = std::fs::read_to_string(dir.join("sentinel-view.jsonl")) else {
        return Vec::new();
    };
    let views: Vec<View> = text
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect();
    windows(&views, margin)
}

/// From each change of the master a majority of Sentinels names, for `margin` (as a
/// fault's window ends): a check whose span crosses the switch, reading after it what was
/// written before, is not judged.
fn windows(views: &[View], margin: u64) -> Vec<Window> {
    let mut out = Vec::new();
    let mut named: Option<&str> = None;
    for v in views {
        let now = majority(&v.named);
        if let (Some(before), Some(after)) = (named, now) {
            if before != after {
                out.push((v.t, v.t + margin));
            }
        }
        named = now.or(named);
    }
    out
}

/// The address most Sentinels name, if a majority agrees.
fn majority(named: &[String]) -> Option<&str> {
    named.iter().map(String::as_str).find(|a| {
        a.contains(':') && 2 * named.iter().filter(|b| b.as_str() == *a).count() > named.len()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn view(t: u64, named: [&str; 3]) -> View {
        View {
            t,
            named: named.map(String::from).to_vec(),
        }
    }

    #[test]
    fn each_switch_is_unsafe_for_a_margin() {
        let views = [
            view(0, ["a:1"; 3]),
            view(10, ["a:1", "b:2", "a:1"]),
            view(20, ["b:2"; 3]),
            view(30, ["a:1"; 3]),
        ];
        assert_eq!(windows(&views, 3), vec![(20, 23), (30, 33)]);
    }

    #[test]
    fn no_majority_and_no_answer_are_no_switch() {
        let views = [
            view(0, ["a:1"; 3]),
            view(10, ["b:2", "no answer", "a:1"]),
            view(20, ["no answer"; 3]),
            view(30, ["a:1"; 3]),
        ];
        assert!(windows(&views, 3).is_empty());
    }
}
