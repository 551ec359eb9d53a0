//! The `#[rate_limit]` attribute of the [`redlimit`](https://docs.rs/redlimit) crate.
//!
//! Use it through `redlimit::rate_limit`; this crate is an implementation
//! detail, pinned to the runtime crate's version.

mod attr;
mod errors;
mod expand;
mod fallback;
mod item;
mod key;
mod policy;
mod policy_const;
mod validate;

use crate::attr::Options;
use crate::errors::Errors;
use crate::item::{Arguments, Function};
use proc_macro::TokenStream;
use proc_macro2::{Span, TokenStream as TokenStream2};
use quote::ToTokens;
use syn::spanned::Spanned;

/// Limits an `async fn`: every call first asks the store whether it may
/// pass, in one atomic round trip (a Lua script on Redis, or the in-memory
/// twin when no Redis is configured).
///
/// ```
/// use redlimit::{rate_limit, RateLimited};
///
/// #[rate_limit(algo = "sliding_log", strategies = "2/1m", key = "user:<user_id>")]
/// async fn get_profile(user_id: u64) -> Result<String, RateLimited> {
///     Ok(format!("profile {user_id}"))
/// }
///
/// # #[tokio::main(flavor = "current_thread")] async fn main() {
/// # redlimit::init(redlimit::Store::memory()).unwrap();
/// assert!(get_profile(7).await.is_ok());
/// assert!(get_profile(7).await.is_ok());
/// let denied = get_profile(7).await.unwrap_err();
/// assert_eq!(denied.decision().limit, 2);
/// assert_eq!(denied.key(), "user:7");
/// assert!(get_profile(8).await.is_ok(), "another key, another limit");
/// # }
/// ```
///
/// Annotated functions use the global store: `redlimit::init` sets it, or
/// the first call builds it from `REDLIMIT_REDIS_URL` (unset: in memory).
/// Every option is checked at compile time; a mistake is an error at the
/// offending token, all mistakes are reported in one build, and the function
/// is still emitted as written so the rest of the crate keeps compiling.
///
/// # `algo` and its parameters
///
/// | `algo` | parameters |
/// |---|---|
/// | `"fixed_window"` | `strategies = "10/1s,100/1m"` |
/// | `"sliding_window"` | `strategies`, optional `precision = "100ms"` (must divide every window; default a tenth of their gcd) |
/// | `"sliding_log"` | `strategies` (exact) |
/// | `"token_bucket"` | `capacity = 10`, `rate = "1/3s"` (starts full) |
/// | `"leaky_bucket"` | `capacity`, `rate` (starts empty) |
/// | `"gcra"` | `rate = "10/1s"`, optional `burst = 4` (default `count - 1`) |
/// | `"concurrency"` | `limit = 10`, optional `lease = "30s"` (the default): at most `limit` bodies of a key run at once, each holding a permit until it ends (see `redlimit::Limiter::acquire`) |
///
/// Durations are `us`, `ms`, `s`, `m`, `h`, `d`. The grammar is the one
/// `redlimit::Policy`'s constructors use, and the validated policy is
/// emitted as a constant: nothing is parsed at run time.
///
/// ```
/// # use redlimit::{rate_limit, RateLimited};
/// #[rate_limit(algo = "token_bucket", capacity = 3, rate = "1/1h")]
/// async fn upload() -> Result<(), RateLimited> { Ok(()) }
///
/// # #[tokio::main(flavor = "current_thread")] async fn main() {
/// # redlimit::init(redlimit::Store::memory()).unwrap();
/// for _ in 0..3 {
///     upload().await.unwrap();
/// }
/// let denied = upload().await.unwrap_err();
/// assert_eq!(denied.policy(), Some(&redlimit::Policy::token_bucket(3, "1/1h").unwrap()));
/// assert!(denied.retry_after().unwrap() <= std::time::Duration::from_secs(3600));
/// # }
/// ```
///
/// A call must pass every strategy; a denial lists the ones it broke:
///
/// ```
/// # use redlimit::{rate_limit, RateLimited};
/// #[rate_limit(algo = "fixed_window", strategies = "5/1s,2/1h")]
/// async fn search() -> Result<(), RateLimited> { Ok(()) }
///
/// # #[tokio::main(flavor = "current_thread")] async fn main() {
/// # redlimit::init(redlimit::Store::memory()).unwrap();
/// search().await.unwrap();
/// search().await.unwrap();
/// let denied = search().await.unwrap_err();
/// assert_eq!(denied.decision().violated[0].to_string(), "2/1h");
/// assert!(denied.to_string().contains("(2/1h exceeded)"));
/// # }
/// ```
///
/// # `policy`
///
/// `policy = "search"` takes the algorithm and its parameters from the
/// policy named `search` in configuration instead of the attribute, so
/// limits change without recompiling. It cannot be combined with `algo` or
/// any of its parameters (a compile error says so), and the name is 1 to 64
/// ASCII letters, digits, `_` or `-`. Every other option works as usual.
///
/// Policies are TOML with the same option names and grammar, loaded by
/// `redlimit::policies::load(path)` at start-up (every problem returned at
/// once) or, on the first call, from `REDLIMIT_POLICIES_FILE` (a path) or
/// `REDLIMIT_POLICIES` (the TOML itself). `redlimit::policies::reload()`
/// re-reads the source; the next call uses the new limits, and counts that
/// still fit carry over. A name that is not configured is settled by
/// `on_error` (by default the call is allowed), with a WARN log line at the
/// first such call and at most one every 10 s after: never a panic.
///
/// ```
/// # use redlimit::{rate_limit, RateLimited};
/// #[rate_limit(policy = "search", key = "user:<user>")]
/// async fn search(user: u32) -> Result<u32, RateLimited> { Ok(user) }
///
/// #[rate_limit(policy = "missing", on_error = "deny")]
/// async fn unconfigured() -> Result<(), RateLimited> { Ok(()) }
///
/// # #[tokio::main(flavor = "current_thread")] async fn main() {
/// # redlimit::init(redlimit::Store::memory()).unwrap();
/// redlimit::policies::load_str("policies.toml", r#"
///     [policies.search]
///     algo = "sliding_log"
///     strategies = "2/1m"
/// "#).unwrap();
/// assert_eq!(search(7).await.unwrap(), 7);
/// assert_eq!(search(7).await.unwrap(), 7);
/// assert_eq!(search(7).await.unwrap_err().decision().limit, 2);
/// assert_eq!(unconfigured().await.unwrap_err().reason(), redlimit::DenialReason::PolicyNotConfigured);
/// # }
/// ```
///
/// Any other expression gives each call's policy, computed from the
/// arguments when the call is made: `policy = plan_policy(&user)`, where
/// the expression is a `redlimit::Policy`, a `&Policy` or an
/// `Arc<Policy>` (anything else is a compile error at the expression; a
/// bare name that is no argument, `policy = search`, is an error asking
/// for the string it probably meant). One limiter, named as usual, counts
/// every call, so a key keeps its count when its policy changes to another
/// of the same algorithm: a user upgraded mid-minute keeps the calls they
/// made. Every other option works as usual, but nothing is known about the
/// policy at compile time: a literal `cost` is not checked against it, and
/// with `on_limit = "wait"` (no `max_wait`) a cost above 1 may be one the
/// policy never admits, so the function must return a `Result` for that
/// denial.
///
/// ```
/// # use redlimit::{rate_limit, Policy, RateLimited};
/// pub struct User { id: u64, paying: bool }
///
/// fn plan_policy(user: &User) -> Policy {
///     Policy::fixed_window(if user.paying { "5/1m" } else { "2/1m" }).unwrap()
/// }
///
/// #[rate_limit(policy = plan_policy(&user), key = "user:<user.id>")]
/// async fn profile(user: &User) -> Result<u64, RateLimited> { Ok(user.id) }
///
/// # #[tokio::main(flavor = "current_thread")] async fn main() {
/// # redlimit::init(redlimit::Store::memory()).unwrap();
/// let mut ann = User { id: 1, paying: false };
/// profile(&ann).await.unwrap();
/// profile(&ann).await.unwrap();
/// assert_eq!(profile(&ann).await.unwrap_err().decision().limit, 2);
/// ann.paying = true; // her 2 calls still count: 3 more this minute
/// for _ in 0..3 {
///     profile(&ann).await.unwrap();
/// }
/// assert_eq!(profile(&ann).await.unwrap_err().decision().limit, 5);
/// # }
/// ```
///
/// # `key`
///
/// Without a key, one limit covers every call of the function. A template
/// gives one limit per value: `<arg>` inserts an argument's `Display`
/// text, `<arg.field>` (any depth, `<pair.0>` too) a field of one, and
/// `<self.field>` a field of the receiver. A placeholder naming no argument
/// is a compile error listing the arguments.
///
/// Values are escaped (every ASCII byte other than a letter or digit becomes
/// `%XX`), and two placeholders must be separated by such a byte (`:`, `/`,
/// `-`, ...), so different values never make the same key:
///
/// ```
/// # use redlimit::{rate_limit, RateLimited};
/// #[rate_limit(algo = "gcra", rate = "1/1h", key = "<tenant>:<user>")]
/// async fn call(tenant: &str, user: &str) -> Result<(), RateLimited> { Ok(()) }
///
/// # #[tokio::main(flavor = "current_thread")] async fn main() {
/// # redlimit::init(redlimit::Store::memory()).unwrap();
/// call("x:y", "z").await.unwrap();
/// call("x", "y:z").await.unwrap(); // not the same key
/// assert_eq!(call("x:y", "z").await.unwrap_err().key(), "x%3Ay:z");
/// # }
/// ```
///
/// # `name`
///
/// The limiter's name, shown in denials and part of every stored key. It
/// defaults to the module path and the function name (`my_app::api::search`);
/// functions with one name (and one algorithm) share a limit. Two methods of
/// different types in one module get the same default name: give them names.
///
/// ```
/// # use redlimit::{rate_limit, RateLimited};
/// #[rate_limit(algo = "sliding_log", strategies = "2/1m", name = "storage")]
/// async fn read() -> Result<(), RateLimited> { Ok(()) }
///
/// #[rate_limit(algo = "sliding_log", strategies = "2/1m", name = "storage")]
/// async fn write() -> Result<(), RateLimited> { Ok(()) }
///
/// # #[tokio::main(flavor = "current_thread")] async fn main() {
/// # redlimit::init(redlimit::Store::memory()).unwrap();
/// read().await.unwrap();
/// write().await.unwrap();
/// assert_eq!(read().await.unwrap_err().limiter(), "storage");
/// # }
/// ```
///
/// # `cost`
///
/// How many permits a call takes (default 1): a literal, or an argument (or
/// a field of one) of any unsigned integer type. A literal the policy written
/// in the attribute could never admit is a compile error; an argument that
/// large (or a literal under a policy configured or given per call) gets a
/// denial with no `retry_after`. Cost 0 takes nothing.
///
/// ```
/// # use redlimit::{rate_limit, RateLimited};
/// #[rate_limit(algo = "token_bucket", capacity = 10, rate = "1/1h", cost = bytes)]
/// async fn store_blob(bytes: u32) -> Result<u32, RateLimited> { Ok(bytes) }
///
/// # #[tokio::main(flavor = "current_thread")] async fn main() {
/// # redlimit::init(redlimit::Store::memory()).unwrap();
/// store_blob(8).await.unwrap();
/// assert_eq!(store_blob(3).await.unwrap_err().decision().remaining, 2);
/// # }
/// ```
///
/// # `on_limit` and `max_wait`
///
/// - `on_limit = "error"` (the default): a denied call returns
///   `Err(RateLimited.into())`, so the function must return `Result<_, E>`
///   with `E: From<redlimit::RateLimited>`. Anything else is a compile error
///   at the return type saying so.
/// - `on_limit = "wait"`: a denied call sleeps until `retry_after` and tries
///   again; with a leaky bucket this shapes a burst into a steady rate. With
///   `max_wait = "2s"`, a call that would wait longer returns its denial at
///   once. When no denial can reach the caller (no `max_wait`, a literal
///   `cost`, at most 1 under a policy given per call, `on_error` other than
///   `"deny"`), any return type works.
///
/// ```
/// # use redlimit::rate_limit;
/// # use std::time::{Duration, Instant};
/// #[rate_limit(algo = "leaky_bucket", capacity = 1, rate = "1/100ms", on_limit = "wait")]
/// async fn send(message: u32) -> u32 { message }
///
/// # #[tokio::main(flavor = "current_thread")] async fn main() {
/// # redlimit::init(redlimit::Store::memory()).unwrap();
/// let start = Instant::now();
/// for message in 0..3 {
///     send(message).await;
/// }
/// assert!(start.elapsed() >= Duration::from_millis(200), "one call per 100 ms");
/// # }
/// ```
///
/// # `fallback`
///
/// `fallback = path::to::fn` answers a denied call instead: it is called
/// with the same arguments (for a method, `self` first, as in
/// `fallback = Self::cached`) and its output is returned, so the function
/// may return anything. The fallback must be an `async fn` with the same
/// parameters and output; arguments must be plain names (not patterns).
/// With `on_limit = "wait"` and `max_wait`, the fallback answers the calls
/// that would wait too long.
///
/// ```
/// # use redlimit::rate_limit;
/// async fn cached(city: &str) -> String {
///     format!("{city}: 21°C (cached)")
/// }
///
/// #[rate_limit(algo = "gcra", rate = "1/1m", key = "<city>", fallback = cached)]
/// async fn weather(city: &str) -> String {
///     format!("{city}: 22°C")
/// }
///
/// # #[tokio::main(flavor = "current_thread")] async fn main() {
/// # redlimit::init(redlimit::Store::memory()).unwrap();
/// assert_eq!(weather("Oslo").await, "Oslo: 22°C");
/// assert_eq!(weather("Oslo").await, "Oslo: 21°C (cached)");
/// # }
/// ```
///
/// # `on_error`
///
/// What a call does when the store cannot answer in time (Redis down, a
/// timeout): `"allow"` (the default: the call goes through, with a warning
/// and a counter), `"deny"` (a `redlimit::RateLimited` whose `reason()` is
/// `DenialReason::StoreUnavailable`) or `"local"` (decide with the same policy in
/// this process until the store is back). A store that cannot even be built
/// at the first call is handled the same way: never a panic.
///
/// ```
/// # use redlimit::{rate_limit, RateLimited};
/// #[rate_limit(algo = "gcra", rate = "100/1s", on_error = "local")]
/// async fn checkout() -> Result<(), RateLimited> { Ok(()) }
/// # #[tokio::main(flavor = "current_thread")] async fn main() {
/// # redlimit::init(redlimit::Store::memory()).unwrap();
/// # checkout().await.unwrap();
/// # }
/// ```
///
/// # `refund_on`
///
/// `refund_on = "err"` gives a call's permits back when the function returns
/// `Err(..)`: the work they paid for did not happen (an upstream that
/// failed, a request it rejected). The function must return a `Result`
/// (anything else is a compile error at the return type); its result is
/// returned as it is, whatever the refund does. A refund the store cannot
/// make is logged at WARN (the first at once, then one line per 10 s) and
/// the permits stay taken. Nothing is given back for a call that took
/// nothing: a denial, or a call `on_error` let through while the store was
/// down. When a later stacked attribute denies the call, the body never
/// runs, so the permits of the earlier ones that have `refund_on` come back.
///
/// Only the algorithms that can give permits back take it: `token_bucket`,
/// `leaky_bucket`, `gcra` and `fixed_window` (see
/// `redlimit::Limiter::refund`). Beside
/// a `sliding_window` or `sliding_log` written in the attribute it is a
/// compile error; under a policy configured or given per call, one of
/// those algorithms is known only at run time, which says so once at WARN
/// and refunds nothing.
///
/// ```
/// # use redlimit::{rate_limit, RateLimited};
/// #[derive(Debug)]
/// enum FetchError { Limited, Upstream }
/// impl From<RateLimited> for FetchError {
///     fn from(_: RateLimited) -> Self { FetchError::Limited }
/// }
///
/// #[rate_limit(algo = "token_bucket", capacity = 2, rate = "1/1h", key = "<user>", refund_on = "err")]
/// async fn fetch(user: &str, upstream_up: bool) -> Result<String, FetchError> {
///     if !upstream_up {
///         return Err(FetchError::Upstream);
///     }
///     Ok(format!("{user}'s data"))
/// }
///
/// # #[tokio::main(flavor = "current_thread")] async fn main() {
/// # redlimit::init(redlimit::Store::memory()).unwrap();
/// for _ in 0..5 {
///     assert!(matches!(fetch("ann", false).await, Err(FetchError::Upstream)));
/// }
/// // The failures cost nothing: both permits are still there.
/// assert!(fetch("ann", true).await.is_ok());
/// assert!(fetch("ann", true).await.is_ok());
/// assert!(matches!(fetch("ann", true).await, Err(FetchError::Limited)));
/// # }
/// ```
///
/// # `dry_run`
///
/// `dry_run = true` decides and records every call as usual and denies none:
/// a call the limit would deny runs the body anyway, counted in
/// `redlimit_dry_run_denials_total` and logged (see `Limiter::with_dry_run`).
/// A way to try a new limit on real traffic before enforcing it.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")] async fn main() {
/// use redlimit::{rate_limit, ManualClock, RateLimited, Store};
///
/// #[rate_limit(algo = "fixed_window", strategies = "1/1h", key = "<user>", dry_run = true)]
/// async fn export(user: &str) -> Result<(), RateLimited> {
///     Ok(())
/// }
///
/// redlimit::scope(Store::memory().with_clock(ManualClock::new()), async {
///     assert!(export("ann").await.is_ok());
///     assert!(export("ann").await.is_ok(), "would have been denied: runs anyway");
/// })
/// .await;
/// # }
/// ```
///
/// # `prefetch`
///
/// `prefetch = k` (k of 2 or more) lets a hot key take up to k permits from
/// the store in one call and spend them in this process: about one store
/// call per k calls once the key is hot, and exactly the answers of no
/// prefetch for a key called less often than once per
/// `redlimit::DEFAULT_PREFETCH_TTL` (see `Limiter::with_prefetch` and the
/// README's "Hot keys: prefetch" for the bound it keeps). For
/// `fixed_window`, `token_bucket`, `leaky_bucket` and `gcra`; a sliding
/// window or log, or a concurrency limit, is a compile error.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")] async fn main() {
/// use redlimit::{rate_limit, ManualClock, RateLimited, Store};
///
/// #[rate_limit(algo = "fixed_window", strategies = "10/1m", prefetch = 4)]
/// async fn search() -> Result<(), RateLimited> {
///     Ok(())
/// }
///
/// redlimit::scope(Store::memory().with_clock(ManualClock::new()), async {
///     let mut passed = 0;
///     for _ in 0..20 {
///         passed += search().await.is_ok() as u32;
///     }
///     assert_eq!(passed, 10, "the window stays exact");
/// })
/// .await;
/// # }
/// ```
///
/// # `crate`
///
/// Generated code names the runtime `::redlimit`. When it is re-exported
/// or renamed, say where it is: `crate = "my_facade::redlimit"`.
///
/// ```
/// mod facade {
///     pub use redlimit as limits;
/// }
///
/// #[redlimit::rate_limit(crate = "crate::facade::limits", algo = "gcra", rate = "5/1s")]
/// async fn ping() -> Result<(), facade::limits::RateLimited> { Ok(()) }
/// # #[tokio::main(flavor = "current_thread")] async fn main() { ping().await.unwrap(); }
/// ```
///
/// # Stacking
///
/// Several attributes on one function all apply, checked in the order
/// written; a call denied by one is not counted by those below it (a call
/// that passes one and is denied by a later one has used the earlier
/// permit). The first `#[rate_limit]` expands the others, so they must be
/// written `rate_limit` or `<path>::rate_limit`.
///
/// ```
/// # use redlimit::{rate_limit, RateLimited};
/// #[rate_limit(algo = "fixed_window", strategies = "1/1m", key = "user:<user>", name = "per_user")]
/// #[rate_limit(algo = "fixed_window", strategies = "2/1m", name = "global")]
/// async fn search(user: &str) -> Result<(), RateLimited> { Ok(()) }
///
/// # #[tokio::main(flavor = "current_thread")] async fn main() {
/// # redlimit::init(redlimit::Store::memory()).unwrap();
/// search("ann").await.unwrap();
/// assert_eq!(search("ann").await.unwrap_err().limiter(), "per_user");
/// search("bob").await.unwrap();
/// assert_eq!(search("cy").await.unwrap_err().limiter(), "global");
/// # }
/// ```
///
/// # Where it applies
///
/// Free functions, methods (`&self`, `&mut self`, `self`, `self: Box<Self>`),
/// generic functions and native `async fn` in trait impls (put it on each
/// impl's method). The signature is kept as written and the body runs as
/// `async move { body }.await`, so `?`, early `return` and `self` keep their
/// meaning. A non-async function is an error, and so is a method already
/// rewritten by `#[async_trait]` (use native `async fn` in traits instead).
///
/// # Equivalent code without the macro
///
/// ```
/// # use redlimit::{RateLimited, Limiter, Policy};
/// // #[rate_limit(algo = "sliding_log", strategies = "10/1s,100/1m", key = "user:<user_id>")]
/// async fn get_profile(user_id: u64) -> Result<String, RateLimited> {
///     static LIMITER: tokio::sync::OnceCell<Limiter> = tokio::sync::OnceCell::const_new();
///     let limiter = LIMITER
///         .get_or_init(|| async {
///             let policy = Policy::sliding_log("10/1s,100/1m").expect("checked at compile time by the macro");
///             let store = redlimit::global().await.expect("the macro settles this with on_error instead");
///             Limiter::new(concat!(module_path!(), "::get_profile"), policy, store)
///         })
///         .await;
///     // The macro escapes values (digits need none) and writes the key without allocating.
///     let key = format!("user:{user_id}");
///     limiter.limit(&key, 1).await?; // Err(RateLimited) converted with `From`
///     async move { Ok(format!("profile {user_id}")) }.await
/// }
/// # #[tokio::main(flavor = "current_thread")] async fn main() {
/// # redlimit::init(redlimit::Store::memory()).unwrap();
/// # assert!(get_profile(1).await.is_ok());
/// # }
/// ```
///
/// The macro emits the same steps through `redlimit::__private` (a
/// `static` per function, the policy as a constant, the key, one call, a
/// branch), so all logic lives, and is tested, in the runtime crate.
#[proc_macro_attribute]
pub fn rate_limit(args: TokenStream, item: TokenStream) -> TokenStream {
    rate_limit_impl(args.into(), item.into()).into()
}

fn rate_limit_impl(args: TokenStream2, item: TokenStream2) -> TokenStream2 {
    let mut errors = Errors::default();
    let mut function: Function = match syn::parse2(item.clone()) {
        Ok(function) => function,
        Err(error) => {
            let error = if error.to_string().starts_with("#[rate_limit]") {
                error
            } else {
                syn::Error::new(
                    Span::call_site(),
                    "#[rate_limit] applies to an `async fn`: a free function, a method, or a method of a trait impl",
                )
            };
            errors.push(error);
            return fallback::emit(item, errors);
        }
    };

    // Stacked `#[rate_limit]`s below this one are expanded here, so every
    // limit is checked in the order written (and all mistakes show at once).
    let mut attributes = vec![(args, Span::call_site())];
    function.attrs.retain(|attr| {
        if attr.path().segments.last().is_none_or(|s| s.ident != "rate_limit") {
            return true;
        }
        let tokens = match &attr.meta {
            syn::Meta::List(list) => list.tokens.clone(),
            _ => TokenStream2::new(),
        };
        attributes.push((tokens, attr.path().span()));
        false
    });

    check_signature(&function.sig, &mut errors);
    let args = Arguments::of(&function.sig);
    let mut configs = Vec::new();
    for (tokens, span) in attributes {
        if let Some(options) = Options::parse(tokens, span, &mut errors) {
            configs.push(validate::validate(options, &function, &args, &mut errors));
        }
    }
    check_distinct_names(&configs, &function.sig.ident, &mut errors);
    if !errors.is_empty() {
        return fallback::emit(function.into_token_stream(), errors);
    }
    let configs: Vec<_> = configs.into_iter().map(|c| c.expect("no errors: every attribute is valid")).collect();
    expand::function(function, &configs, &args)
}

/// Stacked limits with one name would count into the same stored keys (with
/// different policies), so each needs its own name.
fn check_distinct_names(configs: &[Option<validate::Config>], fn_name: &syn::Ident, errors: &mut Errors) {
    let configs: Vec<_> = configs.iter().flatten().collect();
    for (i, later) in configs.iter().enumerate() {
        let name = later.name.as_ref().map(syn::LitStr::value);
        if configs[..i].iter().any(|earlier| earlier.name.as_ref().map(syn::LitStr::value) == name) {
            let (span, shown) = match &later.name {
                Some(lit) => (lit.span(), format!("`{}`", lit.value())),
                None => (later.span, format!("the default name (module path + `{fn_name}`)")),
            };
            errors.push(syn::Error::new(
                span,
                format!("stacked `#[rate_limit]`s on `{fn_name}` both use {shown}, so they would count into the same keys: give each its own `name = \"...\"`"),
            ));
        }
    }
}

fn check_signature(sig: &syn::Signature, errors: &mut Errors) {
    if sig.asyncness.is_some() {
        return;
    }
    let message = if item::is_async_trait_desugaring(sig) {
        "#[rate_limit] sees the boxed future that `#[async_trait]` made of this method and cannot limit it: \
         remove `#[async_trait]` from the trait and its impls and write a native `async fn` in the trait (Rust 1.75+)"
            .to_string()
    } else {
        format!(
            "#[rate_limit] needs an `async fn`: the limit is decided by a store call that is awaited; write `async fn {}`",
            sig.ident
        )
    };
    errors.push(syn::Error::new(sig.fn_token.span, message));
}

#[cfg(test)]
mod tests {
    use proc_macro2::TokenStream as TokenStream2;
    use quote::quote;

    /// The expansion stays small: one static site with a constant policy,
    /// the key, the call that decides at once and the future for the rest
    /// (one each), a branch, then the body.
    #[test]
    fn expansion_is_one_site_one_call_one_branch() {
        let out = super::rate_limit_impl(
            quote!(algo = "sliding_window", strategies = "10/1s,100/1m", key = "user:<id>"),
            quote!(
                async fn get(id: u64) -> Result<u64, E> {
                    Ok(id)
                }
            ),
        )
        .to_string();
        if std::env::var_os("SHOW_EXPANSION").is_some() {
            println!("{out}");
        }
        assert_eq!(out.matches("Site :: new").count(), 1, "{out}");
        assert_eq!(out.matches(". check (").count(), 1, "{out}");
        assert!(out.contains("Policy :: __sliding_window (& [:: redlimit :: __private :: Strategy { limit : 10u64 , window_us : 1000000u64 } , :: redlimit :: __private :: Strategy { limit : 100u64 , window_us : 60000000u64 }] , 100000u64)"), "{out}");
        assert!(!out.contains("compile_error"), "{out}");
    }

    /// An argument declared as an integer is written by `push_key_integer`
    /// (no `fmt`); fields and other types by `push_key_value` (`Display`).
    #[test]
    fn integer_arguments_skip_fmt() {
        let expand = |signature: TokenStream2| {
            super::rate_limit_impl(
                quote!(algo = "gcra", rate = "1/1s", key = "<id>:<user.id>"),
                quote!(async #signature -> Result<(), E> { Ok(()) }),
            )
            .to_string()
        };
        let integer = expand(quote!(fn get(id: &i32, user: User)));
        assert_eq!(
            (integer.matches("push_key_integer").count(), integer.matches("push_key_value").count()),
            (1, 1),
            "{integer}"
        );
        let text = expand(quote!(fn get(id: &str, user: User)));
        assert_eq!(
            (text.matches("push_key_integer").count(), text.matches("push_key_value").count()),
            (0, 2),
            "{text}"
        );
    }

    /// A named policy is a name in the site, looked up at run time: no constant policy.
    #[test]
    fn a_named_policy_expands_to_a_configured_site() {
        let out = super::rate_limit_impl(
            quote!(policy = "search", key = "user:<id>"),
            quote!(
                async fn get(id: u64) -> Result<u64, E> {
                    Ok(id)
                }
            ),
        )
        .to_string();
        assert!(out.contains("Site :: configured (:: core :: concat ! (:: core :: module_path ! () , \"::\" , \"get\") , \"search\" ,"), "{out}");
        assert!(!out.contains("Policy ::"), "{out}");
        assert_eq!(out.matches(". check (").count(), 1, "{out}");
    }

    /// A policy expression is evaluated per call and given to the one call:
    /// a site without a policy, no constant policy.
    #[test]
    fn a_policy_expression_expands_to_a_per_call_site() {
        let out = super::rate_limit_impl(
            quote!(policy = plan_policy(&user), key = "user:<user.id>"),
            quote!(
                async fn get(user: User) -> Result<u64, E> {
                    Ok(user.id)
                }
            ),
        )
        .to_string();
        assert!(
            out.contains("Site :: per_call (:: core :: concat ! (:: core :: module_path ! () , \"::\" , \"get\") ,"),
            "{out}"
        );
        assert!(out.contains("let __redlimit_policy = plan_policy (& user) ;"), "{out}");
        assert!(out.contains("AsPolicy :: as_policy (& __redlimit_policy)"), "{out}");
        assert_eq!(out.matches(". check_with (").count(), 1, "{out}");
        assert!(!out.contains("Policy :: __"), "{out}");
    }

    /// A refunding site takes (keeping the key), and the body's result is
    /// given to what it took; a later site's denial gives back the earlier's.
    #[test]
    fn refund_on_takes_then_looks_at_the_result() {
        let out = super::rate_limit_impl(
            quote!(algo = "gcra", rate = "1/1s", key = "<id>", refund_on = "err"),
            quote!(
                #[rate_limit(algo = "gcra", rate = "5/1s", name = "global")]
                async fn get(id: u64) -> Result<u64, E> {
                    Ok(id)
                }
            ),
        )
        .to_string();
        if std::env::var_os("SHOW_EXPANSION").is_some() {
            println!("{out}");
        }
        assert_eq!(out.matches(". take (__redlimit_key , __redlimit_cost)").count(), 1, "{out}");
        assert_eq!(out.matches("str :: as_bytes (__redlimit_key) , __redlimit_cost").count(), 1, "{out}");
        assert_eq!(out.matches("__redlimit_taken_0 . refund () . await").count(), 1, "{out}");
        assert!(out.contains("__redlimit_taken_0 . refund_if (:: redlimit :: __private :: Failed :: failed (& __redlimit_result)) . await ; __redlimit_result"), "{out}");
    }

    /// On any error the function is emitted unchanged, followed by the errors.
    #[test]
    fn errors_keep_the_original_function() {
        let out = super::rate_limit_impl(
            quote!(algo = "nope", colour = 1),
            quote!(
                async fn get(id: u64) -> u64 {
                    id
                }
            ),
        )
        .to_string();
        assert!(out.starts_with("async fn get (id : u64) -> u64 { id }"), "{out}");
        assert_eq!(out.matches("compile_error").count(), 2, "{out}");
    }
}
