//! Phase 3: code generation from validated [`Config`]s.
//!
//! The user's signature is kept as written. Each attribute adds one block
//! before the body: a `static` site, the key, one call into
//! `::redlimit::__private`, and a branch. All logic lives in the runtime.

use crate::item::{self, Argument, Arguments, Function};
use crate::key::Part;
use crate::policy::SitePolicy;
use crate::validate::{Config, Cost, OnError, OnLimit};
use proc_macro2::{Group, Literal, Span, TokenStream, TokenTree};
use quote::{quote, quote_spanned};
use syn::spanned::Spanned;
use syn::Ident;

use crate::policy_const::policy;

/// The whole function.
///
/// Input:
/// ```text
/// #[rate_limit(algo = "sliding_log", strategies = "5/3s", key = "user:<user_id>")]
/// #[rate_limit(algo = "gcra", rate = "100/1s", name = "api")]
/// pub async fn profile(user_id: u64) -> Result<Profile, ApiError> {
///     let p = load(user_id).await?;
///     Ok(p)
/// }
/// ```
///
/// Output (stacked attributes are expanded by the first, in declared order;
/// each site's block gives the ticket its call holds, kept until the body
/// ends, however it ends: a concurrency policy's lease is given back then):
/// ```text
/// pub async fn profile(user_id: u64) -> Result<Profile, ApiError> {
///     let __redlimit_ticket_0 = { /* site for sliding_log 5/3s, see `site` */ };
///     let __redlimit_ticket_1 = { /* site for gcra 100/1s */ };
///     // A site whose ticket may hold a concurrency lease (its policy says so,
///     // or is named or given per call) has the body run as
///     // `watched(&[&__redlimit_ticket_0], async move { .. }).await`, where
///     // `redlimit::permit_lost` finds its lease.
///     async move {
///         // Gives `return` and `?` in the body the function's return type,
///         // as tracing-attributes does.
///         if false { let fake: Result<Profile, ApiError> = loop {}; return fake; }
///         let p = load(user_id).await?;
///         Ok(p)
///     }
///     .await
/// }
/// ```
///
/// With `refund_on = "err"` a site's ticket also keeps what its call took,
/// and the body's result is looked at before it is returned:
/// ```text
///     let __redlimit_ticket_0 = { /* site, see `site` */ };
///     let __redlimit_result = async move { /* as above */ }.await;
///     // Spanned at the return type: a type that is not a `Result` is reported there.
///     Site::refund_if(__redlimit_ticket_0, Failed::failed(&__redlimit_result)).await;
///     __redlimit_result
/// ```
/// With `settle = tokens_used` the same, the cost being the estimate, and
/// the call settled at what the function says the result cost:
/// ```text
///     // Spanned at the path: a function that does not fit is reported there.
///     Site::settle(__redlimit_ticket_0, Settles::actual(&tokens_used, &__redlimit_result)).await;
/// ```
pub(crate) fn function(function: Function, configs: &[Config], args: &Arguments) -> TokenStream {
    let Function { attrs, vis, sig, body, .. } = &function;
    // What each site's call holds while the body runs, named by its place.
    let holders: Vec<Ident> =
        (0..configs.len()).map(|i| Ident::new(&format!("__redlimit_ticket_{i}"), Span::mixed_site())).collect();
    // Those whose body's failure gives back what their call took (`refund_on`),
    // or whose result settles it (`settle`).
    let tickets: Vec<Option<&Ident>> = configs
        .iter()
        .zip(&holders)
        .map(|(config, holder)| (config.refund_on_err || config.settle.is_some()).then_some(holder))
        .collect();
    // A denial gives back what every site before it took: the body they paid for never runs.
    let sites = configs.iter().enumerate().map(|(i, config)| {
        let outer = i + 1 < configs.len();
        site(config, sig, args, &holders[i], &holders[..i], outer)
    });
    let fake_return = match item::return_type(sig) {
        Some(ty) if !item::mentions_impl_trait(ty) => {
            let fake = Ident::new("__redlimit_fake_return", Span::mixed_site());
            quote! {
                #[allow(unknown_lints, unreachable_code, clippy::diverging_sub_expression, clippy::empty_loop, clippy::needless_return)]
                if false {
                    let #fake: #ty = loop {};
                    return #fake;
                }
            }
        }
        _ => TokenStream::new(),
    };
    let body = quote! {
        async move {
            #fake_return
            #body
        }
    };
    // The tickets a concurrency policy may lease, where `permit_lost` finds them.
    let leased: Vec<&Ident> =
        configs.iter().zip(&holders).filter(|(config, _)| may_lease(config)).map(|(_, holder)| holder).collect();
    let mut run = match configs.first() {
        Some(config) if !leased.is_empty() => {
            let krate = &config.krate;
            quote!(#krate::__private::watched(&[#(&#leased),*], #body).await)
        }
        _ => quote!(#body.await),
    };
    if tickets.iter().any(Option::is_some) {
        let result = Ident::new("__redlimit_result", Span::mixed_site());
        let refunds = configs.iter().zip(&tickets).filter_map(|(config, ticket)| {
            let (krate, ticket) = (&config.krate, (*ticket)?);
            if let Some(settle) = &config.settle {
                // Spanned at the path: a function that does not fit is reported there.
                let actual = respan(quote!(#krate::__private::Settles::actual(&#settle, &#result)), settle.span());
                return Some(quote!(#krate::__private::Site::settle(#ticket, #actual).await;));
            }
            let failed = respan(quote!(#krate::__private::Failed::failed(&#result)), return_span(sig));
            Some(quote!(#krate::__private::Site::refund_if(#ticket, #failed).await;))
        });
        run = quote! {
            let #result = #run;
            #(#refunds)*
            #result
        };
    }
    quote! {
        #(#attrs)*
        #vis #sig {
            #(#sites)*
            #run
        }
    }
}

/// Whether a site's permit may be a concurrency lease: its policy says so,
/// or is known only at run time.
fn may_lease(config: &Config) -> bool {
    match &config.policy {
        SitePolicy::Inline(spec) => spec.kind == redlimit_grammar::AlgorithmKind::Concurrency,
        SitePolicy::Named(_) | SitePolicy::PerCall(_) => true,
    }
}

/// Where the function says what it returns: its return type, or its name.
fn return_span(sig: &syn::Signature) -> Span {
    match &sig.output {
        syn::ReturnType::Type(_, ty) => ty.span(),
        syn::ReturnType::Default => sig.ident.span(),
    }
}

/// One attribute.
///
/// Input: `#[rate_limit(algo = "sliding_log", strategies = "5/3s", key = "user:<user_id>")]`
/// on `async fn profile(user_id: u64) -> Result<Profile, ApiError>`.
///
/// Output (paths shortened; all are `::redlimit::__private::...`):
/// ```text
/// {
///     static __RATELIMIT_SITE: Site = Site::new(
///         concat!(module_path!(), "::", "profile"),
///         Policy::__sliding_log(&[Strategy::new(5u64, 3000000u64)]),
///         OnLimit::Error,
///         OnError::Allow,
///     );
///     // On the stack, written in place: no allocation for a key of typical length.
///     let mut key = KeyBuf::new();
///     KeyBuf::push_str(&mut key, "user:");
///     // `push_key_value(&mut key, &user_id)` for a type that is not an integer
///     push_key_integer(&mut key, &user_id);
///     let cost = 1u64;
///     // A key without placeholders is a `&str`: `str::as_bytes(key)`.
///     match __RATELIMIT_SITE.call(None, Call::check(KeyBuf::as_bytes(&key), cost)).await {
///         Ok(ticket) => ticket,
///         // on_limit = "error": spanned at the return type, so a type that
///         // cannot hold a denial is reported there.
///         Err(denied) => return IntoDenial::from_denial(denied),
///         // fallback = cached: Err(_) => return Fallback::call(cached, (user_id,)).await,
///     }
/// }
/// ```
/// With `policy = "search"` the site is `Site::configured(<name>, "search",
/// OnLimit::Error, OnError::Allow)`: the policy is looked up at run time.
///
/// With `policy = plan_policy(&user)` the site is `Site::per_call(<name>,
/// OnLimit::Error, OnError::Allow)` and the call gives the policy; its
/// locals end with the block, before the match's arms:
/// ```text
/// match {
///     let policy = plan_policy(&user);
///     // Spanned at the expression, so a wrong type is reported there.
///     __RATELIMIT_SITE.call(Some(AsPolicy::as_policy(&policy)), Call::check(KeyBuf::as_bytes(&key), cost)).await
/// } { /* as above */ }
/// ```
///
/// When no denial can reach the caller (`on_limit = "wait"`, no `max_wait`,
/// a literal cost, `on_error` not "deny") the block ends with
/// `__RATELIMIT_SITE.let_through(__RATELIMIT_SITE.call(None, ..).await)`,
/// a ticket, and the return type is free.
///
/// The block is bound to `holder` (`let holder = {..};`). With
/// `refund_on = "err"`, or when a site is stacked after it (`outer`), the
/// site is built `.refunds()`, so its ticket keeps what the call took. A
/// denial first gives back what the sites before it took (`earlier`:
/// `Site::refund(holder).await;` each): the body they paid for will not run.
fn site(
    config: &Config,
    sig: &syn::Signature,
    args: &Arguments,
    holder: &Ident,
    earlier: &[Ident],
    outer: bool,
) -> TokenStream {
    let krate = &config.krate;
    let p = quote!(#krate::__private);
    let site = Ident::new("__RATELIMIT_SITE", Span::call_site());
    let key = Ident::new("__redlimit_key", Span::mixed_site());
    let denied = Ident::new("__redlimit_denied", Span::mixed_site());
    let cost_value = Ident::new("__redlimit_cost", Span::mixed_site());

    let (name, named_by_default) = match &config.name {
        Some(name) => (quote!(#name), quote!()),
        None => {
            let fn_name = sig.ident.to_string();
            (quote!(::core::concat!(::core::module_path!(), "::", #fn_name)), quote!(.named_by_default()))
        }
    };
    let dry_run = if config.dry_run { quote!(.dry_run()) } else { quote!() };
    let refunds = if config.refund_on_err || config.settle.is_some() || outer { quote!(.refunds()) } else { quote!() };
    let prefetch = config.prefetch.map(|k| {
        let k = Literal::u64_suffixed(k);
        quote!(.prefetch(#k))
    });
    let on_limit = match config.on_limit {
        OnLimit::Error => quote!(#p::OnLimit::Error),
        OnLimit::Wait(None) => quote!(#p::OnLimit::Wait(::core::option::Option::None)),
        OnLimit::Wait(Some(us)) => {
            let us = Literal::u64_suffixed(us);
            quote!(#p::OnLimit::Wait(::core::option::Option::Some(::core::time::Duration::from_micros(#us))))
        }
    };
    let on_error = match config.on_error {
        OnError::Allow => quote!(#p::OnError::Allow),
        OnError::Deny => quote!(#p::OnError::Deny),
        OnError::Local => quote!(#p::OnError::Local),
    };
    let constructor = match &config.policy {
        SitePolicy::Inline(spec) => {
            let policy = policy(spec, &p);
            let policy = match config.classes.headroom {
                Some(headroom) => {
                    let (low, normal) = (Literal::u8_suffixed(headroom.low()), Literal::u8_suffixed(headroom.normal()));
                    quote!(#p::Policy::__with_headroom(#policy, #low, #normal))
                }
                None => policy,
            };
            quote!(#p::Site::new(#name, #policy, #on_limit, #on_error))
        }
        SitePolicy::Named(policy) => quote!(#p::Site::configured(#name, #policy, #on_limit, #on_error)),
        SitePolicy::PerCall(_) => quote!(#p::Site::per_call(#name, #on_limit, #on_error)),
    };

    // The key, and its bytes as the site reads them (by path: no user trait can answer).
    // A key with values is written in place, in the variable the call reads:
    // not built in a block and moved, which costs a copy of the buffer.
    let text_bytes = quote!(::core::primitive::str::as_bytes(#key));
    let (key_init, key_bytes) = match &config.key {
        None => (quote!(let #key = "";), text_bytes),
        Some(parts) if parts.iter().all(|part| matches!(part, Part::Literal(_))) => {
            let text: String =
                parts.iter().map(|part| if let Part::Literal(l) = part { l.as_str() } else { "" }).collect();
            (quote!(let #key = #text;), text_bytes)
        }
        Some(parts) => {
            let pushes = parts.iter().map(|part| match part {
                Part::Literal(text) => quote!(#p::KeyBuf::push_str(&mut #key, #text);),
                Part::Value(access) if access.is_integer_argument(args) => {
                    let value = access.to_expr();
                    quote_spanned!(value.span()=> #p::push_key_integer(&mut #key, &#value);)
                }
                Part::Value(access) => {
                    let value = access.to_expr();
                    quote_spanned!(value.span()=> #p::push_key_value(&mut #key, &#value);)
                }
            });
            let init = quote! {
                let mut #key = #p::KeyBuf::new();
                #(#pushes)*
            };
            (init, quote!(#p::KeyBuf::as_bytes(&#key)))
        }
    };
    let cost = match &config.cost {
        Cost::Literal(n) => {
            let n = Literal::u64_suffixed(*n);
            quote!(#n)
        }
        Cost::Argument(access, span) => {
            let value = access.to_expr();
            respan(quote!(#p::Cost::cost(&#value)), *span)
        }
    };

    // `site.call(None, Call::check(key bytes, cost))`; with a per-call policy,
    // `site.call(Some(policy), ..)` in a block that evaluates it.
    let call = quote!(#p::Call::check(#key_bytes, #cost_value));
    // `.priority(AsPriority::as_priority(&class))` after the call, spanned at the argument.
    let classed = config.classes.priority.as_ref().map(|(access, span)| {
        let value = access.to_expr();
        let class = respan(quote!(#p::AsPriority::as_priority(&#value)), *span);
        quote!(.priority(#class))
    });
    let site_call = match &config.policy {
        SitePolicy::PerCall(expr) => {
            let value = Ident::new("__redlimit_policy", Span::mixed_site());
            let policy = respan(quote!(#p::AsPolicy::as_policy(&#value)), expr.span());
            quote!({
                let #value = #expr;
                #site.call(::core::option::Option::Some(#policy), #call)#classed.await
            })
        }
        _ => quote!(#site.call(::core::option::Option::None, #call)#classed.await),
    };
    let ticket = Ident::new("__redlimit_ticket", Span::mixed_site());
    let (ok, passes) = (quote!(#ticket), quote!(#ticket));
    let give_back = quote!(#(#p::Site::refund(#earlier).await;)*);
    // The call's answer: `Ok(ticket)` to run the body, else the denial.
    let decided = site_call.clone();
    let decide = match (&config.fallback, config.returns_denial) {
        (Some(fallback), _) => {
            let (passed, types): (Vec<_>, Vec<_>) = args
                .list
                .iter()
                .map(|arg| match arg {
                    Argument::Receiver(token, ty) => (quote!(#token), quote!(#ty)),
                    // `impl Trait` cannot be named in a body; inference fills it in.
                    Argument::Named(ident, ty) if item::mentions_impl_trait(ty) => (quote!(#ident), quote!(_)),
                    Argument::Named(ident, ty) => (quote!(#ident), quote!(#ty)),
                    Argument::Pattern(_) => unreachable!("validate rejects pattern arguments with a fallback"),
                })
                .unzip();
            // The argument types are spelled out so a fallback with another
            // signature fails `Fallback<(these types)>` (one readable error),
            // and the call is located at the fallback's name.
            let call =
                respan(quote!(#p::Fallback::<(#(#types,)*)>::call(#fallback, (#(#passed,)*)).await), fallback.span());
            quote! {
                match #decided {
                    ::core::result::Result::Ok(#ok) => #passes,
                    ::core::result::Result::Err(_) => {
                        #give_back
                        return #call;
                    }
                }
            }
        }
        (None, true) => {
            let convert = respan(quote!(#p::IntoDenial::from_denial(#denied)), return_span(sig));
            quote! {
                match #decided {
                    ::core::result::Result::Ok(#ok) => #passes,
                    ::core::result::Result::Err(#denied) => {
                        #give_back
                        return #convert;
                    }
                }
            }
        }
        (None, false) => quote!(#site.let_through(#site_call)),
    };

    let block = quote! {
        {
            static #site: #p::Site = #constructor #named_by_default #dry_run #refunds #prefetch;
            #key_init
            let #cost_value: u64 = #cost;
            #decide
        }
    };
    quote!(let #holder = #block;)
}

/// `tokens` moved to `span`'s location (each keeps its own hygiene), so
/// rustc reports a type error in generated code at the user's token it
/// concerns rather than at the whole attribute.
fn respan(tokens: TokenStream, span: Span) -> TokenStream {
    tokens
        .into_iter()
        .map(|mut tree| {
            if let TokenTree::Group(group) = &tree {
                let mut inner = Group::new(group.delimiter(), respan(group.stream(), span));
                inner.set_span(group.span().located_at(span));
                tree = TokenTree::Group(inner);
            } else {
                tree.set_span(tree.span().located_at(span));
            }
            tree
        })
        .collect()
}
