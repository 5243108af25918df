//! A faithful model of klib's `khash` (v0.2.8) for `uint32` keys, as htslib's BAI/CSI builder uses it.
//!
//! htslib writes an index's bins in the hash table's bucket order, so a byte-identical index needs the
//! same table: same hash (identity), same quadratic probing, same resize points (load factor 0.77) and
//! the same in-place "kick-out" rehash. Deletions only mark buckets, as in khash.

const HASH_UPPER: f64 = 0.77;

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Slot {
    Empty,
    Deleted,
    Full,
}

/// A `khash_t(int)`-compatible map from `u32` keys to `V`.
#[derive(Debug, Clone)]
pub struct KHash<V> {
    keys: Vec<u32>,
    vals: Vec<Option<V>>,
    flags: Vec<Slot>,
    size: usize,
    n_occupied: usize,
    upper_bound: usize,
}

impl<V> Default for KHash<V> {
    fn default() -> Self {
        Self {
            keys: Vec::new(),
            vals: Vec::new(),
            flags: Vec::new(),
            size: 0,
            n_occupied: 0,
            upper_bound: 0,
        }
    }
}

fn kroundup32(mut x: u32) -> u32 {
    x = x.wrapping_sub(1);
    x |= x >> 1;
    x |= x >> 2;
    x |= x >> 4;
    x |= x >> 8;
    x |= x >> 16;
    x.wrapping_add(1)
}

impl<V> KHash<V> {
    /// Number of live keys (`kh_size`).
    pub fn len(&self) -> usize {
        self.size
    }

    /// Whether there are no live keys.
    pub fn is_empty(&self) -> bool {
        self.size == 0
    }

    fn n_buckets(&self) -> usize {
        self.flags.len()
    }

    fn resize(&mut self, new_n_buckets: usize) {
        let mut new_n = kroundup32(new_n_buckets as u32) as usize;
        if new_n < 4 {
            new_n = 4;
        }
        if self.size >= (new_n as f64 * HASH_UPPER + 0.5) as usize {
            return; // requested size too small
        }
        let mut new_flags = vec![Slot::Empty; new_n];
        let old_n = self.n_buckets();
        if old_n < new_n {
            self.keys.resize(new_n, 0);
            self.vals.resize_with(new_n, || None);
        }
        let new_mask = new_n - 1;
        for j in 0..old_n {
            if self.flags[j] != Slot::Full {
                continue;
            }
            let mut key = self.keys[j];
            let mut val = self.vals[j].take();
            self.flags[j] = Slot::Deleted;
            loop {
                // kick-out process, as in khash's kh_resize
                let mut i = key as usize & new_mask;
                let mut step = 0;
                while new_flags[i] != Slot::Empty {
                    step += 1;
                    i = (i + step) & new_mask;
                }
                new_flags[i] = Slot::Full;
                if i < old_n && self.flags[i] == Slot::Full {
                    std::mem::swap(&mut self.keys[i], &mut key);
                    std::mem::swap(&mut self.vals[i], &mut val);
                    self.flags[i] = Slot::Deleted;
                } else {
                    self.keys[i] = key;
                    self.vals[i] = val;
                    break;
                }
            }
        }
        if old_n > new_n {
            self.keys.truncate(new_n);
            self.vals.truncate(new_n);
        }
        self.flags = new_flags;
        self.n_occupied = self.size;
        self.upper_bound = (new_n as f64 * HASH_UPPER + 0.5) as usize;
    }

    /// `kh_put` followed by initialising an absent value with `make`; returns the value.
    pub fn entry(&mut self, key: u32, make: impl FnOnce() -> V) -> &mut V {
        if self.n_occupied >= self.upper_bound {
            if self.n_buckets() > self.size << 1 {
                self.resize(self.n_buckets() - 1); // clear deleted buckets
            } else {
                self.resize(self.n_buckets() + 1); // expand
            }
        }
        let n = self.n_buckets();
        let mask = n - 1;
        let mut site = n;
        let mut x = n;
        let mut i = key as usize & mask;
        if self.flags[i] == Slot::Empty {
            x = i;
        } else {
            let last = i;
            let mut step = 0;
            while self.flags[i] != Slot::Empty
                && (self.flags[i] == Slot::Deleted || self.keys[i] != key)
            {
                if self.flags[i] == Slot::Deleted {
                    site = i;
                }
                step += 1;
                i = (i + step) & mask;
                if i == last {
                    x = site;
                    break;
                }
            }
            if x == n {
                x = if self.flags[i] == Slot::Empty && site != n {
                    site
                } else {
                    i
                };
            }
        }
        match self.flags[x] {
            Slot::Empty => {
                self.keys[x] = key;
                self.vals[x] = Some(make());
                self.flags[x] = Slot::Full;
                self.size += 1;
                self.n_occupied += 1;
            }
            Slot::Deleted => {
                self.keys[x] = key;
                self.vals[x] = Some(make());
                self.flags[x] = Slot::Full;
                self.size += 1;
            }
            Slot::Full => {}
        }
        self.vals[x].as_mut().expect("a full bucket has a value")
    }

    /// The value of `key` (`kh_get`).
    pub fn get_mut(&mut self, key: u32) -> Option<&mut V> {
        let i = self.find(key)?;
        self.vals[i].as_mut()
    }

    fn find(&self, key: u32) -> Option<usize> {
        let n = self.n_buckets();
        if n == 0 {
            return None;
        }
        let mask = n - 1;
        let mut i = key as usize & mask;
        let last = i;
        let mut step = 0;
        while self.flags[i] != Slot::Empty
            && (self.flags[i] == Slot::Deleted || self.keys[i] != key)
        {
            step += 1;
            i = (i + step) & mask;
            if i == last {
                return None;
            }
        }
        (self.flags[i] == Slot::Full).then_some(i)
    }

    /// Removes `key` (`kh_del`: marks the bucket deleted) and returns its value.
    pub fn remove(&mut self, key: u32) -> Option<V> {
        let i = self.find(key)?;
        self.flags[i] = Slot::Deleted;
        self.size -= 1;
        self.vals[i].take()
    }

    /// Live keys in bucket order (`kh_begin`..`kh_end` with `kh_exist`).
    pub fn keys_in_bucket_order(&self) -> Vec<u32> {
        (0..self.n_buckets())
            .filter(|&i| self.flags[i] == Slot::Full)
            .map(|i| self.keys[i])
            .collect()
    }

    /// Live entries in bucket order.
    pub fn iter(&self) -> impl Iterator<Item = (u32, &V)> + '_ {
        (0..self.n_buckets())
            .filter(|&i| self.flags[i] == Slot::Full)
            .map(|i| (self.keys[i], self.vals[i].as_ref().expect("full bucket")))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn insert_get_remove_and_grow() {
        let mut h = KHash::default();
        for k in [4681u32, 37450, 5, 4681 + 8, 9, 13, 1, 2, 3, 100, 200] {
            *h.entry(k, || 0) += k;
        }
        assert_eq!(h.len(), 11);
        assert_eq!(h.get_mut(37450).copied(), Some(37450));
        assert_eq!(h.remove(5), Some(5));
        assert!(h.get_mut(5).is_none());
        assert_eq!(h.len(), 10);
        let keys = h.keys_in_bucket_order();
        assert_eq!(keys.len(), 10);
        let mut sorted = keys.clone();
        sorted.sort_unstable();
        assert_eq!(sorted, [1, 2, 3, 9, 13, 100, 200, 4681, 4689, 37450]);
        // The real check of the bucket order is byte-identity with samtools' indexes (tests/e2e/stats.rs).
    }
}
