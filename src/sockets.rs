//! Open connections as the JS thread sees them: a vector indexed by connection id. An entry is
//! filled when the connection's open event is handed to JS and emptied — the id given back to
//! the core — when its close event is. JS refers to a socket by this small integer, so a call
//! from JS costs one index, no napi object per socket and no type check.

use native_ws::Conn;
use std::cell::RefCell;
use std::sync::Arc;

thread_local! {
    static SOCKETS: RefCell<Vec<Option<Arc<Conn>>>> = const { RefCell::new(Vec::new()) };
}

pub fn insert(conn: Arc<Conn>) {
    SOCKETS.with(|s| {
        let mut s = s.borrow_mut();
        let i = conn.id as usize;
        if s.len() <= i {
            s.resize(i + 1, None);
        }
        s[i] = Some(conn);
    });
}

/// Forget the connection and let the core reuse its id.
pub fn remove(id: u32) {
    let had = SOCKETS.with(|s| s.borrow_mut().get_mut(id as usize).and_then(Option::take));
    if had.is_some() {
        native_ws::release_id(id);
    }
}

/// Run `f` on the open connection `id`; None once it closed.
pub fn with<R>(id: u32, f: impl FnOnce(&Arc<Conn>) -> R) -> Option<R> {
    SOCKETS.with(|s| s.borrow().get(id as usize).and_then(Option::as_ref).map(f))
}
