//! The backpressure close (closeOnBackpressureLimit): the peer is told why. The frame on the
//! wire is finished (never cut), frames not yet started are dropped, then a close frame 1013
//! "backpressure limit" and FIN; the wait for the peer's close is bounded by CLOSE_WAIT, so a
//! slow reader cannot hold the socket.

use super::{Outcome, Socket, Task};
use crate::codec;
use crate::config::CLOSE_WAIT;
use tokio::time::Instant;

/// Reason of the close frame sent when a socket is closed for backpressure.
pub(crate) const BACKPRESSURE_REASON: &str = "backpressure limit";

impl<S: Socket> Task<S> {
    pub(super) fn overflow(&mut self) -> Option<Outcome> {
        let rest = self.conn.overflow_rest();
        if self.out.wire.is_empty() {
            // Nothing of ours on the wire: only what the JS thread began writing, if anything.
            self.out.wire = rest;
        } else {
            self.out.wire.cut_after_current_frame();
        }
        codec::write_close(self.out.wire.buf_mut(), codec::CLOSE_TRY_AGAIN, BACKPRESSURE_REASON);
        self.reading = false;
        self.linger = true;
        let out = (codec::CLOSE_TRY_AGAIN, BACKPRESSURE_REASON.to_string());
        self.finish = Some(out);
        self.close_deadline = Some(Instant::now() + CLOSE_WAIT);
        self.pump()
    }
}
