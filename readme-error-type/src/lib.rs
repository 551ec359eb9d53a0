//! The README's error type, as a user's crate holds it: the README's first
//! example and the function of its second (a helper returning
//! `Result<_, RateLimited>`), word for word (`tests/readme_error_type.rs`
//! compares them), linted by `.ci/run`'s
//! `cargo clippy --workspace --all-targets -- -D warnings` with clippy's
//! default lints only, as a user's crate would be. Included rather than
//! written here, so rustfmt leaves them as the README shows them.

include!("readme_error_type.rs");
include!("readme_helper.rs");
