//! Exactness across processes: the `exactness` example runs 4 OS processes
//! × 50 tasks per algorithm against one single Redis and one Redis Cluster,
//! and replays every admitted call's server timestamp against the policy.

use std::process::Command;

/// Runs the example; returns (decisions, over-admissions) from its last line.
fn run(args: &[&str]) -> (u64, u64) {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let output = Command::new(cargo)
        .args(["run", "--quiet", "--example", "exactness", "--"])
        .args(args)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .expect("run the exactness example");
    let stdout = String::from_utf8_lossy(&output.stdout);
    println!("{stdout}");
    assert!(output.status.success(), "{stdout}\n{}", String::from_utf8_lossy(&output.stderr));
    let total = stdout.lines().last().and_then(|l| l.strip_prefix("total: ")).expect("a total line");
    let numbers: Vec<u64> =
        total.split(|c: char| !c.is_ascii_digit()).filter(|s| !s.is_empty()).map(|s| s.parse().unwrap()).collect();
    (numbers[0], numbers[1])
}

#[test]
fn four_processes_never_over_admit_on_a_single_server_or_a_cluster() {
    let (single, single_over) = run(&[]);
    let (cluster, cluster_over) = run(&["--cluster"]);
    assert_eq!((single_over, cluster_over), (0, 0));
    assert!(single + cluster >= 100_000, "only {} decisions", single + cluster);
}
