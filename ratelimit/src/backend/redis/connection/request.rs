//! [`Request`]: what one request sends, a command or a pipeline of them
//! written together (a script call with its `WAIT`), so both take the same
//! path through the idle probe, the data watch and the sentinels' switch.

use redis::aio::ConnectionLike;
use redis::{Cmd, Pipeline, RedisResult, Value};

/// One command, or several written at once and answered in order.
#[derive(Clone, Copy)]
pub(crate) enum Request<'a> {
    One(&'a Cmd),
    /// Replied as an array of each command's reply: a server error in any
    /// of them is the request's error once `Value::extract_error` has run.
    Pipelined(&'a Pipeline),
}

impl Request<'_> {
    pub(super) async fn on(self, connection: &mut (impl ConnectionLike + ?Sized)) -> RedisResult<Value> {
        match self {
            Request::One(cmd) => connection.req_packed_command(cmd).await,
            Request::Pipelined(pipeline) => {
                connection.req_packed_commands(pipeline, 0, pipeline.len()).await.map(Value::Array)
            }
        }
    }
}
