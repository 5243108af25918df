//! One memory budget shared by every stage and every job of a runtime, handed out as reservations
//! (the model is DataFusion's `MemoryPool`/`MemoryReservation`).
//!
//! A stage that holds data in memory (the sorter's records, the final phase's encoded ranges, the
//! markdup read-end table) grows its [`Reservation`] before it allocates; when [`Reservation::try_grow`]
//! refuses, the stage spills or waits ([`Reservation::grow_waiting`]), so the sum of what all stages
//! of all jobs on the pool hold stays within the pool's limit. Nobody computes another stage's share by
//! hand: a stage reserves what it needs up front and the rest is whatever the pool still has.

use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

/// A memory budget in bytes, shared by reference counting.
#[derive(Clone)]
pub struct MemoryPool {
    inner: Arc<PoolInner>,
}

struct PoolInner {
    limit: usize,
    state: Mutex<PoolState>,
    freed: Condvar,
}

#[derive(Default)]
struct PoolState {
    used: usize,
    peak: usize,
}

/// Refused: the pool has less than was asked for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Exhausted {
    /// Bytes asked for.
    pub requested: usize,
    /// Bytes the pool had left.
    pub available: usize,
}

impl std::fmt::Display for Exhausted {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "memory pool exhausted: {} bytes requested, {} available",
            self.requested, self.available
        )
    }
}

impl std::error::Error for Exhausted {}

impl MemoryPool {
    /// A pool of `limit` bytes.
    pub fn new(limit: usize) -> Self {
        Self {
            inner: Arc::new(PoolInner {
                limit,
                state: Mutex::new(PoolState::default()),
                freed: Condvar::new(),
            }),
        }
    }

    /// The pool's size in bytes.
    pub fn limit(&self) -> usize {
        self.inner.limit
    }

    /// Bytes reserved now.
    pub fn reserved(&self) -> usize {
        self.lock().used
    }

    /// The most bytes ever reserved at once.
    pub fn peak(&self) -> usize {
        self.lock().peak
    }

    /// Bytes still available.
    pub fn available(&self) -> usize {
        self.inner.limit.saturating_sub(self.lock().used)
    }

    /// A new, empty reservation named `consumer` (for messages).
    pub fn reservation(&self, consumer: &str) -> Reservation {
        Reservation {
            pool: self.clone(),
            size: 0,
            consumer: consumer.to_string(),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, PoolState> {
        self.inner.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn try_take(&self, n: usize) -> Result<(), Exhausted> {
        let mut st = self.lock();
        let available = self.inner.limit.saturating_sub(st.used);
        if n > available {
            return Err(Exhausted {
                requested: n,
                available,
            });
        }
        st.used += n;
        st.peak = st.peak.max(st.used);
        Ok(())
    }

    fn give_back(&self, n: usize) {
        if n == 0 {
            return;
        }
        let mut st = self.lock();
        st.used = st.used.saturating_sub(n);
        drop(st);
        self.inner.freed.notify_all();
    }
}

impl std::fmt::Debug for MemoryPool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "MemoryPool {{ limit: {}, reserved: {} }}",
            self.limit(),
            self.reserved()
        )
    }
}

/// Bytes held from a [`MemoryPool`]; given back when shrunk or dropped.
pub struct Reservation {
    pool: MemoryPool,
    size: usize,
    consumer: String,
}

impl Reservation {
    /// Bytes held.
    pub fn size(&self) -> usize {
        self.size
    }

    /// The consumer's name.
    pub fn consumer(&self) -> &str {
        &self.consumer
    }

    /// The pool this reservation draws from.
    pub fn pool(&self) -> &MemoryPool {
        &self.pool
    }

    /// Takes `n` more bytes if the pool has them.
    pub fn try_grow(&mut self, n: usize) -> Result<(), Exhausted> {
        self.pool.try_take(n)?;
        self.size += n;
        Ok(())
    }

    /// Takes `n` more bytes, waiting for other reservations to give memory back; `stop` is polled
    /// while waiting (cancellation). A request larger than the whole pool is refused at once.
    pub fn grow_waiting(&mut self, n: usize, stop: impl Fn() -> bool) -> Result<(), Exhausted> {
        if n > self.pool.limit() {
            return Err(Exhausted {
                requested: n,
                available: self.pool.available(),
            });
        }
        let inner = &self.pool.inner;
        let mut st = self.pool.lock();
        loop {
            let available = inner.limit.saturating_sub(st.used);
            if n <= available {
                st.used += n;
                st.peak = st.peak.max(st.used);
                self.size += n;
                return Ok(());
            }
            if stop() {
                return Err(Exhausted {
                    requested: n,
                    available,
                });
            }
            st = inner
                .freed
                .wait_timeout(st, Duration::from_millis(50))
                .unwrap_or_else(|p| p.into_inner())
                .0;
        }
    }

    /// Gives `n` bytes back (at most what is held).
    pub fn shrink(&mut self, n: usize) {
        let n = n.min(self.size);
        self.size -= n;
        self.pool.give_back(n);
    }

    /// Gives everything back; returns how much that was.
    pub fn free(&mut self) -> usize {
        let n = self.size;
        self.shrink(n);
        n
    }

    /// Splits `n` bytes off into a new reservation of the same pool (for a stage handed to another
    /// thread).
    pub fn split(&mut self, n: usize, consumer: &str) -> Reservation {
        let n = n.min(self.size);
        self.size -= n;
        Reservation {
            pool: self.pool.clone(),
            size: n,
            consumer: consumer.to_string(),
        }
    }
}

impl Drop for Reservation {
    fn drop(&mut self) {
        self.free();
    }
}

impl std::fmt::Debug for Reservation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Reservation {{ {}: {} }}", self.consumer, self.size)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reservations_stay_within_the_limit_and_give_back_on_drop() {
        let pool = MemoryPool::new(100);
        let mut a = pool.reservation("a");
        let mut b = pool.reservation("b");
        a.try_grow(60).unwrap();
        assert_eq!(
            b.try_grow(50),
            Err(Exhausted {
                requested: 50,
                available: 40
            })
        );
        b.try_grow(40).unwrap();
        assert_eq!(pool.reserved(), 100);
        a.shrink(10);
        assert_eq!(pool.available(), 10);
        let c = a.split(20, "c");
        assert_eq!((a.size(), c.size(), pool.reserved()), (30, 20, 90));
        drop(c);
        drop(b);
        assert_eq!(pool.reserved(), 30);
        assert_eq!(pool.peak(), 100);
        drop(a);
        assert_eq!(pool.reserved(), 0);
    }

    #[test]
    fn a_waiting_reservation_gets_memory_another_frees() {
        let pool = MemoryPool::new(100);
        let mut a = pool.reservation("a");
        a.try_grow(80).unwrap();
        let p = pool.clone();
        // `stop` is first polled once the request has been found too large, so the flag proves the
        // waiter is waiting before memory is freed (issue 34: no sleep standing in for that).
        let waiting = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let flag = waiting.clone();
        let waiter = std::thread::spawn(move || {
            let mut b = p.reservation("b");
            b.grow_waiting(50, || {
                flag.store(true, std::sync::atomic::Ordering::SeqCst);
                false
            })
            .unwrap();
            b.size()
        });
        while !waiting.load(std::sync::atomic::Ordering::SeqCst) {
            std::thread::yield_now();
        }
        assert_eq!(
            pool.reserved(),
            80,
            "the waiter got memory before any was freed"
        );
        a.shrink(40);
        assert_eq!(waiter.join().unwrap(), 50);
        assert!(pool.peak() <= 100);
        let mut c = pool.reservation("c");
        assert!(c.grow_waiting(500, || false).is_err()); // bigger than the pool: refused at once
        assert!(c.grow_waiting(90, || true).is_err()); // stopped while waiting
    }
}
