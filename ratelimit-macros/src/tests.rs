//! What the macro emits for valid input, and how it reports each mistake.

use proc_macro2::TokenStream as TokenStream2;
use quote::quote;

/// The attribute's expansion as text (printed when `SHOW_EXPANSION` is set).
fn expand(attr: TokenStream2, item: TokenStream2) -> String {
    let out = super::rate_limit_impl(attr, item).to_string();
    if std::env::var_os("SHOW_EXPANSION").is_some() {
        println!("{out}");
    }
    out
}

/// The expansion stays small: one static site with a constant policy,
/// the key, one call into the site, a branch, then the body.
#[test]
fn expansion_is_one_site_one_call_one_branch() {
    let out = expand(
        quote!(algo = "sliding_window", strategies = "10/1s,100/1m", key = "user:<id>"),
        quote!(
            async fn get(id: u64) -> Result<u64, E> {
                Ok(id)
            }
        ),
    );
    assert_eq!(out.matches("Site :: new").count(), 1, "{out}");
    assert_eq!(out.matches(". call (:: core :: option :: Option :: None ,").count(), 1, "{out}");
    assert!(
        out.contains(
            "Call :: check (:: redlimit :: __private :: KeyBuf :: as_bytes (& __redlimit_key) , __redlimit_cost)"
        ),
        "{out}"
    );
    // Written in the variable the call reads, not built in a block and moved.
    assert!(out.contains("let mut __redlimit_key = :: redlimit :: __private :: KeyBuf :: new () ;"), "{out}");
    assert!(out.contains("KeyBuf :: as_bytes (& __redlimit_key)"), "{out}");
    assert!(out.contains("Policy :: __sliding_window (& [:: redlimit :: __private :: Strategy :: new (10u64 , 1000000u64) , :: redlimit :: __private :: Strategy :: new (100u64 , 60000000u64)] , 100000u64)"), "{out}");
    assert!(!out.contains("compile_error"), "{out}");
}

/// An argument declared as an integer is written by `push_key_integer`
/// (no `fmt`); fields and other types by `push_key_value` (`Display`).
#[test]
fn integer_arguments_skip_fmt() {
    let with_signature = |signature: TokenStream2| {
        expand(
            quote!(algo = "gcra", rate = "1/1s", key = "<id>:<user.id>"),
            quote!(async #signature -> Result<(), E> { Ok(()) }),
        )
    };
    let integer = with_signature(quote!(fn get(id: &i32, user: User)));
    assert_eq!(
        (integer.matches("push_key_integer").count(), integer.matches("push_key_value").count()),
        (1, 1),
        "{integer}"
    );
    let text = with_signature(quote!(fn get(id: &str, user: User)));
    assert_eq!((text.matches("push_key_integer").count(), text.matches("push_key_value").count()), (0, 2), "{text}");
}

/// A named policy is a name in the site, looked up at run time: no constant policy.
#[test]
fn a_named_policy_expands_to_a_configured_site() {
    let out = expand(
        quote!(policy = "search", key = "user:<id>"),
        quote!(
            async fn get(id: u64) -> Result<u64, E> {
                Ok(id)
            }
        ),
    );
    assert!(
        out.contains(
            "Site :: configured (:: core :: concat ! (:: core :: module_path ! () , \"::\" , \"get\") , \"search\" ,"
        ),
        "{out}"
    );
    assert!(!out.contains("Policy ::"), "{out}");
    assert_eq!(out.matches(". call (").count(), 1, "{out}");
}

/// A policy expression is evaluated per call and given to the one call:
/// a site without a policy, no constant policy.
#[test]
fn a_policy_expression_expands_to_a_per_call_site() {
    let out = expand(
        quote!(policy = plan_policy(&user), key = "user:<user.id>"),
        quote!(
            async fn get(user: User) -> Result<u64, E> {
                Ok(user.id)
            }
        ),
    );
    assert!(
        out.contains("Site :: per_call (:: core :: concat ! (:: core :: module_path ! () , \"::\" , \"get\") ,"),
        "{out}"
    );
    assert!(out.contains("let __redlimit_policy = plan_policy (& user) ;"), "{out}");
    assert!(out.contains("AsPolicy :: as_policy (& __redlimit_policy)"), "{out}");
    assert_eq!(out.matches(". call (:: core :: option :: Option :: Some (").count(), 1, "{out}");
    assert!(!out.contains("Policy :: __"), "{out}");
}

/// A refunding site keeps what its call took in its ticket, and the body's
/// result is given to that ticket; a later site's denial gives back the earlier's.
#[test]
fn refund_on_keeps_what_was_taken_then_looks_at_the_result() {
    let out = expand(
        quote!(algo = "gcra", rate = "1/1s", key = "<id>", refund_on = "err"),
        quote!(
            #[rate_limit(algo = "gcra", rate = "5/1s", name = "global")]
            async fn get(id: u64) -> Result<u64, E> {
                Ok(id)
            }
        ),
    );
    assert_eq!(out.matches(". refunds ()").count(), 1, "{out}");
    assert_eq!(out.matches("Call :: check (").count(), 2, "{out}");
    assert_eq!(out.matches("Site :: refund (__redlimit_ticket_0) . await").count(), 1, "{out}");
    assert!(out.contains("Site :: refund_if (__redlimit_ticket_0 , :: redlimit :: __private :: Failed :: failed (& __redlimit_result)) . await ; __redlimit_result"), "{out}");
}

/// A settling site keeps what its call took, and settles it at what its
/// function reads from the body's result; it refunds nothing on an `Err`.
#[test]
fn settle_keeps_what_was_taken_then_settles_at_the_result() {
    let out = expand(
        quote!(algo = "token_bucket", capacity = 100, rate = "100/1m", cost = estimate, settle = usage::tokens),
        quote!(
            async fn complete(estimate: u64) -> Result<u64, E> {
                Ok(estimate)
            }
        ),
    );
    assert_eq!(out.matches(". refunds ()").count(), 1, "{out}");
    assert!(out.contains("Site :: settle (__redlimit_ticket_0 , :: redlimit :: __private :: Settles :: actual (& usage :: tokens , & __redlimit_result)) . await ; __redlimit_result"), "{out}");
    assert!(!out.contains("refund_if"), "{out}");
}

/// Stacked sites: every one before the last keeps what its call took, and a
/// later one's denial gives it back; no body's result is looked at.
#[test]
fn stacked_sites_give_back_what_a_later_denial_wasted() {
    let out = expand(
        quote!(algo = "gcra", rate = "1/1s", key = "<id>", name = "user"),
        quote!(
            #[rate_limit(algo = "gcra", rate = "5/1s", name = "global")]
            #[rate_limit(algo = "concurrency", limit = 2, lease = "30s", name = "busy")]
            async fn get(id: u64) -> Result<u64, E> {
                Ok(id)
            }
        ),
    );
    assert_eq!(out.matches(". refunds ()").count(), 2, "the two outer sites: {out}");
    assert_eq!(out.matches("Site :: refund (__redlimit_ticket_0) . await").count(), 2, "{out}");
    assert_eq!(out.matches("Site :: refund (__redlimit_ticket_1) . await").count(), 1, "{out}");
    assert!(!out.contains("refund_if"), "{out}");
}

/// On any error the function is emitted unchanged, followed by the errors.
#[test]
fn errors_keep_the_original_function() {
    let out = expand(
        quote!(algo = "nope", colour = 1),
        quote!(
            async fn get(id: u64) -> u64 {
                id
            }
        ),
    );
    assert!(out.starts_with("async fn get (id : u64) -> u64 { id }"), "{out}");
    assert_eq!(out.matches("compile_error").count(), 2, "{out}");
}
