//! `key = "user:<user_id>"`: the template, checked against the signature.
//!
//! A placeholder is `<arg>`, `<arg.field>` (any depth, tuple indices too) or
//! `<self.field>`. Values are escaped at run time (`push_key_value` turns every
//! ASCII byte that is not a letter or digit into `%XX`), so a literal that
//! holds such a byte cannot be forged by a value. Two placeholders must be
//! separated by one: then `<a>:<b>` keys for `("x:y", "z")` and `("x", "y:z")`
//! differ. `%` does not count, since escapes are made of it.

use crate::errors::Errors;
use crate::item::{Argument, Arguments};
use proc_macro2::{Span, TokenStream};
use quote::quote_spanned;
use syn::{Ident, Index, LitStr, Member, Type};

pub(crate) enum Part {
    Literal(String),
    Value(Access),
}

/// `user.profile.id`: a root and fields, resolved against the signature.
pub(crate) struct Access {
    root: Root,
    fields: Vec<Member>,
    span: Span,
}

enum Root {
    SelfValue,
    Binding(Ident),
}

impl Access {
    /// The value as an expression, spanned at the template so a type without
    /// `Display` is reported there.
    pub(crate) fn to_expr(&self) -> TokenStream {
        let span = self.span;
        let fields = &self.fields;
        match &self.root {
            Root::SelfValue => {
                let self_token = syn::token::SelfValue(span);
                quote_spanned!(span=> #self_token #(.#fields)*)
            }
            Root::Binding(ident) => quote_spanned!(span=> #ident #(.#fields)*),
        }
    }

    /// Whether this is an argument itself (no field) declared with a
    /// primitive integer type (or a reference to one): its key text is then
    /// written without `fmt` (`push_key_integer`), the same text faster.
    pub(crate) fn is_integer_argument(&self, args: &Arguments) -> bool {
        let Root::Binding(ident) = &self.root else { return false };
        self.fields.is_empty()
            && args
                .list
                .iter()
                .any(|arg| matches!(arg, Argument::Named(name, ty) if name == ident && is_integer_type(ty)))
    }

    /// Parses `text` (a placeholder without its brackets, or a `cost` path)
    /// and checks its root against the signature. `shown` is how messages
    /// quote it (`<user.id>` in a key, `user.id` for `cost`).
    pub(crate) fn parse(
        text: &str,
        shown: &str,
        span: Span,
        args: &Arguments,
        fn_name: &Ident,
        option: &str,
    ) -> Result<Access, String> {
        let mut segments = text.split('.');
        let root_text = segments.next().unwrap_or_default();
        let root = if root_text == "self" {
            if args.receiver().is_none() {
                return Err(format!(
                    "`{shown}` in `{option}` reads `self`, but `{fn_name}` is not a method taking `self`; {}",
                    args.describe()
                ));
            }
            Root::SelfValue
        } else {
            if !is_identifier(root_text) {
                return Err(format!(
                    "`{shown}` in `{option}` must start with an argument name, like `user_id` or `user.id`"
                ));
            }
            match args.binding(root_text) {
                // The template's span resolves to the argument (both come from
                // the user's code) and makes type errors point at the template.
                Some(_) => Root::Binding(Ident::new(root_text, span)),
                None if shown.trim_matches(['<', '>']) == root_text => {
                    return Err(format!(
                        "`{shown}` in `{option}` is not an argument of `{fn_name}`; {}",
                        args.describe()
                    ))
                }
                None => {
                    return Err(format!(
                        "`{shown}` in `{option}`: `{root_text}` is not an argument of `{fn_name}`; {}",
                        args.describe()
                    ))
                }
            }
        };
        let mut fields = Vec::new();
        for segment in segments {
            if is_identifier(segment) {
                fields.push(Member::Named(Ident::new(segment, span)));
            } else if let Ok(index) = segment.parse::<u32>() {
                fields.push(Member::Unnamed(Index { index, span }));
            } else {
                return Err(format!(
                    "`{shown}` in `{option}`: `{segment}` is not a field name; write `arg.field` or `arg.0`"
                ));
            }
        }
        Ok(Access { root, fields, span })
    }
}

/// `u64`, `&i32`, ...: a primitive integer of at most 64 bits, as written.
fn is_integer_type(ty: &Type) -> bool {
    match ty {
        Type::Reference(reference) => is_integer_type(&reference.elem),
        Type::Group(group) => is_integer_type(&group.elem),
        Type::Paren(paren) => is_integer_type(&paren.elem),
        Type::Path(path) if path.qself.is_none() => path.path.get_ident().is_some_and(|ident| {
            matches!(
                ident.to_string().as_str(),
                "u8" | "u16" | "u32" | "u64" | "usize" | "i8" | "i16" | "i32" | "i64" | "isize"
            )
        }),
        _ => false,
    }
}

fn is_identifier(text: &str) -> bool {
    let mut chars = text.chars();
    matches!(chars.next(), Some(c) if c == '_' || c.is_ascii_alphabetic())
        && chars.all(|c| c == '_' || c.is_ascii_alphanumeric())
        && text != "_"
}

/// Parses the template; every mistake goes to `errors`, all at the literal.
pub(crate) fn parse_template(
    lit: &LitStr,
    args: &Arguments,
    fn_name: &Ident,
    errors: &mut Errors,
) -> Option<Vec<Part>> {
    let span = lit.span();
    let text = lit.value();
    let before = errors.count();
    let mut error = |message: String| errors.push(syn::Error::new(span, message));
    if text.is_empty() {
        error("empty `key`: remove `key` for one limit shared by every call, or name an argument, like `key = \"user:<user_id>\"`".into());
        return None;
    }
    let mut parts = Vec::new();
    let mut rest = text.as_str();
    while !rest.is_empty() {
        match rest.find(['<', '>']) {
            None => {
                parts.push(Part::Literal(rest.to_string()));
                rest = "";
            }
            Some(at) if rest.as_bytes()[at] == b'>' => {
                error(format!("`>` in `key` without a matching `<`: placeholders are written `<arg>`, like `user:<user_id>` (in \"{text}\")"));
                rest = &rest[at + 1..];
            }
            Some(at) => {
                if at > 0 {
                    parts.push(Part::Literal(rest[..at].to_string()));
                }
                let inner = &rest[at + 1..];
                match inner.find(['<', '>']) {
                    Some(end) if inner.as_bytes()[end] == b'>' => {
                        let name = &inner[..end];
                        if name.is_empty() {
                            error("empty placeholder `<>` in `key`: name an argument, like `<user_id>`".into());
                        } else {
                            match Access::parse(name, &format!("<{name}>"), span, args, fn_name, "key") {
                                Ok(access) => parts.push(Part::Value(access)),
                                Err(message) => error(message),
                            }
                        }
                        rest = &inner[end + 1..];
                    }
                    _ => {
                        error(format!("`<` in `key` is never closed: placeholders are written `<arg>`, like `user:<user_id>` (in \"{text}\")"));
                        rest = "";
                    }
                }
            }
        }
    }
    check_separators(&parts, &text, &mut error);
    (errors.count() == before).then_some(parts)
}

/// Between two placeholders there must be a byte no value can produce.
fn check_separators(parts: &[Part], text: &str, error: &mut impl FnMut(String)) {
    let mut last_value = false;
    let mut separated = true;
    for part in parts {
        match part {
            Part::Literal(literal) => {
                separated |= literal.chars().any(|c| c.is_ascii() && !c.is_ascii_alphanumeric() && c != '%');
            }
            Part::Value(_) => {
                if last_value && !separated {
                    error(format!(
                        "two placeholders in `key` need an ASCII separator between them, such as `:` or `/` (e.g. `<a>:<b>`; \
                         letters, digits, `%` and non-ASCII text do not count): without one, different values can make the same key (in \"{text}\")"
                    ));
                    return;
                }
                last_value = true;
                separated = false;
            }
        }
    }
}
