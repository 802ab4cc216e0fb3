//! Compile-time behaviour of `#[distributed_lock]`: the errors for what must not compile, one
//! failure per file, messages pinned in the `.stderr` files. (What must compile is part of
//! the tests crate's `macros` target, built like any other code.)
//!
//! Regenerate the expected output with `TRYBUILD=overwrite` after a deliberate change.

#[test]
fn macro_ui() {
    trybuild::TestCases::new().compile_fail("ui/fail/*.rs");
}
