//! `holder guarded <lock url> <plain url> <name> <lease ms> guarded|plain`: a holder that
//! checks it holds the lock, then — after whatever pause the test injects — writes the
//! stock key beside it without checking again: a guarded `DECR` (one call that commits only
//! while the hold is current), or for the negative control a plain `DECR` sent to
//! `<plain url>`.
//!
//! Prints `READY token=… held=0|1` once it holds the lock (the check), and on the stdin
//! line `WRITE` prints `WROTE write=written value=<stock after>`, `WROTE write=lost`
//! (refused: nothing written) or `WROTE write=error …`, then `retries=<n>` for a guarded
//! write retried after Redis was unavailable.

use std::time::Duration;

use distlock_tests::fault::lock_url;
use lock_core::LockGuard;

use crate::{client, flag, stdin_lines, usage};

/// The stock key's suffix: `{<lock key>}:stock`, in the lock's slot.
const STOCK: &str = "stock";

pub async fn run(args: &[String], lease: Duration) {
    let (lock_url, plain_url, name) = (&args[1], &args[2], &args[3]);
    let guarded = match args.get(5).map(String::as_str) {
        Some("guarded") => true,
        Some("plain") => false,
        _ => usage(),
    };
    let locks = client(lock_url, lease);
    let guard = match locks
        .lock(name.as_str())
        .wait(Duration::from_secs(20))
        .await
    {
        Ok(guard) => guard,
        Err(e) => {
            println!("ERROR acquire: {e}");
            std::process::exit(1);
        }
    };
    println!(
        "READY token={} held={}",
        guard.fencing_token(),
        flag(guard.is_held())
    );
    let mut stdin = stdin_lines();
    while let Some(command) = stdin.recv().await {
        if command.trim() != "WRITE" {
            println!("ERROR unknown command {command:?}");
            continue;
        }
        let outcome = if guarded {
            guarded_decr(&guard).await
        } else {
            plain_decr(plain_url, &guard.key(STOCK)).await
        };
        println!("WROTE write={outcome}");
    }
}

/// Tries of a write that met an unavailable Redis (its connection broke, as after a
/// restart): a service retries such a call; nothing was written by a failed try.
const TRIES: u32 = 5;

/// The guarded write: `DECR` of the stock, committed only while this hold is current.
/// Retried as a service would after a failed connection (`retries=…` tells how often).
async fn guarded_decr(guard: &LockGuard) -> String {
    let mut decr = redis::pipe();
    decr.cmd("DECR").arg(guard.key(STOCK));
    let mut retries = 0;
    loop {
        let outcome = match guard.write::<(i64,)>(&decr).await {
            Ok((value,)) => format!("written value={value}"),
            Err(e) if e.is_lost() => "lost".to_owned(),
            Err(e) if e.is_unavailable() && retries + 1 < TRIES => {
                retries += 1;
                tokio::time::sleep(Duration::from_millis(200)).await;
                continue;
            }
            Err(e) => format!("error {e}"),
        };
        return format!("{outcome} retries={retries}");
    }
}

/// The negative control: the same `DECR`, sent as a plain command.
async fn plain_decr(plain_url: &str, key: &str) -> String {
    let mut decr = redis::pipe();
    decr.cmd("DECR").arg(key);
    match lock_url::plain_query::<(i64,)>(plain_url, &decr).await {
        Ok((value,)) => format!("written value={value}"),
        Err(e) => format!("error {e}"),
    }
}
