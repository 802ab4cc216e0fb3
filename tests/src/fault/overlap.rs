//! The interval-overlap checker: holders report when they entered and left their critical
//! section (on [`monotonic_ns`](super::clock::monotonic_ns)) and whether they still held the
//! lock when they left; no two sections of holders that still held it may overlap, and their
//! fencing tokens must grow in the order the sections ran.

use std::fmt;

/// One critical section as a holder reported it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Section {
    /// Who ran it (e.g. `<pid>/<task>`).
    pub holder: String,
    /// The fencing token of the hold.
    pub token: u64,
    /// Entered, on `CLOCK_MONOTONIC` (after the acquisition returned).
    pub enter_ns: u64,
    /// Left, on `CLOCK_MONOTONIC` (before the release was sent).
    pub exit_ns: u64,
    /// `LockGuard::is_held()` read after `exit_ns` was taken: false once `lost()` has fired
    /// or the lease ran out on the local clock. Only sections still held count as exclusive.
    pub held_at_exit: bool,
}

impl Section {
    /// Parses the `key=value` fields `holder`, `token`, `enter`, `exit` and `held` (0/1) of
    /// a reported line; `None` when one is missing or malformed.
    pub fn from_line(line: &str) -> Option<Section> {
        let field = |name: &str| {
            line.split_whitespace()
                .find_map(|kv| kv.strip_prefix(name)?.strip_prefix('='))
        };
        Some(Section {
            holder: field("holder")?.to_owned(),
            token: field("token")?.parse().ok()?,
            enter_ns: field("enter")?.parse().ok()?,
            exit_ns: field("exit")?.parse().ok()?,
            held_at_exit: match field("held")? {
                "1" => true,
                "0" => false,
                _ => return None,
            },
        })
    }

    /// The fields [`from_line`](Self::from_line) reads, as `key=value` pairs.
    pub fn to_fields(&self) -> String {
        format!(
            "holder={} token={} enter={} exit={} held={}",
            self.holder,
            self.token,
            self.enter_ns,
            self.exit_ns,
            u8::from(self.held_at_exit)
        )
    }
}

impl fmt::Display for Section {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.to_fields())
    }
}

/// What [`check`] found.
#[derive(Clone, Debug, Default)]
pub struct Verdict {
    /// Sections still held at exit: the ones that must be exclusive.
    pub checked: usize,
    /// Sections whose holder no longer held the lock at exit (lost or expired).
    pub not_held: usize,
    /// Pairs of checked sections that overlapped (earlier-entered first).
    pub overlaps: Vec<(Section, Section)>,
    /// Pairs of consecutive checked sections whose later one had a token not above the
    /// earlier one's.
    pub token_regressions: Vec<(Section, Section)>,
}

impl Verdict {
    /// True when nothing is wrong.
    pub fn is_clean(&self) -> bool {
        self.overlaps.is_empty() && self.token_regressions.is_empty()
    }
}

impl fmt::Display for Verdict {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} sections held at exit, {} not held; {} overlaps, {} token regressions",
            self.checked,
            self.not_held,
            self.overlaps.len(),
            self.token_regressions.len()
        )?;
        for (a, b) in self.overlaps.iter().chain(&self.token_regressions).take(5) {
            write!(f, "\n  [{a}] vs [{b}]")?;
        }
        Ok(())
    }
}

/// Checks the sections of holders that still held the lock at exit: none may overlap
/// another, and tokens must strictly increase in the order of entry.
pub fn check(sections: &[Section]) -> Verdict {
    let mut held: Vec<&Section> = sections.iter().filter(|s| s.held_at_exit).collect();
    held.sort_by_key(|s| (s.enter_ns, s.exit_ns));
    let mut verdict = Verdict {
        checked: held.len(),
        not_held: sections.len() - held.len(),
        ..Verdict::default()
    };
    // The section that reaches furthest so far: any later entry before its exit overlaps.
    let mut furthest: Option<&Section> = None;
    for pair in held.windows(2) {
        if pair[1].token <= pair[0].token {
            verdict
                .token_regressions
                .push((pair[0].clone(), pair[1].clone()));
        }
    }
    for s in held {
        if let Some(f) = furthest {
            if s.enter_ns < f.exit_ns {
                verdict.overlaps.push((f.clone(), s.clone()));
            }
        }
        if furthest.is_none_or(|f| s.exit_ns > f.exit_ns) {
            furthest = Some(s);
        }
    }
    verdict
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(holder: &str, token: u64, enter: u64, exit: u64, held: bool) -> Section {
        Section {
            holder: holder.into(),
            token,
            enter_ns: enter,
            exit_ns: exit,
            held_at_exit: held,
        }
    }

    #[test]
    fn back_to_back_sections_are_clean() {
        let v = check(&[s("a", 1, 0, 10, true), s("b", 2, 10, 20, true)]);
        assert!(v.is_clean(), "{v}");
        assert_eq!((v.checked, v.not_held), (2, 0));
    }

    #[test]
    fn overlap_is_found_even_behind_a_short_section() {
        // a spans b and c; c overlaps only a.
        let v = check(&[
            s("a", 1, 0, 100, true),
            s("b", 2, 10, 20, true),
            s("c", 3, 50, 60, true),
        ]);
        assert_eq!(v.overlaps.len(), 2, "{v}");
        assert!(v.overlaps.iter().all(|(x, _)| x.holder == "a"));
    }

    #[test]
    fn sections_not_held_at_exit_do_not_count() {
        let v = check(&[s("a", 1, 0, 100, false), s("b", 2, 10, 20, true)]);
        assert!(v.is_clean(), "{v}");
        assert_eq!((v.checked, v.not_held), (1, 1));
    }

    #[test]
    fn a_token_that_does_not_grow_is_a_regression() {
        let v = check(&[s("a", 5, 0, 10, true), s("b", 5, 20, 30, true)]);
        assert_eq!(v.token_regressions.len(), 1, "{v}");
        assert!(v.overlaps.is_empty());
    }

    #[test]
    fn lines_round_trip() {
        let section = s("42/3", 7, 100, 200, true);
        let line = format!("EXIT {} fenced=accepted", section.to_fields());
        assert_eq!(Section::from_line(&line), Some(section));
        assert_eq!(Section::from_line("EXIT holder=1 token=x"), None);
    }
}
