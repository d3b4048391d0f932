//! Tool ids, the spellings callers may use for them, and wire names.
//!
//! An id is `namespace:name` (plugin tools, `system:echo`) or a bare `name` (host tools such
//! as seed 002's `GetPlayerInfo`). Each part is 1–64 ASCII letters, digits, `_`, `-` or `.`,
//! starting with a letter, digit or `_`; ASCII only, so that every id has a wire name every
//! surface (MCP, OpenAI, Anthropic) accepts. Callers may also write `namespace.name` (the
//! seeds' `FileOperator.WriteFile`) or the tool's wire name.

/// Longest namespace or name part.
pub const MAX_PART_LEN: usize = 64;
/// Longest wire name (OpenAI and Anthropic limit).
pub const MAX_WIRE_LEN: usize = 64;

/// Checks an id's shape; the error says what is wrong and how to fix it.
pub(crate) fn validate_id(id: &str) -> Result<(), String> {
    if id.is_empty() {
        return Err("the id is empty: write `namespace:name`, e.g. `my_plugin:do_thing`".into());
    }
    let (ns, name) = match id.split_once(':') {
        Some((ns, name)) => (Some(ns), name),
        None => (None, id),
    };
    if name.contains(':') {
        return Err("an id has at most one ':' (between namespace and name)".into());
    }
    if let Some(ns) = ns {
        validate_part(ns, "namespace")?;
    }
    validate_part(name, "name")
}

fn validate_part(part: &str, what: &str) -> Result<(), String> {
    if part.is_empty() {
        return Err(format!("the {what} part is empty"));
    }
    if part.len() > MAX_PART_LEN {
        return Err(format!(
            "the {what} part is {} characters long; at most {MAX_PART_LEN} are allowed",
            part.len()
        ));
    }
    if let Some(c) = part
        .chars()
        .find(|c| !(c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.')))
    {
        return Err(format!(
            "the {what} part contains {c:?}; use ASCII letters, digits, '_', '-' or '.'"
        ));
    }
    let first = part.as_bytes()[0];
    if !(first.is_ascii_alphanumeric() || first == b'_') {
        return Err(format!(
            "the {what} part starts with {:?}; start it with a letter, digit or '_'",
            first as char
        ));
    }
    Ok(())
}

/// True when `s` is a valid wire name: `^[A-Za-z_][A-Za-z0-9_-]{0,63}$`.
pub fn is_wire_name(s: &str) -> bool {
    let b = s.as_bytes();
    !b.is_empty()
        && b.len() <= MAX_WIRE_LEN
        && (b[0].is_ascii_alphabetic() || b[0] == b'_')
        && b.iter()
            .all(|c| c.is_ascii_alphanumeric() || *c == b'_' || *c == b'-')
}

/// The preferred wire name of an id, before collision handling: `:` and `.` become `_`, a
/// leading digit or `-` gets a `_` in front, and the result is cut to 64 characters.
pub fn base_wire_name(id: &str) -> String {
    let mut out = String::with_capacity(id.len() + 1);
    for c in id.chars() {
        out.push(if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
            c
        } else {
            '_'
        });
    }
    if !out
        .as_bytes()
        .first()
        .is_some_and(|c| c.is_ascii_alphabetic() || *c == b'_')
    {
        out.insert(0, '_');
    }
    // Only ASCII is left, so cutting at a byte index cannot split a character.
    out.truncate(MAX_WIRE_LEN);
    out
}

/// The wire name for `id` that `taken` does not already hold: the base name, else the base
/// with `_2`, `_3`, … (cut so the whole stays within 64 characters).
pub fn unique_wire_name(id: &str, taken: impl Fn(&str) -> bool) -> String {
    let base = base_wire_name(id);
    if !taken(&base) {
        return base;
    }
    let mut n = 2u32;
    loop {
        let suffix = format!("_{n}");
        let mut cand = base.clone();
        cand.truncate(MAX_WIRE_LEN - suffix.len());
        cand.push_str(&suffix);
        if !taken(&cand) {
            return cand;
        }
        n += 1;
    }
}

/// The `namespace:name` ids that `dotted` may mean (`a.b.c` → `a:b.c`, `a.b:c`), in order.
pub fn dotted_candidates(dotted: &str) -> impl Iterator<Item = String> + '_ {
    dotted
        .match_indices('.')
        .map(move |(i, _)| format!("{}:{}", &dotted[..i], &dotted[i + 1..]))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids() {
        for ok in [
            "system:echo",
            "GetPlayerInfo",
            "FileOperator:WriteFile",
            "a.b:c-d",
            "_x:9",
        ] {
            assert_eq!(validate_id(ok), Ok(()), "{ok}");
        }
        for bad in ["", ":x", "x:", "a:b:c", "a b:c", "ns:-x", "名字:x", ".x"] {
            assert!(validate_id(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn wire_names() {
        assert_eq!(
            base_wire_name("FileOperator:WriteFile"),
            "FileOperator_WriteFile"
        );
        assert_eq!(base_wire_name("9lives:x.y"), "_9lives_x_y");
        assert!(is_wire_name(&base_wire_name(&"a".repeat(200))));
        let w = unique_wire_name("a:b", |s| s == "a_b" || s == "a_b_2");
        assert_eq!(w, "a_b_3");
        let long = format!("{}:x", "n".repeat(64));
        let base = base_wire_name(&long);
        let w = unique_wire_name(&long, |s| s == base);
        assert!(is_wire_name(&w) && w.ends_with("_2"), "{w}");
    }

    #[test]
    fn dotted() {
        let c: Vec<_> = dotted_candidates("a.b.c").collect();
        assert_eq!(c, ["a:b.c", "a.b:c"]);
    }
}
