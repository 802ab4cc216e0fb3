//! Heap allocations of one uncontended acquire + release on one server:
//! a counting global allocator sees every allocation of the process — the library's, redis'
//! and tokio's, on every thread — during a window in which the test itself allocates nothing.
//!
//! Its own target: a `#[global_allocator]` is one per binary.

// A global allocator is an `unsafe impl`: each method only forwards to `System`.
#![allow(unsafe_code)]

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicU64, Ordering};

use distlock_tests::locks::client;
use distlock_tests::RedisServer;

/// `System`, counting the calls that allocate (`alloc`, `alloc_zeroed`, `realloc`).
struct Counting;

static ALLOCATIONS: AtomicU64 = AtomicU64::new(0);

// SAFETY: every call is passed on unchanged to `System`, which upholds the contract.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
        // SAFETY: the caller's guarantees for `layout` are `System`'s.
        unsafe { System.alloc(layout) }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
        // SAFETY: as `alloc`.
        unsafe { System.alloc_zeroed(layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
        // SAFETY: `ptr` came from this allocator, that is from `System`.
        unsafe { System.realloc(ptr, layout, new_size) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: `ptr` came from this allocator, that is from `System`.
        unsafe { System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

/// The budget for the client side of one uncontended cycle.
const BUDGET: f64 = 30.0;
/// Cycles before counting: connections made, the library loaded (once), caches
/// and the pools of tokio and redis grown to their steady size.
const WARM_UP: usize = 200;
const CYCLES: usize = 2_000;

/// Distinct names, made before the count starts (so their allocations are not counted).
fn names(prefix: &str, n: usize) -> Vec<String> {
    (0..n).map(|i| format!("{prefix}_{i}")).collect()
}

/// One client, one task, distinct names, default settings (watchdog on: its 10 s tick never
/// falls in the window), `metrics` with no recorder installed (the tests crate enables the
/// feature): the figure a user's uncontended lock costs.
#[tokio::test(flavor = "current_thread")]
async fn an_uncontended_acquire_and_release_allocates_little() {
    let server = RedisServer::start();
    let locks = client(&server.url());
    for name in names("warm", WARM_UP) {
        let guard = locks.lock(name).await.expect("acquire");
        guard.release().await.expect("release");
    }
    let names = names("count", CYCLES);
    let before = ALLOCATIONS.load(Ordering::Relaxed);
    for name in names {
        let guard = locks.lock(name).await.expect("acquire");
        guard.release().await.expect("release");
    }
    let counted = ALLOCATIONS.load(Ordering::Relaxed) - before;
    let per_cycle = counted as f64 / CYCLES as f64;
    println!("allocations per uncontended acquire+release: {per_cycle:.1}");
    assert!(
        per_cycle <= BUDGET,
        "{per_cycle:.1} allocations per cycle, over the budget of {BUDGET}"
    );
}
