//! The soak example, briefly: restarts that keep Redis's data admit nothing
//! extra; restarts that lose it are caught as over-admissions.

use std::process::Command;

fn run(args: &[&str]) -> (bool, String) {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let output = Command::new(cargo)
        .args(["run", "--quiet", "--example", "soak", "--"])
        .args(args)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .expect("run the soak example");
    (output.status.success(), String::from_utf8_lossy(&output.stdout).into_owned())
}

#[test]
fn restarts_that_keep_the_data_admit_nothing_extra() {
    let (ok, out) = run(&["--seconds", "3", "--restart-every", "1"]);
    println!("{out}");
    assert!(ok && out.contains("over-admissions  0"), "{out}");
    assert!(out.contains("2 restarts"), "{out}");
}

#[test]
fn restarts_that_lose_the_data_are_caught() {
    let (ok, out) = run(&["--seconds", "3", "--restart-every", "1", "--forget"]);
    assert!(!ok && !out.contains("over-admissions  0"), "{out}");
}
