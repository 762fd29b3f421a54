//! String interning: label keys, label values and resource names become dense `u32` ids so the
//! scheduler compares integers, never strings. Ids are assigned in first-seen order, which is
//! deterministic because the compiler walks its input in a fixed order.

use std::collections::HashMap;

#[derive(Clone, Debug, Default)]
pub struct Interner {
    ids: HashMap<String, u32>,
    names: Vec<String>,
    /// The value parsed as an integer, for `Gt`/`Lt` comparisons.
    numbers: Vec<Option<i64>>,
}

impl Interner {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn intern(&mut self, s: &str) -> u32 {
        if let Some(&id) = self.ids.get(s) {
            return id;
        }
        let id = self.names.len() as u32;
        self.ids.insert(s.to_string(), id);
        self.names.push(s.to_string());
        self.numbers.push(s.parse::<i64>().ok());
        id
    }

    pub fn get(&self, s: &str) -> Option<u32> {
        self.ids.get(s).copied()
    }

    pub fn name(&self, id: u32) -> &str {
        &self.names[id as usize]
    }

    pub fn number(&self, id: u32) -> Option<i64> {
        self.numbers[id as usize]
    }

    pub fn len(&self) -> usize {
        self.names.len()
    }

    pub fn is_empty(&self) -> bool {
        self.names.is_empty()
    }
}
