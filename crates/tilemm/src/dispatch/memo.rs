//! The process's memory of what it decided: a class's route, its kernel, the BLAS's route per
//! size class. The first decision for a key is final for the process, so that a given product
//! always runs the same way and gives the same bits; a later one for the same key (another
//! thread's, decided meanwhile) yields to it.

use std::sync::Mutex;

/// Decisions by key, first one final.
pub struct Memo<K, V>(Mutex<Vec<(K, V)>>);

impl<K: PartialEq, V: Clone> Memo<K, V> {
    /// An empty memo (for a `static`).
    pub const fn new() -> Self {
        Memo(Mutex::new(Vec::new()))
    }

    /// The decision for `key`, if one was made.
    pub fn get(&self, key: &K) -> Option<V> {
        let kept = self.0.lock().unwrap_or_else(|e| e.into_inner());
        kept.iter().find(|(k, _)| k == key).map(|(_, v)| v.clone())
    }

    /// Keeps `value` for `key` unless a decision was made meanwhile; returns the one kept.
    pub fn keep(&self, key: K, value: V) -> V {
        let mut kept = self.0.lock().unwrap_or_else(|e| e.into_inner());
        match kept.iter().find(|(k, _)| *k == key) {
            Some((_, earlier)) => earlier.clone(),
            None => {
                kept.push((key, value.clone()));
                value
            }
        }
    }
}

impl<K: PartialEq, V: Clone> Default for Memo<K, V> {
    fn default() -> Self {
        Self::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_first_decision_for_a_key_is_final() {
        let memo: Memo<&str, u32> = Memo::new();
        assert_eq!(memo.get(&"a"), None);
        assert_eq!(memo.keep("a", 1), 1);
        assert_eq!(memo.keep("a", 2), 1, "a later decision yields");
        assert_eq!(memo.keep("b", 3), 3);
        assert_eq!((memo.get(&"a"), memo.get(&"b")), (Some(1), Some(3)));
        // Threads racing on one key all get the same answer.
        let shared: Memo<u8, usize> = Memo::new();
        let shared = &shared;
        let answers: Vec<usize> = std::thread::scope(|s| {
            let handles: Vec<_> = (0..8).map(|i| s.spawn(move || shared.keep(0, i))).collect();
            handles.into_iter().map(|h| h.join().unwrap()).collect()
        });
        assert!(answers.iter().all(|&a| a == answers[0]));
    }
}
