//! Event maps kept per thread and point: firing a point fills the last event's map again
//! (the keys stay, string values are overwritten in their buffers) instead of allocating
//! and hashing every key and value anew. The caller takes its big values (arguments,
//! inputs, outputs) back out before handing the map back.

use std::cell::RefCell;
use std::fmt::Write;

use serde_json::{Map, Value};

thread_local! {
    static SPARE: RefCell<Vec<Option<Map<String, Value>>>> = const { RefCell::new(Vec::new()) };
}

/// A map for an event of point `ix` with exactly `keys`, in this order: the one the last
/// event of this point on this thread handed back (values as it left them, to be
/// overwritten), or a new one with null values.
pub(crate) fn event_map(ix: usize, keys: &[&str]) -> Map<String, Value> {
    // `try_with`: a thread tearing down its locals simply gets a new map.
    let spare = SPARE
        .try_with(|s| s.borrow_mut().get_mut(ix).and_then(Option::take))
        .ok()
        .flatten();
    match spare {
        Some(m) if m.len() == keys.len() && m.keys().zip(keys).all(|(a, b)| a == b) => m,
        _ => keys.iter().map(|k| (k.to_string(), Value::Null)).collect(),
    }
}

/// Keeps `m` for the next event of point `ix` on this thread.
pub(crate) fn recycle(ix: usize, m: Map<String, Value>) {
    let _ = SPARE.try_with(|s| {
        let mut s = s.borrow_mut();
        if s.len() <= ix {
            s.resize_with(ix + 1, || None);
        }
        s[ix] = Some(m);
    });
}

/// Sets `slot` to the string `text`, in the buffer of the string it holds if it holds one.
pub(crate) fn set_str(slot: &mut Value, text: &str) {
    match slot {
        Value::String(s) => {
            s.clear();
            s.push_str(text);
        }
        other => *other = Value::String(text.to_string()),
    }
}

/// Sets `slot` to `value` written out, as [`set_str`].
pub(crate) fn set_display(slot: &mut Value, value: &impl std::fmt::Display) {
    match slot {
        Value::String(s) => {
            s.clear();
            // Writing to a String cannot fail.
            let _ = write!(s, "{value}");
        }
        other => *other = Value::String(value.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_handed_back_map_is_reused_and_refilled_in_place() {
        // Point index far from the real ones, so other tests on this thread do not meet it.
        let ix = 1000;
        let mut m = event_map(ix, &["tool", "args"]);
        assert_eq!(
            Value::Object(m.clone()),
            json!({"tool": null, "args": null})
        );
        for (i, slot) in m.values_mut().enumerate() {
            match i {
                0 => set_str(slot, "a:long-tool-name"),
                _ => *slot = json!({"x": 1}),
            }
        }
        let buf = m["tool"].as_str().map(str::as_ptr);
        recycle(ix, m);
        let mut m = event_map(ix, &["tool", "args"]);
        // The same map: keys in place, the old values until they are overwritten.
        assert_eq!(m["args"], json!({"x": 1}));
        if let Some(slot) = m.values_mut().next() {
            set_str(slot, "b:short");
        }
        assert_eq!(m["tool"], json!("b:short"));
        assert_eq!(
            m["tool"].as_str().map(str::as_ptr),
            buf,
            "the string's buffer is reused"
        );
        recycle(ix, m);
        // Other keys get a fresh map (the spare one, not matching, is dropped).
        let other = event_map(ix, &["tool", "caller"]);
        assert_eq!(Value::Object(other), json!({"tool": null, "caller": null}));
    }

    #[test]
    fn set_display_writes_over_non_strings() {
        let mut v = json!(5);
        set_display(&mut v, &"cli");
        assert_eq!(v, json!("cli"));
        set_display(&mut v, &42);
        assert_eq!(v, json!("42"));
    }
}
