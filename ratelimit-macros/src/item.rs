//! The annotated function: its signature, its arguments, and its body kept as
//! raw tokens.
//!
//! The body is not parsed (as in tracing-attributes): a body with a syntax
//! error still expands, and rustc reports the user's real error.

use proc_macro2::{Span, TokenStream};
use quote::ToTokens;
use syn::parse::{Parse, ParseStream};
use syn::{braced, Attribute, FnArg, Ident, Pat, ReturnType, Signature, Type, Visibility};

pub(crate) struct Function {
    pub attrs: Vec<Attribute>,
    pub vis: Visibility,
    pub sig: Signature,
    pub brace: syn::token::Brace,
    pub body: TokenStream,
}

impl Parse for Function {
    fn parse(input: ParseStream<'_>) -> syn::Result<Self> {
        let attrs = input.call(Attribute::parse_outer)?;
        let vis = input.parse()?;
        let sig: Signature = input.parse()?;
        if input.peek(syn::Token![;]) {
            return Err(syn::Error::new(
                sig.ident.span(),
                "#[rate_limit] needs a function body to limit: in a trait, put it on the method of each `impl`",
            ));
        }
        let content;
        let brace = braced!(content in input);
        let body = content.parse()?;
        Ok(Function { attrs, vis, sig, brace, body })
    }
}

impl ToTokens for Function {
    fn to_tokens(&self, tokens: &mut TokenStream) {
        for attr in &self.attrs {
            attr.to_tokens(tokens);
        }
        self.vis.to_tokens(tokens);
        self.sig.to_tokens(tokens);
        self.brace.surround(tokens, |tokens| self.body.to_tokens(tokens));
    }
}

/// One argument, as a caller passes it.
pub(crate) enum Argument {
    /// `self`, `&self`, `&mut self`, `self: Box<Self>`: passed on as `self`.
    Receiver(syn::token::SelfValue, Type),
    /// `name: T` or `mut name: T`: passed on as `name`.
    Named(Ident, Type),
    /// A pattern (`(a, b): (u32, u32)`, `_: T`): its bindings are usable in a
    /// key, but the argument cannot be passed on to a fallback.
    Pattern(Span),
}

/// What the signature offers to key templates, `cost` and `fallback`.
pub(crate) struct Arguments {
    pub list: Vec<Argument>,
    /// Every name an argument binds, in order (pattern bindings included).
    pub bindings: Vec<Ident>,
}

impl Arguments {
    pub(crate) fn of(sig: &Signature) -> Arguments {
        let mut list = Vec::new();
        let mut bindings = Vec::new();
        for input in &sig.inputs {
            match input {
                FnArg::Receiver(receiver) => list.push(Argument::Receiver(receiver.self_token, (*receiver.ty).clone())),
                FnArg::Typed(typed) => {
                    collect_bindings(&typed.pat, &mut bindings);
                    match &*typed.pat {
                        Pat::Ident(p) if p.by_ref.is_none() && p.subpat.is_none() => {
                            list.push(Argument::Named(p.ident.clone(), (*typed.ty).clone()))
                        }
                        other => list.push(Argument::Pattern(syn::spanned::Spanned::span(other))),
                    }
                }
            }
        }
        Arguments { list, bindings }
    }

    pub(crate) fn receiver(&self) -> Option<&syn::token::SelfValue> {
        self.list.iter().find_map(|a| match a {
            Argument::Receiver(token, _) => Some(token),
            _ => None,
        })
    }

    /// The binding called `name`, with the span the signature gave it.
    pub(crate) fn binding(&self, name: &str) -> Option<&Ident> {
        self.bindings.iter().find(|ident| *ident == name)
    }

    /// `` `user_id`, `verbose` ``, or a note that there are none, for messages.
    pub(crate) fn describe(&self) -> String {
        let mut names: Vec<String> = Vec::new();
        if self.receiver().is_some() {
            names.push("`self`".into());
        }
        names.extend(self.bindings.iter().map(|b| format!("`{b}`")));
        if names.is_empty() {
            "it takes no arguments".into()
        } else {
            format!("its arguments are {}", names.join(", "))
        }
    }
}

fn collect_bindings(pat: &Pat, out: &mut Vec<Ident>) {
    match pat {
        Pat::Ident(p) => {
            out.push(p.ident.clone());
            if let Some((_, sub)) = &p.subpat {
                collect_bindings(sub, out);
            }
        }
        Pat::Tuple(t) => t.elems.iter().for_each(|p| collect_bindings(p, out)),
        Pat::TupleStruct(t) => t.elems.iter().for_each(|p| collect_bindings(p, out)),
        Pat::Struct(s) => s.fields.iter().for_each(|f| collect_bindings(&f.pat, out)),
        Pat::Slice(s) => s.elems.iter().for_each(|p| collect_bindings(p, out)),
        Pat::Reference(r) => collect_bindings(&r.pat, out),
        Pat::Paren(p) => collect_bindings(&p.pat, out),
        Pat::Type(t) => collect_bindings(&t.pat, out),
        Pat::Or(o) => {
            if let Some(first) = o.cases.first() {
                collect_bindings(first, out);
            }
        }
        _ => {}
    }
}

/// The declared return type, `None` for `()` (written or not).
pub(crate) fn return_type(sig: &Signature) -> Option<&Type> {
    match &sig.output {
        ReturnType::Default => None,
        ReturnType::Type(_, ty) => match &**ty {
            Type::Tuple(t) if t.elems.is_empty() => None,
            ty => Some(ty),
        },
    }
}

/// True when the type mentions `impl Trait`, which a `let` cannot name.
pub(crate) fn mentions_impl_trait(ty: &Type) -> bool {
    contains_group_with_impl(ty.to_token_stream())
}

fn contains_group_with_impl(tokens: TokenStream) -> bool {
    tokens.into_iter().any(|t| match t {
        proc_macro2::TokenTree::Ident(i) => i == "impl",
        proc_macro2::TokenTree::Group(g) => contains_group_with_impl(g.stream()),
        _ => false,
    })
}

/// What `#[async_trait]` leaves behind: a non-async fn returning
/// `Pin<Box<dyn Future<...> + Send + 'async_trait>>` (it always adds that lifetime).
pub(crate) fn is_async_trait_desugaring(sig: &Signature) -> bool {
    sig.to_token_stream().to_string().contains("'async_trait")
}
