//! The published `redlimit` crate carries its Lua scripts, and every file
//! its README links to.

use std::process::Command;

/// `cargo package --list -p redlimit`: the files the published crate holds.
fn packaged_files() -> Vec<String> {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let output = Command::new(cargo)
        .args(["package", "--list", "--allow-dirty", "-p", "redlimit"])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .expect("run cargo package --list");
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    String::from_utf8_lossy(&output.stdout).lines().map(str::to_string).collect()
}

#[test]
fn the_runtime_crate_packages_every_script() {
    let listing = packaged_files();
    for algo in ["prelude", "fixed_window", "sliding_window", "sliding_log", "token_bucket", "leaky_bucket", "gcra"] {
        assert!(listing.iter().any(|l| *l == format!("lua/{algo}.lua")), "lua/{algo}.lua missing from:\n{listing:#?}");
    }
}

/// The README the crate ships, as `readme` in its manifest names it.
fn packaged_readme() -> String {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let manifest = std::fs::read_to_string(root.join("ratelimit/Cargo.toml")).unwrap();
    let readme = manifest
        .lines()
        .find_map(|line| line.strip_prefix("readme = \"")?.strip_suffix('"'))
        .expect("ratelimit/Cargo.toml names its readme");
    std::fs::read_to_string(root.join("ratelimit").join(readme)).unwrap()
}

/// Every link target in Markdown `text`, outside code: `[text](target)` and
/// `[label]: target`.
fn link_targets(text: &str) -> Vec<String> {
    let mut targets = Vec::new();
    let mut fenced = false;
    for line in text.lines() {
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
            continue;
        }
        if fenced {
            continue;
        }
        // Code spans are text, not links: drop them before looking.
        let prose: String = line.split('`').step_by(2).collect::<Vec<_>>().join(" ");
        if let Some(rest) = prose.trim_start().strip_prefix('[') {
            if let Some((_, target)) = rest.split_once("]: ") {
                targets.push(target.split_whitespace().next().unwrap_or("").to_string());
                continue;
            }
        }
        let mut rest = prose.as_str();
        while let Some(at) = rest.find("](") {
            let after = &rest[at + 2..];
            let end = after.find(')').unwrap_or(after.len());
            targets.push(after[..end].split_whitespace().next().unwrap_or("").to_string());
            rest = &after[end..];
        }
    }
    targets
}

#[test]
fn every_relative_link_in_the_packaged_readme_names_a_packaged_file() {
    let readme = packaged_readme();
    let listing = packaged_files();
    assert!(listing.iter().any(|l| l == "README.md"), "no README.md in:\n{listing:#?}");
    let targets = link_targets(&readme);
    assert!(targets.iter().any(|t| t.starts_with("https://")), "the link scan found no links at all: {targets:?}");
    let relative: Vec<&String> = targets.iter().filter(|t| !t.contains("://") && !t.starts_with('#')).collect();
    for target in &relative {
        // The package's README sits at its root, where its links start.
        let file = target.split('#').next().unwrap_or("").trim_start_matches("./");
        assert!(
            listing.iter().any(|l| l == file),
            "README links to `{target}`, which the published crate does not hold (add it to `include` in \
             ratelimit/Cargo.toml, or link to where it is published):\n{listing:#?}"
        );
    }
}

#[test]
fn the_link_scan_sees_links_and_skips_code() {
    let text = "See [the design](ARCHITECTURE.md#files) and [docs](https://docs.rs/x).\n\
                `[not](a-link.md)` and\n```\n[neither](code.md)\n```\n[label]: BENCHMARKS.md \"title\"\n";
    assert_eq!(link_targets(text), ["ARCHITECTURE.md#files", "https://docs.rs/x", "BENCHMARKS.md"]);
}
