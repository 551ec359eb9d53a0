//! Collects every mistake of a build into one `syn::Error` (as serde's `Ctxt`
//! does), so three typos are three errors in one build, not one per rebuild.

use proc_macro2::TokenStream;

#[derive(Default)]
pub(crate) struct Errors {
    all: Option<syn::Error>,
}

impl Errors {
    pub(crate) fn push(&mut self, error: syn::Error) {
        match &mut self.all {
            Some(all) => all.combine(error),
            None => self.all = Some(error),
        }
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.all.is_none()
    }

    /// How many mistakes so far.
    pub(crate) fn count(&self) -> usize {
        self.all.as_ref().map_or(0, |e| e.into_iter().count())
    }

    /// One `compile_error!` per mistake, each at its own span.
    pub(crate) fn into_compile_errors(self) -> TokenStream {
        self.all.map(|e| e.into_compile_error()).unwrap_or_default()
    }
}
