//! [`Unavailable`]: the store of a limiter whose real store could not be
//! built; every call fails with the reason, so `OnError` settles it.

use super::{Answer, Backend, Binding, Bound, BoxFuture, Call};
use crate::clock::Clock;
use crate::error::Error;
use std::sync::Arc;

/// A backend that only reports why the real one could not be built.
pub(crate) struct Unavailable(pub(crate) Error);

impl Backend for Unavailable {
    fn bind(&self, _: Binding<'_>) -> Arc<dyn Bound> {
        Arc::new(UnavailableBound(self.0.clone()))
    }

    fn kind(&self) -> &'static str {
        "unavailable"
    }
}

struct UnavailableBound(Error);

impl Bound for UnavailableBound {
    fn decide<'a>(&'a self, _: Call<'_>, _: &dyn Clock) -> Answer<'a> {
        Answer::Now(Err(self.0.clone()))
    }

    fn reset<'a>(&'a self, _: &[u8]) -> BoxFuture<'a, Result<(), Error>> {
        Box::pin(std::future::ready(Err(self.0.clone())))
    }

    fn remote(&self) -> bool {
        false
    }
}
