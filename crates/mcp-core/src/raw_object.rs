//! [`RawObject`]: edit the top level of a JSON object while every nested value stays raw bytes.
//!
//! A gateway rewrites a handful of fields (a tool `name`, a resource `uri`, `nextCursor`, `_meta`)
//! and must pass everything else through untouched. Parsing only the top level into
//! `(key, raw value)` pairs and writing them back keeps nested payloads byte for byte, keeps key
//! order, and costs one shallow scan instead of a full parse into `serde_json::Value`.

use std::borrow::Cow;
use std::fmt;

use serde::de::{self, Deserializer, MapAccess, Visitor};
use serde::ser::{SerializeMap, Serializer};
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;

/// The top level of a JSON object as ordered `(key, raw value)` pairs.
///
/// ```
/// use mcp_core::RawObject;
///
/// let text = r#"{"name":"echo","inputSchema":{"type":"object", "properties":{}},"x":1}"#;
/// let mut obj = RawObject::parse(text).unwrap();
/// assert_eq!(obj.get_str("name").as_deref(), Some("echo"));
/// obj.set_str("name", "a-echo");
/// obj.remove("x");
/// assert_eq!(
///     obj.to_json(),
///     r#"{"name":"a-echo","inputSchema":{"type":"object", "properties":{}}}"#
/// );
/// ```
#[derive(Clone, Default)]
pub struct RawObject<'a> {
    entries: Vec<(Cow<'a, str>, Cow<'a, RawValue>)>,
}

impl fmt::Debug for RawObject<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.to_json())
    }
}

impl<'a> RawObject<'a> {
    /// An empty object.
    pub fn new() -> Self {
        Self::default()
    }

    /// Parses a JSON object (anything else is an error).
    pub fn parse(text: &'a str) -> Result<Self, serde_json::Error> {
        serde_json::from_str(text)
    }

    /// Parses the object held by a raw value.
    pub fn from_raw(raw: &'a RawValue) -> Result<Self, serde_json::Error> {
        Self::parse(raw.get())
    }

    /// The raw value of `key`.
    pub fn get(&self, key: &str) -> Option<&RawValue> {
        self.entries
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_ref())
    }

    /// The raw value of `key` with the lifetime of the parsed text, when it was not replaced
    /// since parsing (values set later are owned by the object).
    pub fn get_borrowed(&self, key: &str) -> Option<&'a RawValue> {
        self.entries
            .iter()
            .find(|(k, _)| k == key)
            .and_then(|(_, v)| match v {
                Cow::Borrowed(raw) => Some(*raw),
                Cow::Owned(_) => None,
            })
    }

    /// Whether `key` is present.
    pub fn contains(&self, key: &str) -> bool {
        self.get(key).is_some()
    }

    /// `key` decoded as a string, when it is one.
    pub fn get_str(&self, key: &str) -> Option<String> {
        self.get(key)
            .and_then(|raw| serde_json::from_str::<String>(raw.get()).ok())
    }

    /// `key` decoded into any deserialisable type.
    pub fn get_as<T: serde::de::DeserializeOwned>(&self, key: &str) -> Option<T> {
        self.get(key)
            .and_then(|raw| serde_json::from_str(raw.get()).ok())
    }

    /// Sets `key` to a raw value (replacing it in place, or appending).
    pub fn set_raw(&mut self, key: &str, value: Box<RawValue>) {
        match self.entries.iter_mut().find(|(k, _)| k == key) {
            Some((_, v)) => *v = Cow::Owned(value),
            None => self
                .entries
                .push((Cow::Owned(key.to_owned()), Cow::Owned(value))),
        }
    }

    /// Sets `key` to a borrowed raw value.
    pub fn set_borrowed(&mut self, key: &str, value: &'a RawValue) {
        match self.entries.iter_mut().find(|(k, _)| k == key) {
            Some((_, v)) => *v = Cow::Borrowed(value),
            None => self
                .entries
                .push((Cow::Owned(key.to_owned()), Cow::Borrowed(value))),
        }
    }

    /// Sets `key` to `value` serialised as JSON.
    pub fn set_json(&mut self, key: &str, value: &impl Serialize) {
        if let Ok(raw) = serde_json::value::to_raw_value(value) {
            self.set_raw(key, raw);
        }
    }

    /// Sets `key` to a JSON string.
    pub fn set_str(&mut self, key: &str, value: &str) {
        self.set_json(key, &value);
    }

    /// Removes `key`, returning whether it was there.
    pub fn remove(&mut self, key: &str) -> bool {
        let before = self.entries.len();
        self.entries.retain(|(k, _)| k != key);
        before != self.entries.len()
    }

    /// Detaches the object from the text it was parsed from (every value becomes owned).
    pub fn into_owned(self) -> RawObject<'static> {
        let entries = self
            .entries
            .into_iter()
            .map(|(k, v)| (Cow::Owned(k.into_owned()), Cow::Owned(v.into_owned())))
            .collect();
        RawObject { entries }
    }

    /// A view of this object that borrows its keys and values (none is copied): for passing an
    /// owned object where a `RawObject<'_>` is taken by value.
    pub fn borrowed(&self) -> RawObject<'_> {
        let entries = self
            .entries
            .iter()
            .map(|(k, v)| (Cow::Borrowed(&**k), Cow::Borrowed(&**v)))
            .collect();
        RawObject { entries }
    }

    /// The keys, in order.
    pub fn keys(&self) -> impl Iterator<Item = &str> {
        self.entries.iter().map(|(k, _)| k.as_ref())
    }

    /// The object as JSON text.
    pub fn to_json(&self) -> String {
        // Keys are strings and values already-valid JSON: serialising cannot fail.
        serde_json::to_string(self).unwrap_or_default()
    }

    /// The object as an owned raw value.
    pub fn to_raw(&self) -> Box<RawValue> {
        // Serialised straight into a raw value: text this serialiser wrote from valid values is
        // valid JSON, so it is not parsed again to be validated (`RawValue::from_string` would).
        serde_json::value::to_raw_value(self).unwrap_or_else(|_| RawValue::NULL.to_owned())
    }
}

impl Serialize for RawObject<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(Some(self.entries.len()))?;
        for (k, v) in &self.entries {
            map.serialize_entry(k.as_ref(), v.as_ref())?;
        }
        map.end()
    }
}

#[derive(Deserialize)]
struct Key<'a>(#[serde(borrow)] Cow<'a, str>);

impl<'de: 'a, 'a> Deserialize<'de> for RawObject<'a> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct ObjectVisitor;
        impl<'de> Visitor<'de> for ObjectVisitor {
            type Value = RawObject<'de>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a JSON object")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
                let mut entries = Vec::with_capacity(map.size_hint().unwrap_or(4));
                while let Some((Key(k), v)) = map.next_entry::<Key<'de>, &'de RawValue>()? {
                    if entries.iter().any(|(existing, _)| existing == &k) {
                        return Err(de::Error::custom(format_args!("duplicate key `{k}`")));
                    }
                    entries.push((k, Cow::Borrowed(v)));
                }
                Ok(RawObject { entries })
            }
        }
        deserializer.deserialize_map(ObjectVisitor)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_nested_bytes_and_order() {
        let text = r#"{ "b" : [1, 2 ,3], "a":{"z":"\u00e9"} , "c":null }"#;
        let obj = RawObject::parse(text).expect("object");
        assert_eq!(obj.keys().collect::<Vec<_>>(), ["b", "a", "c"]);
        assert_eq!(
            obj.to_json(),
            r#"{"b":[1, 2 ,3],"a":{"z":"\u00e9"},"c":null}"#
        );
    }

    #[test]
    fn into_owned_outlives_its_source() {
        let owned = {
            let text = String::from(r#"{"a":{"b":1}}"#);
            RawObject::parse(&text).expect("object").into_owned()
        };
        assert_eq!(owned.to_json(), r#"{"a":{"b":1}}"#);
        assert!(owned.get_borrowed("a").is_none());
    }

    #[test]
    fn rejects_non_objects_and_duplicate_keys() {
        assert!(RawObject::parse("[]").is_err());
        assert!(RawObject::parse(r#"{"a":1,"a":2}"#).is_err());
        assert!(RawObject::parse(r#"{"a":1"#).is_err());
    }

    #[test]
    fn escaped_keys_are_decoded_and_rewritten_correctly() {
        let mut obj = RawObject::parse(r#"{"n\u0061me":"x"}"#).expect("object");
        assert_eq!(obj.get_str("name").as_deref(), Some("x"));
        obj.set_json("ttlMs", &0);
        assert_eq!(obj.to_json(), r#"{"name":"x","ttlMs":0}"#);
    }

    #[test]
    fn to_raw_is_the_serialised_text_and_valid_json() {
        let mut obj = RawObject::parse(r#"{"a\"b":[1, {"c":"\u00e9"}]}"#).expect("object");
        obj.set_str("q", "quote \" backslash \\ newline \n");
        let raw = obj.to_raw();
        assert_eq!(raw.get(), obj.to_json());
        let back = RawObject::from_raw(&raw).expect("valid JSON");
        assert_eq!(
            back.get_str("q").as_deref(),
            Some("quote \" backslash \\ newline \n")
        );
        assert_eq!(
            back.get("a\"b").map(RawValue::get),
            Some(r#"[1, {"c":"\u00e9"}]"#)
        );
    }
}
