//! Holder metadata: who holds a lock, recorded at acquisition for operators.
//!
//! Each acquisition writes the field `distlock:holder` (`HOLDER_FIELD` in `library/common.lua`;
//! never an owner id: those are `<uuid>:<n>`) of the lock's hash in the same call
//! that takes the lock (no extra round trip, no key of its own): the hold's fencing token,
//! the owner, and the service name, host, process id and an optional request id. The
//! acquisition time is the token's (the Redis clock in µs). It lives and dies with the
//! lock; Redisson's scripts only read their own owner's field, so the layout stays theirs.

use std::fmt;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// Separates the fields of the encoded metadata (the Lua side splits on it).
const SEP: char = '\u{1f}';
/// Longest recorded value, in bytes: keeps queue entries and records small.
const MAX_VALUE: usize = 200;

/// What this client records about its holds.
#[derive(Clone, Debug)]
pub(crate) struct HolderConfig {
    pub(crate) service: String,
    pub(crate) host: String,
    pub(crate) enabled: bool,
}

impl Default for HolderConfig {
    fn default() -> Self {
        Self {
            service: default_service(),
            host: default_host(),
            enabled: true,
        }
    }
}

impl HolderConfig {
    /// The encoded metadata of one acquisition (empty when recording is off): service, host,
    /// pid and request id, joined by byte 31. `|` inside is harmless: only the first two
    /// `|` of a queue entry separate its fields.
    pub(crate) fn encode(&self, request_id: Option<&str>) -> String {
        if !self.enabled {
            return String::new();
        }
        let pid = std::process::id().to_string();
        [
            self.service.as_str(),
            self.host.as_str(),
            &pid,
            request_id.unwrap_or(""),
        ]
        .iter()
        .map(|v| clean(v))
        .collect::<Vec<_>>()
        .join(&SEP.to_string())
    }
}

/// Who holds a lock, as recorded by the distlock client that acquired it.
///
/// Locks taken by Redisson clients have no record.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HolderInfo {
    owner: String,
    service: String,
    host: String,
    pid: Option<u32>,
    request_id: Option<String>,
    acquired_at: SystemTime,
}

impl HolderInfo {
    /// Parses the fields the functions answer: owner, service, host, pid, acquired-at (ms since
    /// the Unix epoch) and request id. `None` when there is no record.
    pub(crate) fn from_fields(fields: &[String]) -> Option<Self> {
        let [owner, service, host, pid, at, request_id] = fields else {
            return None;
        };
        Some(Self {
            owner: owner.clone(),
            service: service.clone(),
            host: host.clone(),
            pid: pid.parse().ok(),
            request_id: Some(request_id.clone()).filter(|r| !r.is_empty()),
            acquired_at: UNIX_EPOCH + Duration::from_millis(at.parse().ok()?),
        })
    }

    /// Reads a record as the functions store it — token, owner, then service, host, pid and
    /// request id when recorded, joined by byte 31 — into the token (0 without one) and the
    /// holder (`None` without metadata). Parsed here, not in Lua: a busy answer costs Redis
    /// no string work.
    pub(crate) fn from_record(record: &str) -> (u64, Option<Self>) {
        let mut parts = record.split(SEP);
        let token: u64 = parts.next().and_then(|t| t.parse().ok()).unwrap_or(0);
        let owner = parts.next().unwrap_or_default();
        let meta: Vec<&str> = parts.collect();
        let [service, host, rest @ ..] = meta.as_slice() else {
            return (token, None);
        };
        let info = Self {
            owner: owner.to_owned(),
            service: (*service).to_owned(),
            host: (*host).to_owned(),
            pid: rest.first().and_then(|p| p.parse().ok()),
            request_id: rest
                .get(1)
                .filter(|r| !r.is_empty())
                .map(|r| (*r).to_owned()),
            acquired_at: UNIX_EPOCH + Duration::from_millis(token / 1000),
        };
        (token, Some(info))
    }

    /// The Redis owner id (`<client uuid>:<number>`) of the hold.
    pub fn owner(&self) -> &str {
        &self.owner
    }

    /// The holder's service name (see [`LockClientBuilder::service_name`](crate::LockClientBuilder::service_name)).
    pub fn service(&self) -> &str {
        &self.service
    }

    /// The holder's host name.
    pub fn host(&self) -> &str {
        &self.host
    }

    /// The holder's process id.
    pub fn pid(&self) -> Option<u32> {
        self.pid
    }

    /// The request id given with [`LockRequest::request_id`](crate::LockRequest::request_id).
    pub fn request_id(&self) -> Option<&str> {
        self.request_id.as_deref()
    }

    /// When the hold began, by the Redis server's clock.
    pub fn acquired_at(&self) -> SystemTime {
        self.acquired_at
    }

    /// Milliseconds since the Unix epoch of [`acquired_at`](Self::acquired_at).
    pub fn acquired_at_ms(&self) -> u64 {
        let since = self.acquired_at.duration_since(UNIX_EPOCH);
        since.map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
    }
}

/// `service@host (pid N, request R) since 2024-05-01T03:12:09.123Z`.
impl fmt::Display for HolderInfo {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}@{}", self.service, self.host)?;
        match (self.pid, &self.request_id) {
            (Some(pid), Some(r)) => write!(f, " (pid {pid}, request {r})")?,
            (Some(pid), None) => write!(f, " (pid {pid})")?,
            (None, Some(r)) => write!(f, " (request {r})")?,
            (None, None) => {}
        }
        write!(f, " since {}", rfc3339(self.acquired_at_ms()))
    }
}

/// Formats ms since the Unix epoch as an RFC 3339 UTC time with milliseconds.
pub(crate) fn rfc3339(ms: u64) -> String {
    let (days, rem) = (ms / 86_400_000, ms % 86_400_000);
    let (h, m, s, milli) = (
        rem / 3_600_000,
        rem / 60_000 % 60,
        rem / 1000 % 60,
        rem % 1000,
    );
    // Howard Hinnant's civil_from_days, for days since 1970-01-01 (never negative here).
    let z = days + 719_468;
    let era = z / 146_097;
    let doe = z % 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + u64::from(month <= 2);
    format!("{year:04}-{month:02}-{day:02}T{h:02}:{m:02}:{s:02}.{milli:03}Z")
}

/// Control bytes (the separator among them) become `?`; values are cut at [`MAX_VALUE`].
fn clean(value: &str) -> String {
    let mut out = String::with_capacity(value.len().min(MAX_VALUE));
    for c in value.chars() {
        if out.len() + c.len_utf8() > MAX_VALUE {
            break;
        }
        out.push(if c.is_control() { '?' } else { c });
    }
    out
}

fn default_service() -> String {
    std::env::var("DISTLOCK_SERVICE")
        .ok()
        .filter(|s| !s.is_empty())
        .or_else(|| {
            let exe = std::env::current_exe().ok()?;
            Some(exe.file_stem()?.to_string_lossy().into_owned())
        })
        .unwrap_or_else(|| "unknown".to_owned())
}

fn default_host() -> String {
    std::env::var("HOSTNAME")
        .ok()
        .or_else(|| std::fs::read_to_string("/proc/sys/kernel/hostname").ok())
        .or_else(|| std::fs::read_to_string("/etc/hostname").ok())
        .map(|h| h.trim().to_owned())
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "unknown".to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn encoding_keeps_separators_out_of_values() {
        let config = HolderConfig {
            service: "bil\u{1f}ling|x".to_owned(),
            host: "h\n1".to_owned(),
            enabled: true,
        };
        let meta = config.encode(Some("req|7"));
        let fields: Vec<&str> = meta.split(SEP).collect();
        assert_eq!(fields[0], "bil?ling|x");
        assert_eq!(fields[1], "h?1");
        assert_eq!(fields[3], "req|7");
        let off = HolderConfig {
            enabled: false,
            ..config
        };
        assert_eq!(off.encode(Some("r")), "");
    }

    #[test]
    fn long_values_are_cut_on_a_char_boundary() {
        let cut = clean(&"é".repeat(150));
        assert!(cut.len() <= MAX_VALUE && cut.chars().all(|c| c == 'é'));
    }

    #[test]
    fn times_are_rfc3339_utc() {
        assert_eq!(rfc3339(0), "1970-01-01T00:00:00.000Z");
        assert_eq!(rfc3339(951_782_400_123), "2000-02-29T00:00:00.123Z");
        assert_eq!(rfc3339(1_714_533_129_456), "2024-05-01T03:12:09.456Z");
    }

    #[test]
    fn records_read_as_the_fields_the_functions_answered() {
        let meta = ["billing", "web-3", "4242", "req-1"].join("\u{1f}");
        let record = format!("1714533129456789\u{1f}u:1\u{1f}{meta}");
        let (token, info) = HolderInfo::from_record(&record);
        let fields =
            ["u:1", "billing", "web-3", "4242", "1714533129456", "req-1"].map(String::from);
        assert_eq!(token, 1_714_533_129_456_789);
        assert_eq!(
            info.unwrap().to_string(),
            HolderInfo::from_fields(&fields).unwrap().to_string()
        );
        assert_eq!(HolderInfo::from_record("17\u{1f}u:1"), (17, None));
        assert_eq!(HolderInfo::from_record(""), (0, None));
    }

    #[test]
    fn display_says_who_and_since_when() {
        let fields = ["u:1", "billing", "web-3", "4242", "1714533129456", ""].map(String::from);
        let info = HolderInfo::from_fields(&fields).unwrap();
        assert_eq!(
            info.to_string(),
            "billing@web-3 (pid 4242) since 2024-05-01T03:12:09.456Z"
        );
        assert!(HolderInfo::from_fields(&fields[..2]).is_none());
    }
}
