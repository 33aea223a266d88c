//! The threaded driver of a connection's [`Task`]: one tokio task on an I/O thread that waits for
//! the socket, the JS thread's requests and the task's deadline, and runs the state machine.

use super::{abnormal, Outcome, Task};
use crate::conn::Conn;
use crate::handler::{Handler, OpenInfo};
use crate::stream::Stream;
use std::sync::Arc;
use std::time::Duration;
use tokio::time::Instant;

/// Run an upgraded connection until it closes: the open event, then the 101 response `hello`,
/// then the bytes read past the HTTP head (`initial`).
/// The open event is handed to the consumer here, before the future exists: an async fn keeps its
/// arguments for its whole life, and `info` would then weigh on every idle connection.
pub(crate) fn run(
    conn: Arc<Conn>,
    stream: Stream,
    hello: Vec<u8>,
    initial: Vec<u8>,
    handler: Arc<dyn Handler>,
    info: OpenInfo,
) -> impl std::future::Future<Output = ()> {
    handler.open(&conn, info);
    handler.flush();
    let mut task = Task::new(conn, handler, stream);
    task.greet(hello);
    // An async block, not an async fn taking the task: that would keep the task twice.
    async move {
        let out = match task.start(initial) {
            Some(out) => out,
            None => task.main().await,
        };
        task.end(out);
    }
}

impl Task<Stream> {
    async fn main(&mut self) -> Outcome {
        let sleep = tokio::time::sleep(Duration::from_secs(86_400));
        tokio::pin!(sleep);
        let mut armed: Option<Instant> = None;
        loop {
            let deadline = self.deadline();
            if deadline != armed {
                if let Some(d) = deadline {
                    sleep.as_mut().reset(d);
                }
                armed = deadline;
            }
            let step = tokio::select! {
                biased;
                _ = self.conn.wake.notified() => self.on_control(),
                r = self.stream.readable(), if self.wants_read() => match r {
                    Ok(()) => self.on_readable(),
                    Err(_) => Some(abnormal()),
                },
                r = self.stream.writable(), if self.want_write => match r {
                    Ok(()) => self.pump(),
                    Err(_) => Some(abnormal()),
                },
                _ = &mut sleep, if armed.is_some() => {
                    armed = None;
                    self.on_timer()
                }
            };
            if let Some(out) = step {
                return out;
            }
        }
    }
}
