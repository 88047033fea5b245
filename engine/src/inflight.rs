//! [`InFlight`]: a fixed ring of read futures, submitted together and consumed in order.
//!
//! Each pushed future is polled once right away, which hands its request to the executor's
//! reactor; the reactor submits everything queued so far with a single `io_uring_enter` when the
//! task next yields. The decoder then awaits the oldest read only. The ring's storage is
//! allocated once per scan, so steady-state reads cost no allocation here.
//!
//! Layering: a leaf of the crate (imports nothing from it); the `dma` scan loop uses it.

use std::future::{poll_fn, Future};
use std::pin::Pin;
use std::task::{Context, Poll};

enum Slot<F: Future> {
    Empty,
    Running(F),
    Done(F::Output),
}

/// A bounded FIFO of futures that are polled from the moment they are pushed.
pub struct InFlight<F: Future> {
    slots: Pin<Box<[Slot<F>]>>,
    head: usize,
    len: usize,
}

impl<F: Future> InFlight<F> {
    /// A ring that holds at most `capacity` futures (at least one).
    pub fn with_capacity(capacity: usize) -> Self {
        let slots: Vec<Slot<F>> = (0..capacity.max(1)).map(|_| Slot::Empty).collect();
        InFlight {
            slots: Box::into_pin(slots.into_boxed_slice()),
            head: 0,
            len: 0,
        }
    }

    /// Whether nothing is in flight.
    #[cfg(test)]
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Whether another future fits.
    pub fn has_room(&self) -> bool {
        self.len < self.slots.len()
    }

    fn slot(&mut self, i: usize) -> Pin<&mut Slot<F>> {
        // SAFETY: the boxed slice is pinned and never reallocated; projecting to one element
        // keeps it in place. A `Running` future is only ever dropped in place (through
        // `Pin::set`), never moved; only a `Done` output is moved out (see `take_done`).
        unsafe { self.slots.as_mut().map_unchecked_mut(|s| &mut s[i]) }
    }

    /// Polls the future in slot `i` once; stores its output if it finished.
    fn poll_slot(&mut self, i: usize, cx: &mut Context<'_>) -> bool {
        let mut slot = self.slot(i);
        // SAFETY: structural pinning of the `Running` variant's future.
        let fut = unsafe {
            match slot.as_mut().get_unchecked_mut() {
                Slot::Running(f) => Pin::new_unchecked(f),
                Slot::Done(_) => return true,
                Slot::Empty => return false,
            }
        };
        match fut.poll(cx) {
            Poll::Ready(out) => {
                slot.set(Slot::Done(out));
                true
            }
            Poll::Pending => false,
        }
    }

    fn take_done(&mut self, i: usize) -> Option<F::Output> {
        // SAFETY: only a `Done` output (not pinned) is moved out; a `Running` slot is untouched.
        let slot = unsafe { self.slot(i).get_unchecked_mut() };
        match std::mem::replace(slot, Slot::Empty) {
            Slot::Done(out) => Some(out),
            other => {
                *slot = other;
                None
            }
        }
    }

    /// Adds `fut` at the tail and polls it once so its request is queued for submission.
    ///
    /// # Panics
    /// When the ring is full; callers check [`Self::has_room`].
    pub async fn push(&mut self, fut: F) {
        assert!(self.has_room(), "InFlight ring is full");
        let i = (self.head + self.len) % self.slots.len();
        self.slot(i).set(Slot::Running(fut));
        self.len += 1;
        poll_fn(|cx| {
            self.poll_slot(i, cx);
            Poll::Ready(())
        })
        .await;
    }

    /// Waits for the oldest future and returns its output, or `None` when the ring is empty.
    pub async fn pop(&mut self) -> Option<F::Output> {
        if self.len == 0 {
            return None;
        }
        let i = self.head;
        poll_fn(|cx| {
            if self.poll_slot(i, cx) {
                Poll::Ready(())
            } else {
                Poll::Pending
            }
        })
        .await;
        let out = self.take_done(i);
        self.head = (self.head + 1) % self.slots.len();
        self.len -= 1;
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::Cell;
    use std::rc::Rc;

    /// A future that is ready on its `n`-th poll and counts its polls.
    struct ReadyAfter {
        polls: Rc<Cell<u32>>,
        n: u32,
        value: u32,
    }

    impl Future for ReadyAfter {
        type Output = u32;
        fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<u32> {
            self.polls.set(self.polls.get() + 1);
            if self.polls.get() >= self.n {
                Poll::Ready(self.value)
            } else {
                cx.waker().wake_by_ref();
                Poll::Pending
            }
        }
    }

    #[test]
    fn outputs_come_back_in_push_order_and_each_is_polled_on_push() {
        futures_lite::future::block_on(async {
            let mut ring = InFlight::with_capacity(3);
            let counters: Vec<_> = (0..3).map(|_| Rc::new(Cell::new(0))).collect();
            for (i, c) in counters.iter().enumerate() {
                ring.push(ReadyAfter {
                    polls: c.clone(),
                    n: 3 - i as u32,
                    value: i as u32,
                })
                .await;
            }
            assert!(!ring.has_room());
            assert!(counters.iter().all(|c| c.get() == 1));
            let mut out = Vec::new();
            while let Some(v) = ring.pop().await {
                out.push(v);
            }
            assert_eq!(out, vec![0, 1, 2]);
            assert!(ring.is_empty());
        });
    }
}
