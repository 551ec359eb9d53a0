//! Output when anything is wrong: the function exactly as written (minus the
//! `#[rate_limit]` attributes already reported), then one `compile_error!` per
//! mistake. Callers of the function keep compiling, so the only errors shown
//! are the attribute's, and IDEs keep completing.

use crate::errors::Errors;
use proc_macro2::TokenStream;
use quote::quote;

pub(crate) fn emit(original: TokenStream, errors: Errors) -> TokenStream {
    let errors = errors.into_compile_errors();
    quote! {
        #original
        #errors
    }
}
