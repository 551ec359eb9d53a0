//! [`permit_lost`] and [`until_permit_lost`]: how an annotated function's
//! body learns that the concurrency permit it runs under was lost. The
//! generated code runs such a body with its permits' leases in a task-local
//! (`watched`), which these read.

use crate::permit::{lease::Lease, Ticket};
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::Poll;

/// The leases the running body holds, its callers' included (nested calls).
type Leases = Option<Arc<[Arc<Lease>]>>;

tokio::task_local! {
    static HELD: Leases;
}

/// Whether a concurrency permit that the running `#[rate_limit]` body holds
/// (this function's or an annotated caller's) lost its lease: see
/// [`Permit::is_lost`](crate::Permit::is_lost) for when that happens. From
/// then on more than `limit` calls may run at once; a body that must not
/// run beside another should stop. False outside such a body, under a rate
/// policy, and in a task the body spawned (the permit belongs to its
/// function's task). [`until_permit_lost`] waits for it.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")] async fn main() {
/// use redlimit::{rate_limit, ManualClock, RateLimited, Store};
/// use std::time::Duration;
///
/// #[rate_limit(algo = "concurrency", limit = 1, lease = "300ms", key = "export")]
/// async fn export(clock: &ManualClock) -> Result<bool, RateLimited> {
///     assert!(!redlimit::permit_lost());
///     // The store's clock passes the lease (as when this process stalls):
///     // the next renewal finds it ended.
///     clock.advance(Duration::from_secs(1));
///     redlimit::until_permit_lost().await;
///     Ok(redlimit::permit_lost())
/// }
///
/// let clock = ManualClock::new();
/// let store = Store::memory().with_clock(clock.clone());
/// assert!(redlimit::scope(store, export(&clock)).await.unwrap(), "the body was told");
/// assert!(!redlimit::permit_lost(), "outside the body");
/// # }
/// ```
pub fn permit_lost() -> bool {
    HELD.try_with(|held| held.as_ref().is_some_and(|held| held.iter().any(|lease| lease.is_lost()))).unwrap_or(false)
}

/// Waits until [`permit_lost`] is true; forever where it never can be
/// (outside a `#[rate_limit]` body holding a concurrency permit). For a
/// body that must stop once its permit is lost:
/// `tokio::select! { done = work() => done, () = redlimit::until_permit_lost() => Err(..) }`.
pub async fn until_permit_lost() {
    let held = HELD.try_with(Clone::clone).ok().flatten();
    let Some(held) = held.filter(|held| !held.is_empty()) else {
        return std::future::pending().await;
    };
    let mut each: Vec<Pin<Box<dyn Future<Output = ()> + Send + '_>>> =
        held.iter().map(|lease| Box::pin(lease.lost()) as Pin<Box<dyn Future<Output = ()> + Send>>).collect();
    std::future::poll_fn(|cx| {
        if each.iter_mut().any(|lost| lost.as_mut().poll(cx).is_ready()) {
            Poll::Ready(())
        } else {
            Poll::Pending
        }
    })
    .await;
}

/// Runs an annotated function's `body` with the leases of `tickets` (and
/// those of the body it runs in, if any) where [`permit_lost`] finds them.
#[doc(hidden)]
pub fn watched<F: Future>(tickets: &[&Ticket], body: F) -> impl Future<Output = F::Output> {
    let outer = HELD.try_with(Clone::clone).ok().flatten();
    let mut own = tickets.iter().filter_map(|ticket| ticket.lease()).peekable();
    let leases = match (outer, own.peek()) {
        (outer, None) => outer,
        (outer, Some(_)) => Some(outer.iter().flat_map(|outer| outer.iter()).cloned().chain(own.cloned()).collect()),
    };
    HELD.scope(leases, body)
}
