//! A response body holding its request's concurrency permit until the body
//! is sent: a streamed response counts as in flight until its last frame.

use crate::permit::Permit;
use axum::body::{Body, Bytes};
use http_body::{Frame, SizeHint};
use std::future::Future;
use std::pin::Pin;
use std::task::{ready, Context, Poll};
use tokio::task::JoinHandle;

/// `body`, giving `permit` back when its last frame is taken, or when it
/// is dropped unsent (the client hung up, or the request was a `HEAD`).
///
/// The last frame waits for the release, so a client that sends its next
/// request on reading the response never finds its own permit still held.
pub(super) fn holding(body: Body, permit: Permit) -> Body {
    Body::new(HeldBody { inner: body, state: PermitState::Sending(permit), last: None })
}

struct HeldBody {
    inner: Body,
    state: PermitState,
    /// What ends the body, answered once the release is done: its last
    /// frame, or `None` when the body ended after the frame before.
    last: Option<Option<Frame<Bytes>>>,
}

/// Where the body's permit is.
enum PermitState {
    /// The body is being sent; the permit is held.
    Sending(Permit),
    /// The body has ended; its permit is being given back.
    Releasing(JoinHandle<()>),
    /// The permit is back.
    Done,
}

impl HeldBody {
    /// Starts giving the permit back, on a task of its own so a body
    /// dropped mid-way cannot stop it.
    fn release(&mut self) {
        let PermitState::Sending(permit) = std::mem::replace(&mut self.state, PermitState::Done) else { return };
        match tokio::runtime::Handle::try_current() {
            Ok(runtime) => {
                self.state = PermitState::Releasing(runtime.spawn(async move { drop(permit.release().await) }))
            }
            // No runtime to wait on: dropped, the permit goes back as it can.
            Err(_) => drop(permit),
        }
    }
}

impl http_body::Body for HeldBody {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Result<Frame<Bytes>, axum::Error>>> {
        let this = self.get_mut();
        if let PermitState::Sending(_) = this.state {
            match ready!(Pin::new(&mut this.inner).poll_frame(cx)) {
                // A frame after which the body has more to send.
                Some(Ok(frame)) if !this.inner.is_end_stream() => return Poll::Ready(Some(Ok(frame))),
                Some(Ok(frame)) => {
                    this.last = Some(Some(frame));
                    this.release();
                }
                None => {
                    this.last = Some(None);
                    this.release();
                }
                // The body failed: it ends here, and so does the request's hold.
                Some(Err(error)) => {
                    this.release();
                    return Poll::Ready(Some(Err(error)));
                }
            }
        }
        if let PermitState::Releasing(release) = &mut this.state {
            // A release that failed leaves the lease to run out; the body is sent either way.
            let _ = ready!(Pin::new(release).poll(cx));
            this.state = PermitState::Done;
        }
        match this.last.take() {
            Some(last) => Poll::Ready(last.map(Ok)),
            // Ended: the body had nothing more then, and has nothing more now.
            None => Poll::Ready(None),
        }
    }

    /// Never ended while the permit is held, so the server takes the last
    /// frame (and with it gives the permit back) even of an empty body.
    fn is_end_stream(&self) -> bool {
        matches!(self.state, PermitState::Done) && self.last.is_none()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}
