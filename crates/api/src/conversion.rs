//! The result of converting an object from an older API generation to v1.

/// A converted object plus what could not be carried over exactly. Conversion never drops a
/// field silently: anything without a v1 home becomes a warning naming the field.
#[derive(Clone, Debug, PartialEq)]
pub struct Converted<T> {
    pub object: T,
    pub warnings: Vec<String>,
}

impl<T> Converted<T> {
    pub fn new(object: T) -> Self {
        Converted {
            object,
            warnings: Vec::new(),
        }
    }

    pub fn warn(&mut self, message: impl Into<String>) {
        self.warnings.push(message.into());
    }

    pub fn map<U>(self, f: impl FnOnce(T) -> U) -> Converted<U> {
        Converted {
            object: f(self.object),
            warnings: self.warnings,
        }
    }
}
