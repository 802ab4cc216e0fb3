//! [`Hash`]: a Redis hash, in insertion order.

/// A hash's fields in the order `HGETALL` and `HKEYS` list them: insertion order, as a
/// listpack-encoded hash keeps it (a new field goes last, an update stays in place).
///
/// Redis converts a hash to a hashtable when it has more than 128 fields or a value longer
/// than 64 bytes, and then lists it in an order the model cannot know (a seeded hash): the
/// model keeps insertion order, one of the orders a real server may show. See the crate's
/// docs.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct Hash {
    fields: Vec<(Vec<u8>, Vec<u8>)>,
}

impl Hash {
    /// The value of `field`.
    pub fn get(&self, field: &[u8]) -> Option<&[u8]> {
        self.fields
            .iter()
            .find(|(f, _)| f == field)
            .map(|(_, v)| v.as_slice())
    }

    /// The fields and values, in `HGETALL` order.
    pub fn iter(&self) -> impl ExactSizeIterator<Item = (&[u8], &[u8])> {
        self.fields
            .iter()
            .map(|(f, v)| (f.as_slice(), v.as_slice()))
    }

    /// How many fields it has.
    pub fn len(&self) -> usize {
        self.fields.len()
    }

    /// True when it has no field (Redis deletes such a key).
    pub fn is_empty(&self) -> bool {
        self.fields.is_empty()
    }

    /// Sets `field`; true when it is new.
    pub(crate) fn set(&mut self, field: &[u8], value: Vec<u8>) -> bool {
        match self.fields.iter_mut().find(|(f, _)| f == field) {
            Some((_, old)) => {
                *old = value;
                false
            }
            None => {
                self.fields.push((field.to_vec(), value));
                true
            }
        }
    }

    /// Removes `field`; true when it was there.
    pub(crate) fn remove(&mut self, field: &[u8]) -> bool {
        let before = self.fields.len();
        self.fields.retain(|(f, _)| f != field);
        self.fields.len() != before
    }
}
