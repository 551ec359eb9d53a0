//! Phase 2, priorities: `headroom = "low 50%, normal 20%"` (checked by
//! `redlimit-grammar` against the attribute's policy, as the runtime's
//! `Policy::with_headroom` checks it) and `priority = <argument>`, the
//! class each call is decided as.

use crate::attr::Options;
use crate::errors::Errors;
use crate::item::Arguments;
use crate::key::Access;
use crate::policy::SitePolicy;
use proc_macro2::Span;
use quote::ToTokens;
use redlimit_grammar::Headroom;
use syn::spanned::Spanned;
use syn::Expr;

/// A site's classes: the headroom of its inline policy, and the argument
/// naming each call's class.
#[derive(Default)]
pub(crate) struct Classes {
    pub headroom: Option<Headroom>,
    pub priority: Option<(Access, Span)>,
}

/// `headroom` and `priority`, checked against each other and the policy
/// (`None`: the policy has errors of its own, already reported).
pub(crate) fn classes(
    options: &Options,
    policy: Option<&SitePolicy>,
    args: &Arguments,
    fn_name: &syn::Ident,
    errors: &mut Errors,
) -> Classes {
    let headroom = options.headroom.as_ref().and_then(|lit| {
        let read = redlimit_grammar::parse_headroom(&lit.value())
            .and_then(|headroom| match policy.and_then(SitePolicy::spec) {
                Some(spec) => headroom.check(spec).map(|()| headroom),
                None => Ok(headroom),
            })
            // The grammar's messages open with `headroom:`.
            .map_err(|e| syn::Error::new(lit.span(), e.to_string()));
        let elsewhere = match policy {
            Some(SitePolicy::Named(name)) => {
                Some(format!("the policy \"{}\" is configured at run time: give it `headroom` there", name.value()))
            }
            Some(SitePolicy::PerCall(_)) => {
                Some("each call's `Policy` brings its own: give it one with `Policy::with_headroom`".to_owned())
            }
            _ => None,
        };
        if let Some(why) = elsewhere {
            errors.push(syn::Error::new(lit.span(), format!("`headroom` cannot be combined with `policy`: {why}")));
            return None;
        }
        read.map_err(|e| errors.push(e)).ok()
    });
    let priority = options.priority.as_ref().and_then(|expr| argument(expr, args, fn_name, errors));

    if let (Some(lit), None) = (&options.headroom, &options.priority) {
        errors.push(syn::Error::new(
            lit.span(),
            "`headroom` needs `priority = <argument>`: without it every call is normal, and low calls' headroom would never apply; name the argument holding each call's `redlimit::Priority`",
        ));
    }
    if let (Some(expr), None, Some(SitePolicy::Inline(_))) = (&options.priority, &options.headroom, policy) {
        errors.push(syn::Error::new(
            expr.span(),
            "`priority` has no effect: the policy keeps no headroom, so every class decides alike; add `headroom = \"low 50%, normal 20%\"`, or remove `priority`",
        ));
    }
    Classes { headroom, priority }
}

/// `priority = class` or `priority = request.class`: an argument (or a field of one).
fn argument(expr: &Expr, args: &Arguments, fn_name: &syn::Ident, errors: &mut Errors) -> Option<(Access, Span)> {
    if !matches!(expr, Expr::Path(_) | Expr::Field(_)) {
        errors.push(syn::Error::new(
            expr.span(),
            "`priority` takes an argument holding a `redlimit::Priority`, like `priority = class` or `priority = request.class`",
        ));
        return None;
    }
    let text: String = expr.to_token_stream().to_string().chars().filter(|c| !c.is_whitespace()).collect();
    match Access::parse(&text, &text, expr.span(), args, fn_name, "priority") {
        Ok(access) => Some((access, expr.span())),
        Err(message) => {
            errors.push(syn::Error::new(expr.span(), message));
            None
        }
    }
}
