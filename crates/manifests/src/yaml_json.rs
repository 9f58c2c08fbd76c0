//! One YAML document straight to a JSON value, without building `serde_norway::Value` first.
//!
//! This is the fast path of [`crate::documents`]: it gives exactly the value the general path
//! (a `serde_norway::Value`, its merge keys applied, converted as Kubernetes' YAML decoder
//! converts) gives, and it gives up (returns `None`) on everything where the two could differ
//! or where the general path reports an error: a key that is not a string (`1:`, `true:`,
//! `~:`, a list or mapping), a tag (`!foo`), two keys of one name, a number that is not
//! finite, a merge key (`<<`) whose value is not a mapping or a list of mappings, and any
//! error of the parser. The caller then parses the text the general way, which reports the
//! error where it is, or gives the value.

use serde::de::{self, DeserializeSeed, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_json::{Map, Value as Json};

/// The document's value, or `None` when the general path must decide.
pub(crate) fn document(document: serde_norway::Deserializer) -> Option<Json> {
    let mut merges = false;
    let mut value = Seed {
        merges: &mut merges,
    }
    .deserialize(document)
    .ok()?;
    if merges {
        apply_merge(&mut value)?;
    }
    Some(value)
}

/// Builds one value; notes whether any mapping has a `<<` key.
struct Seed<'a> {
    merges: &'a mut bool,
}

/// Any failure: the general path decides. The text is never shown.
#[derive(Debug)]
struct GiveUp;

impl std::fmt::Display for GiveUp {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("left to the general path")
    }
}

impl<'de> DeserializeSeed<'de> for Seed<'_> {
    type Value = Json;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Json, D::Error> {
        deserializer.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Seed<'_> {
    type Value = Json;

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("any YAML value")
    }

    fn visit_bool<E: de::Error>(self, v: bool) -> Result<Json, E> {
        Ok(Json::Bool(v))
    }

    fn visit_i64<E: de::Error>(self, v: i64) -> Result<Json, E> {
        Ok(Json::from(v))
    }

    fn visit_u64<E: de::Error>(self, v: u64) -> Result<Json, E> {
        Ok(Json::from(v))
    }

    fn visit_f64<E: de::Error>(self, v: f64) -> Result<Json, E> {
        serde_json::Number::from_f64(v)
            .map(Json::Number)
            .ok_or_else(|| E::custom(GiveUp))
    }

    fn visit_str<E: de::Error>(self, v: &str) -> Result<Json, E> {
        Ok(Json::String(v.to_string()))
    }

    fn visit_string<E: de::Error>(self, v: String) -> Result<Json, E> {
        Ok(Json::String(v))
    }

    fn visit_unit<E: de::Error>(self) -> Result<Json, E> {
        Ok(Json::Null)
    }

    fn visit_none<E: de::Error>(self) -> Result<Json, E> {
        Ok(Json::Null)
    }

    fn visit_some<D: Deserializer<'de>>(self, deserializer: D) -> Result<Json, D::Error> {
        deserializer.deserialize_any(self)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Json, A::Error> {
        let mut out = Vec::with_capacity(seq.size_hint().unwrap_or(0));
        while let Some(item) = seq.next_element_seed(Seed {
            merges: &mut *self.merges,
        })? {
            out.push(item);
        }
        Ok(Json::Array(out))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Json, A::Error> {
        let mut out = Map::new();
        while let Some(key) = map.next_key_seed(Key)? {
            if key == "<<" {
                *self.merges = true;
            }
            let value = map.next_value_seed(Seed {
                merges: &mut *self.merges,
            })?;
            if out.insert(key, value).is_some() {
                return Err(de::Error::custom(GiveUp));
            }
        }
        Ok(Json::Object(out))
    }

    fn visit_enum<A: de::EnumAccess<'de>>(self, _data: A) -> Result<Json, A::Error> {
        // A tagged value.
        Err(de::Error::custom(GiveUp))
    }
}

/// A mapping key: only a string is taken.
struct Key;

impl<'de> DeserializeSeed<'de> for Key {
    type Value = String;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<String, D::Error> {
        deserializer.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Key {
    type Value = String;

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("a string key")
    }

    fn visit_str<E: de::Error>(self, v: &str) -> Result<String, E> {
        Ok(v.to_string())
    }

    fn visit_string<E: de::Error>(self, v: String) -> Result<String, E> {
        Ok(v)
    }
}

/// `serde_norway::Value::apply_merge` on the converted value: each mapping's `<<` entry is
/// removed and the keys of its mapping (or of each mapping of its list, the first list item
/// first) added where the mapping lacks them, from the top down. `None` where that method
/// fails.
fn apply_merge(value: &mut Json) -> Option<()> {
    let mut stack = vec![value];
    while let Some(node) = stack.pop() {
        match node {
            Json::Object(mapping) => {
                match mapping.remove("<<") {
                    None => {}
                    Some(Json::Object(merge)) => {
                        for (k, v) in merge {
                            mapping.entry(k).or_insert(v);
                        }
                    }
                    Some(Json::Array(list)) => {
                        for item in list {
                            let Json::Object(merge) = item else {
                                return None;
                            };
                            for (k, v) in merge {
                                mapping.entry(k).or_insert(v);
                            }
                        }
                    }
                    Some(_) => return None,
                }
                stack.extend(mapping.values_mut());
            }
            Json::Array(items) => stack.extend(items),
            _ => {}
        }
    }
    Some(())
}
