//! The README's error type stays what `readme-error-type/` holds (which
//! `.ci/run`'s clippy lints, with its default lints, as a user's crate), and
//! a denial stays one word, so a `Result` holding it, or an error enum
//! wrapping it, trips no `result_large_err` or `large_enum_variant`.

use redlimit::RateLimited;
use std::mem::size_of;
use std::path::Path;

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// The README's `rust` code blocks, in order.
fn readme_blocks() -> Vec<String> {
    let readme = std::fs::read_to_string(root().join("README.md")).unwrap();
    readme.split("```rust\n").skip(1).map(|rest| rest.split("```").next().unwrap().to_string()).collect()
}

fn crate_file(name: &str) -> String {
    std::fs::read_to_string(root().join("readme-error-type/src").join(name)).unwrap()
}

#[test]
fn the_readmes_error_type_is_the_crate_clippy_lints() {
    let blocks = readme_blocks();
    assert_eq!(
        blocks[0],
        crate_file("readme_error_type.rs"),
        "README's first example: copy it to readme-error-type/src/"
    );
    // The second example's function, without the lines around it that run it.
    let helper = crate_file("readme_helper.rs");
    assert!(helper.starts_with("#[rate_limit("), "{helper}");
    assert!(
        blocks[1].contains(&helper),
        "README's second example's function is readme-error-type/src/readme_helper.rs:\n{helper}"
    );
}

#[test]
fn a_denial_is_one_word_so_results_holding_it_stay_small() {
    assert!(size_of::<RateLimited>() <= size_of::<usize>(), "{} bytes", size_of::<RateLimited>());
    assert!(size_of::<Result<(), RateLimited>>() <= size_of::<usize>());
    assert!(size_of::<redlimit_readme_error_type::ApiError>() <= size_of::<usize>());
    assert!(size_of::<Result<String, redlimit_readme_error_type::ApiError>>() <= size_of::<String>());
}
