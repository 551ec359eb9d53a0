//! Batches: the calls of one script that wait at the same time, sent to
//! Redis as one script call. The folder owns the batcher (`batch.rs`), a call
//! of a batch and how a batch fails (`batched.rs`), how a batch's reply reads
//! (`batch_reply.rs`), and which calls may share one (`grouping.rs`).

pub(super) mod batch;
pub(super) mod batch_reply;
pub(super) mod batched;
pub(super) mod grouping;
