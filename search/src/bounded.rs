//! A map that keeps its last `cap` insertions (first in, first out): the answer caches of the
//! aggregator and of completion context, which are emptied or keyed by index version and only
//! need a bound on their size.

use std::collections::{HashMap, VecDeque};
use std::hash::Hash;

/// At most `cap` entries; inserting a new key past that drops the oldest. `cap` 0 keeps nothing.
#[derive(Debug)]
pub struct Bounded<K, V> {
    cap: usize,
    map: HashMap<K, V>,
    order: VecDeque<K>,
}

impl<K: Hash + Eq + Clone, V> Bounded<K, V> {
    pub fn new(cap: usize) -> Self {
        Self { cap, map: HashMap::new(), order: VecDeque::new() }
    }

    pub fn get(&self, key: &K) -> Option<&V> {
        self.map.get(key)
    }

    /// Entries held.
    pub fn len(&self) -> usize {
        self.map.len()
    }

    /// Whether nothing is held.
    pub fn is_empty(&self) -> bool {
        self.map.is_empty()
    }

    /// Inserts or replaces; a replaced key keeps its place in the order.
    pub fn put(&mut self, key: K, value: V) {
        if self.cap == 0 {
            return;
        }
        if self.map.insert(key.clone(), value).is_none() {
            self.order.push_back(key);
        }
        while self.order.len() > self.cap {
            if let Some(old) = self.order.pop_front() {
                self.map.remove(&old);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_oldest_insertion_goes_first_and_replacing_keeps_the_place() {
        let mut b = Bounded::new(2);
        b.put("a", 1);
        b.put("b", 2);
        b.put("a", 3);
        assert_eq!((b.len(), b.get(&"a")), (2, Some(&3)));
        b.put("c", 4);
        assert_eq!((b.get(&"a"), b.get(&"b"), b.get(&"c")), (None, Some(&2), Some(&4)));
        let mut off = Bounded::new(0);
        off.put("a", 1);
        assert_eq!(off.len(), 0);
    }
}
