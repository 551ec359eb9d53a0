//! Reading policies from TOML: the attribute's option names and grammar, and
//! every problem reported at once with the source, line and policy.
//!
//! `cargo test --test config_file`

use redlimit::policies::{self, PolicySet};
use redlimit::Policy;

fn problems(text: &str) -> Vec<String> {
    PolicySet::parse("policies.toml", text).unwrap_err().problems().to_vec()
}

#[test]
fn every_algorithm_reads_as_the_attribute_would() {
    let set = PolicySet::parse(
        "policies.toml",
        r#"
        [policies.fixed]
        algo = "fixed_window"
        strategies = "10/1s,100/1m"

        [policies.sliding]
        algo = "sliding_window"
        strategies = "10/1s"
        precision = "100ms"

        [policies.log]
        algo = "sliding_log"
        strategies = "5/3s"

        [policies.tokens]
        algo = "token_bucket"
        capacity = 10
        rate = "1/3s"

        [policies.leaky]
        algo = "leaky_bucket"
        capacity = 4
        rate = "2/1s"

        [policies.cell]
        algo = "gcra"
        rate = "10/1s"

        [policies.cell-burst_2]
        algo = "gcra"
        rate = "1/1s"
        burst = 4
        "#,
    )
    .unwrap();
    assert_eq!(set.len(), 7);
    assert_eq!(set.get("fixed"), Some(&Policy::fixed_window("10/1s,100/1m").unwrap()));
    assert_eq!(set.get("sliding"), Some(&Policy::sliding_window("10/1s", "100ms").unwrap()));
    assert_eq!(set.get("log"), Some(&Policy::sliding_log("5/3s").unwrap()));
    assert_eq!(set.get("tokens"), Some(&Policy::token_bucket(10, "1/3s").unwrap()));
    assert_eq!(set.get("leaky"), Some(&Policy::leaky_bucket(4, "2/1s").unwrap()));
    assert_eq!(
        set.get("cell"),
        Some(&Policy::gcra("10/1s", 9).unwrap()),
        "burst defaults to count - 1, as in the attribute"
    );
    assert_eq!(set.get("cell-burst_2"), Some(&Policy::gcra("1/1s", 4).unwrap()));
    assert_eq!(set.get("nope"), None);
    assert_eq!(set.origin(), "policies.toml");
}

#[test]
fn inline_tables_and_an_empty_document_are_fine() {
    let set = PolicySet::parse("env", r#"policies = { api = { algo = "gcra", rate = "5/1s" } }"#).unwrap();
    assert_eq!(set.get("api").unwrap().to_string(), "gcra 5/1s burst 4");
    assert!(PolicySet::parse("env", "").unwrap().is_empty());
}

#[test]
fn a_zero_limit_names_the_file_the_line_and_the_policy() {
    let text = "[policies.search]\nalgo = \"sliding_log\"\nstrategies = \"0/1s\"\n";
    assert_eq!(
        problems(text),
        ["policies.toml:3: policy \"search\": strategies \"0/1s\": a limit of 0 would deny every call; use at least 1"]
    );
}

#[test]
fn every_problem_is_reported_not_only_the_first() {
    let text = r#"
[policies.search]
algo = "sliding_window"
strategies = "10/1s"
precision = "300ms"

[policies.upload]
algo = "token_bucket"
capacity = 0
rate = "1/3s"
window = "10/1s"
"#;
    let found = problems(text);
    assert_eq!(found.len(), 3, "{found:#?}");
    assert!(found[0].starts_with("policies.toml:5: policy \"search\": precision \"300ms\": precision 300ms does not divide the window of `10/1s`"), "{}", found[0]);
    assert!(
        found[1].starts_with("policies.toml:9: policy \"upload\": capacity 0: capacity of 0 would deny every call"),
        "{}",
        found[1]
    );
    assert!(found[2].starts_with("policies.toml:11: policy \"upload\": unknown option `window`: a policy takes `algo`, `strategies`, `precision`, `capacity`, `rate`, `refill`, `burst`, `limit`, `lease`"), "{}", found[2]);
    // Display: one problem per line, so a log or a terminal shows them all.
    let shown = PolicySet::parse("policies.toml", text).unwrap_err().to_string();
    assert_eq!(shown.lines().count(), 3);
}

#[test]
fn unknown_and_misplaced_options() {
    let found = problems("[policies.api]\nalgo = \"gcra\"\nrate = \"1/1s\"\nkey = \"user:<id>\"\nwindow = \"1s\"\n");
    assert_eq!(found.len(), 2, "{found:#?}");
    assert!(
        found[0].starts_with(
            "policies.toml:4: policy \"api\": `key` is an option of the `#[rate_limit]` attribute, not of a policy"
        ),
        "{}",
        found[0]
    );
    assert!(found[1].starts_with("policies.toml:5: policy \"api\": unknown option `window`"), "{}", found[1]);
}

#[test]
fn a_parameter_the_algorithm_does_not_take() {
    let found =
        problems("[policies.api]\nalgo = \"token_bucket\"\ncapacity = 5\nrate = \"1/1s\"\nstrategies = \"10/1s\"\n");
    assert_eq!(found, ["policies.toml:5: policy \"api\": strategies \"10/1s\": `token_bucket` does not take `strategies`; it takes `capacity`, `rate`, `refill`"]);
}

#[test]
fn bad_toml_says_line_and_column() {
    let found = problems("[policies.search]\nalgo = \"fixed_window\"\nstrategies = 10/1s\n");
    assert_eq!(found.len(), 1);
    assert!(found[0].starts_with("policies.toml:3:14: invalid TOML: "), "{}", found[0]);
}

#[test]
fn wrong_kinds_of_values() {
    let found = problems("[policies.a]\nalgo = \"token_bucket\"\ncapacity = \"10\"\nrate = 3\n\n[policies.b]\nalgo = \"gcra\"\nrate = \"1/1s\"\nburst = -1\n");
    assert_eq!(
        found,
        [
            "policies.toml:3: policy \"a\": `capacity` takes an integer, not a string: write `capacity = 10`",
            "policies.toml:4: policy \"a\": `rate` takes a string, like `rate = \"1/3s\"`, not 3",
            "policies.toml:9: policy \"b\": burst -1: must be a whole number from 0 to 1099511627775, like `burst = 5`",
        ]
    );
}

#[test]
fn a_capacity_or_burst_out_of_range_names_the_real_bounds() {
    let found = problems(
        "[policies.a]\nalgo = \"token_bucket\"\ncapacity = -3\nrate = \"1/1s\"\n\n\
         [policies.b]\nalgo = \"leaky_bucket\"\ncapacity = 0\nrate = \"1/1s\"\n\n\
         [policies.c]\nalgo = \"token_bucket\"\ncapacity = 1099511627777\nrate = \"1/1s\"\n\n\
         [policies.d]\nalgo = \"gcra\"\nrate = \"1/1s\"\nburst = 1099511627776\n",
    );
    assert_eq!(
        found,
        [
            "policies.toml:3: policy \"a\": capacity -3: must be a whole number from 1 to 1099511627776, like `capacity = 10`",
            "policies.toml:8: policy \"b\": capacity 0: capacity of 0 would deny every call; use at least 1",
            "policies.toml:13: policy \"c\": capacity 1099511627777: capacity 1099511627777 is too large; the largest allowed is 1099511627776",
            "policies.toml:19: policy \"d\": burst 1099511627776: burst 1099511627776 is too large; the largest allowed is 1099511627775",
        ]
    );
}

#[test]
fn names_algorithms_and_layout() {
    let found = problems("top = 1\n[policies.\"two words\"]\nalgo = \"gcra\"\nrate = \"1/1s\"\n[policies.x]\nalgo = \"fixed\"\n[policies.y]\nstrategies = \"1/1s\"\n");
    assert_eq!(found.len(), 4, "{found:#?}");
    assert!(found[0].starts_with("policies.toml:1: unknown top-level key \"top\""), "{}", found[0]);
    assert!(found[1].contains("policy \"two words\": policy name \"two words\" contains ' '"), "{}", found[1]);
    assert!(
        found[2].starts_with("policies.toml:6: policy \"x\": algo \"fixed\": unknown algorithm `fixed`"),
        "{}",
        found[2]
    );
    assert!(found[3].starts_with("policies.toml:7: policy \"y\": missing `algo`"), "{}", found[3]);
    assert!(problems("policies = 3\n")[0].contains("`policies` must be a table"));
}

#[test]
fn a_missing_file_is_an_error_naming_it_and_loads_nothing() {
    let path = std::env::temp_dir().join(format!("redlimit-config-file-missing-{}.toml", std::process::id()));
    let err = policies::load(&path).unwrap_err();
    assert_eq!(err.problems().len(), 1);
    assert!(err.to_string().starts_with(&format!("{}: cannot read the policies file: ", path.display())), "{err}");
    assert!(policies::current().is_empty());
}

#[test]
fn an_interval_refill_is_written_as_in_the_attribute_or_as_the_policys_text() {
    let text = "[policies.exports]\nalgo = \"token_bucket\"\ncapacity = 10\nrate = \"10/1m\"\nrefill = \"interval\"\n\n[policies]\nreports = \"token_bucket capacity 10 rate 10/1m refill interval\"\n";
    let set = PolicySet::parse("policies.toml", text).unwrap();
    let interval = redlimit::Policy::token_bucket_interval(10, "10/1m").unwrap();
    assert_eq!(set.get("exports").unwrap(), &interval);
    assert_eq!(set.get("reports").unwrap(), &interval);
    let wrong = "[policies.exports]\nalgo = \"leaky_bucket\"\ncapacity = 10\nrate = \"10/1m\"\nrefill = \"interval\"\n";
    let found = problems(wrong);
    assert_eq!(found.len(), 1, "{found:#?}");
    assert!(found[0].contains("`refill` is the token bucket's: `leaky_bucket` does not take it"), "{}", found[0]);
    let unknown = "[policies.exports]\nalgo = \"token_bucket\"\ncapacity = 10\nrate = \"10/1m\"\nrefill = \"daily\"\n";
    assert!(problems(unknown)[0].contains("unknown refill `daily`: expected one of `continuous`, `interval`"));
}
