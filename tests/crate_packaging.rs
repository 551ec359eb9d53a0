//! The published `redlimit` crate carries its Lua scripts.

use std::process::Command;

#[test]
fn the_runtime_crate_packages_every_script() {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let output = Command::new(cargo)
        .args(["package", "--list", "--allow-dirty", "-p", "redlimit"])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .expect("run cargo package --list");
    let listing = String::from_utf8_lossy(&output.stdout);
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    for algo in ["prelude", "fixed_window", "sliding_window", "sliding_log", "token_bucket", "leaky_bucket", "gcra"] {
        assert!(listing.lines().any(|l| l == format!("lua/{algo}.lua")), "lua/{algo}.lua missing from:\n{listing}");
    }
}
