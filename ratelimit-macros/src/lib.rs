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
mod priority;
mod validate;

use crate::attr::Options;
use crate::errors::Errors;
use crate::item::{Arguments, Function};
use proc_macro::TokenStream;
use proc_macro2::{Span, TokenStream as TokenStream2};
use quote::ToTokens;
use syn::spanned::Spanned;

#[doc = include_str!("../docs/rate_limit.md")]
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
mod tests;
