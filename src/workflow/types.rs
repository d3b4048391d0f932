//! Slot vocabulary shared by node definitions and workflow interfaces: `dataFlowType`,
//! `GroupSlotInfo`-shaped slot definitions, and an order-keeping map for them.

use std::fmt;

use serde::de::{MapAccess, Visitor};
use serde::ser::SerializeMap;
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::Value;

/// What travels on an edge (ComfyTavern's `dataFlowType`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, Default)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum DataFlowType {
    /// Text.
    String,
    /// A whole number.
    Integer,
    /// Any number.
    Float,
    /// `true` / `false`.
    Boolean,
    /// A JSON object.
    Object,
    /// A JSON array.
    Array,
    /// Bytes (carried as a base64 string in JSON).
    Binary,
    /// Anything; connects to every slot.
    #[default]
    Wildcard,
    /// Anything that can be converted; connects to every slot.
    ConvertibleAny,
}

impl DataFlowType {
    /// The name as written in files (`STRING`, `CONVERTIBLE_ANY` …).
    pub fn as_str(self) -> &'static str {
        match self {
            DataFlowType::String => "STRING",
            DataFlowType::Integer => "INTEGER",
            DataFlowType::Float => "FLOAT",
            DataFlowType::Boolean => "BOOLEAN",
            DataFlowType::Object => "OBJECT",
            DataFlowType::Array => "ARRAY",
            DataFlowType::Binary => "BINARY",
            DataFlowType::Wildcard => "WILDCARD",
            DataFlowType::ConvertibleAny => "CONVERTIBLE_ANY",
        }
    }

    /// Whether an output of type `self` may feed an input of type `to`.
    ///
    /// The rule (the issue leaves everything but the first two points open):
    /// - `WILDCARD` and `CONVERTIBLE_ANY` on either side connect to anything;
    /// - equal types connect; `INTEGER` → `FLOAT` connects (every integer is a number);
    /// - `INTEGER`, `FLOAT` and `BOOLEAN` → `STRING` do NOT connect: nothing converts values
    ///   on an edge, so a node expecting text would receive a number. Put a
    ///   `core:Template` or `core:Stringify` node between them;
    /// - everything else (`FLOAT` → `INTEGER`, `STRING` → `OBJECT`, `BINARY` ↔ `STRING` …) is
    ///   a mismatch.
    pub fn connects_to(self, to: DataFlowType) -> bool {
        use DataFlowType::*;
        matches!(self, Wildcard | ConvertibleAny)
            || matches!(to, Wildcard | ConvertibleAny)
            || self == to
            || (self == Integer && to == Float)
    }

    /// The JSON Schema `type` for this flow type (seed 003 §2.3); `None` for "anything".
    pub fn json_type(self) -> Option<&'static str> {
        match self {
            DataFlowType::String | DataFlowType::Binary => Some("string"),
            DataFlowType::Integer => Some("integer"),
            DataFlowType::Float => Some("number"),
            DataFlowType::Boolean => Some("boolean"),
            DataFlowType::Object => Some("object"),
            DataFlowType::Array => Some("array"),
            DataFlowType::Wildcard | DataFlowType::ConvertibleAny => None,
        }
    }
}

impl fmt::Display for DataFlowType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One entry of `config.suggestions`: `{"value": …}` as ComfyTavern writes it, or a bare value.
#[derive(Debug, Clone, PartialEq)]
pub struct Suggestion(pub Value);

impl<'de> Deserialize<'de> for Suggestion {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let v = Value::deserialize(d)?;
        Ok(match v {
            Value::Object(mut m) if m.contains_key("value") => {
                // Checked by `contains_key` just above.
                Suggestion(m.remove("value").unwrap_or(Value::Null))
            }
            other => Suggestion(other),
        })
    }
}

impl Serialize for Suggestion {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut m = s.serialize_map(Some(1))?;
        m.serialize_entry("value", &self.0)?;
        m.end()
    }
}

/// `config` of a slot: default, suggestions, bounds. Unknown keys are kept.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct SlotConfig {
    /// Value used when nothing is connected or given.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub default: Option<Value>,
    /// Offered values (an `enum` when the slot is a `ComboOption`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub suggestions: Vec<Suggestion>,
    /// Lower bound for numbers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min: Option<f64>,
    /// Upper bound for numbers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max: Option<f64>,
    /// Anything else the editor stored (`multiline`, `step` …), passed through.
    #[serde(flatten)]
    pub extra: serde_json::Map<String, Value>,
}

/// A slot: a node input or output, or a workflow interface entry (`GroupSlotInfo`).
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SlotDefinition {
    /// The key, when the file repeats it inside the entry.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub key: Option<String>,
    /// What flows through the slot (default `WILDCARD`).
    #[serde(default)]
    pub data_flow_type: DataFlowType,
    /// Human title.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub display_name: Option<String>,
    /// What the slot is for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// A user-written description that overrides `description`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub custom_description: Option<String>,
    /// Whether a value must be connected or given.
    #[serde(default)]
    pub required: bool,
    /// Default, suggestions, bounds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub config: Option<SlotConfig>,
    /// Accepts several connections; the node receives them as an array.
    #[serde(default)]
    pub multi: bool,
    /// Marks streamed values (passed through; not streamed by this engine).
    #[serde(default)]
    pub is_stream: bool,
    /// Editor categories (`ComboOption` makes suggestions an `enum`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub match_categories: Vec<String>,
}

impl SlotDefinition {
    /// A slot of the given type.
    pub fn new(ty: DataFlowType) -> Self {
        SlotDefinition {
            data_flow_type: ty,
            ..Default::default()
        }
    }

    /// Builder: marks the slot required.
    pub fn required(mut self) -> Self {
        self.required = true;
        self
    }

    /// Builder: sets the description.
    pub fn describe(mut self, d: impl Into<String>) -> Self {
        self.description = Some(d.into());
        self
    }

    /// Builder: sets `config.default`.
    pub fn default_value(mut self, v: Value) -> Self {
        self.config.get_or_insert_with(SlotConfig::default).default = Some(v);
        self
    }

    /// Builder: sets suggestions and marks the slot a `ComboOption`.
    pub fn options<I: IntoIterator<Item = Value>>(mut self, values: I) -> Self {
        self.config
            .get_or_insert_with(SlotConfig::default)
            .suggestions = values.into_iter().map(Suggestion).collect();
        self.match_categories.push("ComboOption".into());
        self
    }

    /// Builder: accepts several connections.
    pub fn multi(mut self) -> Self {
        self.multi = true;
        self
    }

    /// `config.default`, if any.
    pub fn default(&self) -> Option<&Value> {
        self.config.as_ref().and_then(|c| c.default.as_ref())
    }

    /// The description shown to callers: `customDescription` when set, else `description`.
    pub fn effective_description(&self) -> Option<&str> {
        self.custom_description
            .as_deref()
            .filter(|s| !s.is_empty())
            .or(self.description.as_deref())
    }

    /// The suggestion values when the slot is a `ComboOption` with suggestions.
    pub fn enum_values(&self) -> Option<Vec<Value>> {
        let cfg = self.config.as_ref()?;
        if cfg.suggestions.is_empty()
            || !self
                .match_categories
                .iter()
                .any(|c| c.eq_ignore_ascii_case("ComboOption"))
        {
            return None;
        }
        Some(cfg.suggestions.iter().map(|s| s.0.clone()).collect())
    }
}

/// A JSON object read into a list of `(key, value)` pairs, keeping the file's order (the
/// order of interface slots is the order of tool parameters).
#[derive(Debug, Clone, PartialEq)]
pub struct OrderedMap<T>(pub Vec<(String, T)>);

impl<T> Default for OrderedMap<T> {
    fn default() -> Self {
        OrderedMap(Vec::new())
    }
}

impl<T> OrderedMap<T> {
    /// An empty map.
    pub fn new() -> Self {
        Self::default()
    }

    /// Looks a key up (linear: these maps hold a handful of slots).
    pub fn get(&self, key: &str) -> Option<&T> {
        self.0.iter().find(|(k, _)| k == key).map(|(_, v)| v)
    }

    /// Position of a key.
    pub fn index_of(&self, key: &str) -> Option<usize> {
        self.0.iter().position(|(k, _)| k == key)
    }

    /// Adds or replaces an entry, keeping the first position.
    pub fn insert(&mut self, key: impl Into<String>, value: T) {
        let key = key.into();
        match self.0.iter_mut().find(|(k, _)| *k == key) {
            Some(slot) => slot.1 = value,
            None => self.0.push((key, value)),
        }
    }

    /// Builder form of [`OrderedMap::insert`].
    pub fn with(mut self, key: impl Into<String>, value: T) -> Self {
        self.insert(key, value);
        self
    }

    /// Entries in order.
    pub fn iter(&self) -> impl Iterator<Item = (&str, &T)> {
        self.0.iter().map(|(k, v)| (k.as_str(), v))
    }

    /// Keys in order.
    pub fn keys(&self) -> impl Iterator<Item = &str> {
        self.0.iter().map(|(k, _)| k.as_str())
    }

    /// Number of entries.
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// True when empty.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

impl<T: Serialize> Serialize for OrderedMap<T> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut m = s.serialize_map(Some(self.0.len()))?;
        for (k, v) in &self.0 {
            m.serialize_entry(k, v)?;
        }
        m.end()
    }
}

impl<'de, T: Deserialize<'de>> Deserialize<'de> for OrderedMap<T> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V<T>(std::marker::PhantomData<T>);
        impl<'de, T: Deserialize<'de>> Visitor<'de> for V<T> {
            type Value = OrderedMap<T>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("an object")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut a: A) -> Result<Self::Value, A::Error> {
                let mut out = OrderedMap::new();
                while let Some((k, v)) = a.next_entry::<String, T>()? {
                    out.insert(k, v);
                }
                Ok(out)
            }
        }
        d.deserialize_map(V(std::marker::PhantomData))
    }
}
