#![cfg(feature = "redis")]
//! The scripts Redis runs, as the runtime assembles them from the fragments
//! in `ratelimit/lua/`, are checked in under `ratelimit/lua/assembled/`: one
//! file per family, and its cross-slot variant (what a cluster whose masters
//! take scripts across slots runs). A change to a fragment or to how they
//! are joined is then a visible diff of what Redis will run, and luacheck
//! (`scripts/test`) reads exactly that.
//!
//! When the change is intended, bless it and commit the files:
//!
//! ```text
//! REDLIMIT_BLESS=1 cargo test --test lua_assembled
//! ```

use redlimit::__private::{cross_slot_script_source, script_source};
use redlimit::Policy;
use std::path::{Path, PathBuf};

/// Each family by a policy the runtime decides with it, and whether that
/// policy runs on Redis's clock (a fixed window of one strategy is a
/// counter there, the hash layout on a client's clock).
fn families() -> Vec<(&'static str, Policy, bool)> {
    vec![
        ("fixed_window", Policy::fixed_window("10/1s").unwrap(), false),
        ("fixed_window_counter", Policy::fixed_window("10/1s").unwrap(), true),
        ("sliding_window", Policy::sliding_window("12/1500ms", "100ms").unwrap(), true),
        ("sliding_log", Policy::sliding_log("10/1s").unwrap(), true),
        ("token_bucket", Policy::token_bucket(10, "2/6s").unwrap(), true),
        ("leaky_bucket", Policy::leaky_bucket(10, "2/6s").unwrap(), true),
        ("gcra", Policy::gcra("2/6s", 4).unwrap(), true),
        ("concurrency", Policy::concurrency(5, "30s").unwrap(), true),
    ]
}

/// Every golden file's name and the text the runtime assembles for it now.
fn assembled() -> Vec<(String, String)> {
    let mut files = Vec::new();
    for (family, policy, server_clock) in families() {
        files.push((format!("{family}.lua"), script_source(&policy, server_clock)));
        files.push((format!("{family}.cross_slot.lua"), cross_slot_script_source(&policy, server_clock)));
    }
    files
}

fn golden_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("ratelimit/lua/assembled")
}

fn blessing() -> bool {
    std::env::var_os("REDLIMIT_BLESS").is_some_and(|v| !v.is_empty() && v != "0")
}

#[test]
fn each_family_is_its_own_script() {
    // A policy above that stopped reaching its family would leave two
    // golden files holding one script, and a family without one.
    let mut sources: Vec<String> = assembled().into_iter().map(|(_, source)| source).collect();
    let all = sources.len();
    sources.sort();
    sources.dedup();
    assert_eq!(sources.len(), all, "two golden files would hold the same script");
}

#[test]
fn the_assembled_scripts_match_their_golden_files() {
    let dir = golden_dir();
    let files = assembled();
    if blessing() {
        std::fs::create_dir_all(&dir).unwrap();
        for stale in lua_files(&dir) {
            if !files.iter().any(|(name, _)| *name == stale) {
                std::fs::remove_file(dir.join(&stale)).unwrap();
            }
        }
        for (name, source) in &files {
            std::fs::write(dir.join(name), source).unwrap();
        }
        eprintln!("wrote {} assembled scripts to {}", files.len(), dir.display());
        return;
    }

    let mut report = String::new();
    for (name, source) in &files {
        match std::fs::read_to_string(dir.join(name)) {
            Ok(golden) if golden == *source => {}
            Ok(golden) => {
                report.push_str(&format!("--- {name} (checked in)\n+++ {name} (assembled now)\n"));
                report.push_str(&diff(&golden, source));
            }
            Err(e) => report.push_str(&format!("{name}: not checked in ({e})\n")),
        }
    }
    for stale in lua_files(&dir) {
        if !files.iter().any(|(name, _)| *name == stale) {
            report.push_str(&format!("{stale}: checked in, but no family assembles it\n"));
        }
    }
    assert!(
        report.is_empty(),
        "the scripts the runtime assembles differ from ratelimit/lua/assembled/:\n\n{report}\n\
         If the change is intended, run `REDLIMIT_BLESS=1 cargo test --test lua_assembled` and commit the files."
    );
}

/// The `.lua` files in `dir`, by name.
fn lua_files(dir: &Path) -> Vec<String> {
    let Ok(entries) = std::fs::read_dir(dir) else { return Vec::new() };
    let mut names: Vec<String> = entries
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|name| name.ends_with(".lua"))
        .collect();
    names.sort();
    names
}

/// A unified diff of two texts by lines (a longest common subsequence),
/// three lines of context around each change.
fn diff(old: &str, new: &str) -> String {
    let (a, b): (Vec<&str>, Vec<&str>) = (old.lines().collect(), new.lines().collect());
    // common[i][j]: the longest common subsequence of a[i..] and b[j..].
    let mut common = vec![vec![0u32; b.len() + 1]; a.len() + 1];
    for i in (0..a.len()).rev() {
        for j in (0..b.len()).rev() {
            common[i][j] = if a[i] == b[j] { common[i + 1][j + 1] + 1 } else { common[i + 1][j].max(common[i][j + 1]) };
        }
    }
    // Each line as ' ', '-' or '+', with its line numbers in a and b.
    let mut ops: Vec<(char, usize, usize)> = Vec::new();
    let (mut i, mut j) = (0, 0);
    while i < a.len() || j < b.len() {
        if i < a.len() && j < b.len() && a[i] == b[j] {
            ops.push((' ', i, j));
            (i, j) = (i + 1, j + 1);
        } else if j == b.len() || (i < a.len() && common[i + 1][j] >= common[i][j + 1]) {
            ops.push(('-', i, j));
            i += 1;
        } else {
            ops.push(('+', i, j));
            j += 1;
        }
    }
    if old.ends_with('\n') != new.ends_with('\n') {
        ops.push(('!', a.len(), b.len()));
    }
    const CONTEXT: usize = 3;
    let changed: Vec<usize> = (0..ops.len()).filter(|&k| ops[k].0 != ' ').collect();
    let mut out = String::new();
    let mut k = 0;
    while k < changed.len() {
        // One hunk: changes no further apart than twice the context.
        let start = changed[k].saturating_sub(CONTEXT);
        let mut end = changed[k];
        while k + 1 < changed.len() && changed[k + 1] <= end + 2 * CONTEXT + 1 {
            k += 1;
            end = changed[k];
        }
        let end = (end + CONTEXT + 1).min(ops.len());
        let (_, i0, j0) = ops[start];
        out.push_str(&format!("@@ -{} +{} @@\n", i0 + 1, j0 + 1));
        for &(op, i, j) in &ops[start..end] {
            match op {
                ' ' => out.push_str(&format!(" {}\n", a[i])),
                '-' => out.push_str(&format!("-{}\n", a[i])),
                '+' => out.push_str(&format!("+{}\n", b[j])),
                _ => out.push_str("\\ the two differ in a newline at the end\n"),
            }
        }
        k += 1;
    }
    out
}

#[test]
fn the_diff_names_each_changed_line() {
    let old: String = ('a'..='t').map(|c| format!("{c}\n")).collect();
    let new = old.replace("c\n", "C\n") + "u\n";
    assert_eq!(diff(&old, &new), "@@ -1 +1 @@\n a\n b\n-c\n+C\n d\n e\n f\n@@ -18 +18 @@\n r\n s\n t\n+u\n");
    assert_eq!(diff("a\n", "a"), "@@ -1 +1 @@\n a\n\\ the two differ in a newline at the end\n");
}
