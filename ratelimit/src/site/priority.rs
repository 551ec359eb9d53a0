//! What generated code calls for `priority = <argument>` and `headroom = "..."`:
//! the class a call is decided as, and the headroom of a policy written in
//! the attribute (checked at compile time).

use crate::policy::{Headroom, Policy, Priority};
use crate::site::SiteCall;

/// What `priority = <argument>` reads: the class a call is decided as, from
/// a [`Priority`], a reference to one, or an `Option` of one (`None`: normal).
#[diagnostic::on_unimplemented(
    message = "`priority = ...` must name a `redlimit::Priority`, but this argument is `{Self}`",
    label = "the class this call is decided as",
    note = "give a `Priority`, a `&Priority` or an `Option<Priority>` (`None` is `Priority::Normal`); map a type of your own to one in an argument or a field"
)]
pub trait AsPriority {
    /// The class of this call.
    fn as_priority(&self) -> Priority;
}

impl AsPriority for Priority {
    fn as_priority(&self) -> Priority {
        *self
    }
}

impl<T: AsPriority + ?Sized> AsPriority for &T {
    fn as_priority(&self) -> Priority {
        (**self).as_priority()
    }
}

impl<T: AsPriority> AsPriority for Option<T> {
    /// No class given: [`Priority::Normal`].
    fn as_priority(&self) -> Priority {
        self.as_ref().map_or(Priority::Normal, T::as_priority)
    }
}

impl SiteCall<'_> {
    /// This call decided as `class` ([`Limiter::with_priority`](crate::Limiter::with_priority)).
    pub fn priority(mut self, class: Priority) -> Self {
        self.priority = Some(class);
        self
    }
}

impl Policy {
    /// The attribute's policy with the headroom it validated at compile time.
    #[doc(hidden)]
    pub const fn __with_headroom(mut self, low: u8, normal: u8) -> Policy {
        self.headroom = Headroom::__validated(low, normal);
        self
    }
}
