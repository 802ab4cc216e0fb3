//! Nothing: this package only holds the trybuild cases under `ui/` and `tests/ui.rs`.
