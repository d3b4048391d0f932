//! Places in source text: turning byte offsets and keys into 1-based line/column pairs, so every
//! load problem can point at the line a modder has to fix.

/// 1-based line and column (in characters) of byte offset `at` in `text`.
pub fn line_col(text: &str, at: usize) -> (u32, u32) {
    let at = floor_char_boundary(text, at.min(text.len()));
    let before = &text[..at];
    let line = before.matches('\n').count() as u32 + 1;
    let line_start = before.rfind('\n').map(|i| i + 1).unwrap_or(0);
    let column = text[line_start..at].chars().count() as u32 + 1;
    (line, column)
}

fn floor_char_boundary(text: &str, mut at: usize) -> usize {
    while at > 0 && !text.is_char_boundary(at) {
        at -= 1;
    }
    at
}

/// Line and column of the first JSON member named `key` (`"key"` followed by `:`).
/// A plain text search: good enough to point at a field of a small manifest.
pub fn json_key(text: &str, key: &str) -> Option<(u32, u32)> {
    let needle = format!("\"{key}\"");
    let mut from = 0;
    while let Some(i) = text[from..].find(&needle) {
        let start = from + i;
        let after = text[start + needle.len()..].trim_start();
        if after.starts_with(':') {
            return Some(line_col(text, start));
        }
        from = start + needle.len();
    }
    None
}

/// Line and column of the first YAML mapping key `key` (at the start of a line, any
/// indentation, followed by `:`).
pub fn yaml_key(text: &str, key: &str) -> Option<(u32, u32)> {
    let mut offset = 0;
    for line in text.split_inclusive('\n') {
        let trimmed = line.trim_start();
        let indent = line.len() - trimmed.len();
        let trimmed = trimmed.strip_prefix("- ").unwrap_or(trimmed);
        for candidate in [key.to_string(), format!("\"{key}\""), format!("'{key}'")] {
            if let Some(rest) = trimmed.strip_prefix(&candidate) {
                if rest.trim_start().starts_with(':') {
                    let col_off = indent + (line.trim_start().len() - trimmed.len());
                    return Some(line_col(text, offset + col_off));
                }
            }
        }
        offset += line.len();
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn offsets_become_lines_and_columns() {
        let t = "ab\ncdé\nf";
        assert_eq!(line_col(t, 0), (1, 1));
        assert_eq!(line_col(t, 3), (2, 1));
        assert_eq!(line_col(t, 7), (2, 4));
        assert_eq!(line_col(t, 8), (3, 1));
    }

    #[test]
    fn keys_are_found() {
        let j = "{\n  \"id\": \"x\",\n  \"parameters\": {}\n}";
        assert_eq!(json_key(j, "parameters"), Some((3, 3)));
        assert_eq!(json_key(j, "nope"), None);
        let y = "name: a\npermissions:\n  processes: true\n";
        assert_eq!(yaml_key(y, "processes"), Some((3, 3)));
    }
}
