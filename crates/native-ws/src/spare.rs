//! Per-thread spare vectors, reused last-in first-out: a connection borrows one while it has
//! something in flight (an outbound queue, a message being assembled) and gives it back when it is
//! empty again, so an idle connection holds none and the next user gets a warm one.

use std::cell::RefCell;

/// One thread's spare list: at most `max_count` vectors of a capacity of at most `max_capacity`.
pub(crate) struct Spares<T> {
    list: RefCell<Vec<Vec<T>>>,
    max_count: usize,
    max_capacity: usize,
}

impl<T> Spares<T> {
    pub(crate) const fn new(max_count: usize, max_capacity: usize) -> Spares<T> {
        Spares { list: RefCell::new(Vec::new()), max_count, max_capacity }
    }

    /// An empty vector: the last one given back (with its capacity), else a new one.
    pub(crate) fn take(&self) -> Vec<T> {
        self.list.borrow_mut().pop().unwrap_or_default()
    }

    /// Keep `buf` (emptied) for the next [`Spares::take`], unless it is too big or enough are kept.
    pub(crate) fn give_back(&self, mut buf: Vec<T>) {
        if buf.capacity() == 0 || buf.capacity() > self.max_capacity {
            return;
        }
        buf.clear();
        let mut list = self.list.borrow_mut();
        if list.len() < self.max_count {
            list.push(buf);
        }
    }
}
