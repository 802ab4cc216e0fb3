//! Compile-time behaviour of `#[distributed_lock]`: what compiles, and the errors for what
//! must not (one failure per file, messages pinned in the `.stderr` files).
//!
//! Regenerate the expected output with `TRYBUILD=overwrite` after a deliberate change.

#[test]
fn macro_ui() {
    let t = trybuild::TestCases::new();
    t.pass("ui/pass/*.rs");
    t.compile_fail("ui/fail/*.rs");
}
